"""Fewer full garbage collections while a cluster run simulates (issue 44).

A run holds a large heap that lives long (the trace, the running jobs' flow paths, the
allocator's tables) and makes many short-lived containers. CPython's collector scans the
whole heap in a full collection, by default after every 10 collections of the middle
generation: at the vClos paper's scale those scans took about a third of a run's CPU
(500 jobs of OCS-vClos ``any``: 9.9 s with the default thresholds, 6.1 s with full
collections 100 times rarer). Young generations are still collected as before, so cycles
that die young are freed as soon; a cycle that outlives them waits longer for a full
collection, which costs memory, not results: nothing a run computes reads the collector
(no weak references, no finalisers), so every result is the same.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Middle-generation collections between full ones while a run simulates (CPython's: 10).
FULL_COLLECTION_EVERY = 1000

_lock = threading.Lock()
_active = 0  # runs inside paced_collections (a Dask worker may run several in threads)
_saved: tuple[int, int, int] | None = None  # the thresholds before the first of them


@contextmanager
def paced_collections(every: int = FULL_COLLECTION_EVERY) -> Iterator[None]:
    """Within the block, a full collection after ``every`` middle-generation collections
    (never fewer than the process's own setting); the thresholds are restored when the last
    block open in this process ends."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = gc.get_threshold()
            young, middle, full = _saved
            gc.set_threshold(young, middle, max(full, every))
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
