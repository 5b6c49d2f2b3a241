"""One fabric run at a time per machine.

Fabric names (``leaf0``, ``h0-eth0`` ...) are the same in every run, so two runs would build
over each other. A run holds an exclusive ``flock`` on ``/run/fabriclab/lock`` from before its
first bridge until its teardown is verified; the kernel drops the lock when the holder dies,
even by SIGKILL, so a crashed run never blocks the next one. The lock is re-entrant within a
process (the runner holds it across calibration and the run's own fabric).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator

from testbed.core.errors import FabricLabError
from testbed.emulator import cleanup, procs

_guard = threading.Lock()
_depth = 0
_fd: int | None = None


def lock_path() -> os.PathLike[str]:
    return cleanup.STATE_DIR / "lock"


def holder() -> dict | None:
    """Who holds the lock, as its holder wrote it (None if nobody or unreadable)."""
    try:
        with open(lock_path()) as f:
            info = json.loads(f.read() or "null")
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


STOP_HINT = "wait for it to end or stop it with Ctrl-C"


def acquire(what: str, stop_hint: str = STOP_HINT) -> None:
    """Take the machine's fabric lock for ``what`` (re-entrant within this process); a clear
    error if another run holds it, ending with the holder's ``stop_hint`` (how to stop it).
    Each acquire is paired with one :func:`release`."""
    global _depth, _fd
    with _guard:
        if _depth == 0:
            cleanup.state_dir()
            fd = os.open(lock_path(), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                info = holder() or {}
                raise FabricLabError(
                    f"another fabriclab run is using this machine's fabric (pid "
                    f"{info.get('pid', '?')}: {info.get('what', 'unknown')}, since "
                    f"{info.get('since', '?')}): {info.get('stop') or STOP_HINT}"
                ) from None
            me = procs.identify(os.getpid())
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "start_ticks": me and me.start_ticks,
                                      "what": what, "stop": stop_hint,
                                      "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode(), 0)
            _fd = fd
        _depth += 1


def release() -> None:
    """Undo one :func:`acquire`; the last one drops the lock."""
    global _depth, _fd
    with _guard:
        _depth -= 1
        if _depth == 0 and _fd is not None:
            os.ftruncate(_fd, 0)
            os.close(_fd)  # releases the flock
            _fd = None


@contextlib.contextmanager
def exclusive_run(what: str, stop_hint: str = STOP_HINT) -> Iterator[None]:
    """Hold the machine's fabric lock for ``what`` while the block runs."""
    acquire(what, stop_hint)
    try:
        yield
    finally:
        release()
