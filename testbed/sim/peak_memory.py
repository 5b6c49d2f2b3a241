"""Peak resident memory of this process over one stretch of work (Linux).

Before the work, garbage is collected, glibc hands its free heap pages back to the kernel
(``malloc_trim``) and the kernel's peak-RSS mark is reset to the current RSS (``5`` written to
``/proc/self/clear_refs``, Linux 4.0 or later); after it, ``VmHWM`` is the highest RSS since.
So one run in a long-lived process (a Dask worker that has run others) is measured on its
own: ``peak_rss_bytes`` is the process's peak during the run and ``rss_start_bytes`` what it
held when the run began (interpreter, imports, what earlier runs keep). Where a step is not
available both are None rather than a lifetime peak that would mislead.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")
RESET_PEAK = "5"  # clear_refs: reset VmHWM to the current RSS


@dataclass
class RssWindow:
    """RSS when the work began and the peak during it, in bytes (None: not measurable)."""

    rss_start_bytes: int | None = None
    peak_rss_bytes: int | None = None

    def fields(self) -> dict[str, int | None]:
        return asdict(self)


def status_bytes(key: str, text: str) -> int | None:
    """A ``kB`` line of /proc/PID/status (``VmRSS``, ``VmHWM``) in bytes."""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0]) * 1024
    return None


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def _reset_peak() -> int | None:
    """Free what can be freed, reset the peak mark; the RSS then, or None if unsupported."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    try:
        CLEAR_REFS.write_text(RESET_PEAK)
        return status_bytes("VmRSS", STATUS.read_text())
    except OSError:
        return None


@contextmanager
def peak_rss() -> Iterator[RssWindow]:
    """Measure the block: the window's fields are set when it ends (also on an error)."""
    window = RssWindow()
    start = _reset_peak()
    try:
        yield window
    finally:
        if start is not None:
            try:
                peak = status_bytes("VmHWM", STATUS.read_text())
            except OSError:
                peak = None
            if peak is not None:
                # The peak of a window holds its start. The kernel's counts can disagree by a
                # little: each thread batches its RSS changes (SPLIT_RSS_COUNTING) before the
                # process's total sees them, and a Dask worker has several threads; a CI run
                # read a peak under the start.
                window.rss_start_bytes, window.peak_rss_bytes = start, max(peak, start)
