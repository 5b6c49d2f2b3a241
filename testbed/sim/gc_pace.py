"""Fewer garbage collections while a cluster run simulates (issue 44).

A run holds a large heap that lives long (the trace, the running jobs' flow paths, the
allocator's tables) and makes many short-lived containers. CPython's collector scans the
whole heap in a full collection, by default after every 10 collections of the middle
generation: at the vClos paper's scale those scans took about a third of a run's CPU
(500 jobs of OCS-vClos ``any``: 9.9 s with the default thresholds, 6.1 s with full
collections 100 times rarer). The young generation is collected after 20 000 net container
allocations rather than 700: most of a run's containers (paths, sets, events) have died by
then, so each collection finds fewer survivors to scan and promote (32 768 GPUs x 20 000 ECMP
jobs: 2.2 s of collections with 700, 0.7 s with 20 000). A cycle that outlives its
generation waits longer for its collection, which costs memory, not results: nothing a run
computes reads the collector (no weak references, no finalisers), so every result is the
same.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Middle-generation collections between full ones while a run simulates (CPython's: 10).
FULL_COLLECTION_EVERY = 1000
# Net container allocations between young-generation collections while a run simulates
# (CPython's: 700).
YOUNG_COLLECTION_AFTER = 20_000

_lock = threading.Lock()
_active = 0  # runs inside paced_collections (a Dask worker may run several in threads)
_saved: tuple[int, int, int] | None = None  # the thresholds before the first of them


@contextmanager
def paced_collections(every: int = FULL_COLLECTION_EVERY,
                      young: int = YOUNG_COLLECTION_AFTER) -> Iterator[None]:
    """Within the block, a young-generation collection after ``young`` net allocations and a
    full one after ``every`` middle-generation collections (never more often than the
    process's own settings); the thresholds are restored when the last block open in this
    process ends."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = gc.get_threshold()
            first, middle, full = _saved
            gc.set_threshold(max(first, young), middle, max(full, every))
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
