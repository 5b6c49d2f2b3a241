"""Processes the testbed can prove it started, and signalling only those.

A PID alone names nothing for long: ``pid_max`` is 32768 on the project's machines, so PIDs
wrap within minutes. A process is identified here by its PID *and* its start time
(``/proc/PID/stat`` field 22, clock ticks since boot), read while the process is still our
unreaped child. Signals go through a pidfd opened *before* the start time is re-checked, so
the process signalled is the one checked, never a newcomer that inherited the PID.

Namespaces are identified by the (device, inode) of ``/proc/PID/ns/net``. That inode is reused
as soon as a namespace is freed, so a recorded inode proves nothing on its own: the testbed
pins each namespace it creates with a bind mount (:mod:`testbed.emulator.cleanup`), which keeps the
namespace, and so its inode, alive until the pin is removed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, order=True)
class ProcessId:
    """One process: its PID and its start time in clock ticks since boot."""

    pid: int
    start_ticks: int

    def alive(self) -> bool:
        """The same process (not a reused PID) still exists (zombies count as gone)."""
        stat = _stat_fields(self.pid)
        return stat is not None and int(stat[19]) == self.start_ticks and stat[0] != "Z"

    def as_list(self) -> list[int]:
        return [self.pid, self.start_ticks]


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` from field 3 (state) on; the command name may hold spaces and ')'."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    return raw[raw.rfind(")") + 2:].split()


def identify(pid: int) -> ProcessId | None:
    """The identity of the process now holding ``pid`` (None if there is none)."""
    stat = _stat_fields(pid)
    return None if stat is None else ProcessId(pid, int(stat[19]))


NetnsId = tuple[int, int]  # (st_dev, st_ino) of an nsfs file


def netns_of(pid: int | str) -> NetnsId | None:
    """The network namespace of a process (None if it is gone or unreadable)."""
    try:
        st = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return None
    return st.st_dev, st.st_ino


def own_netns() -> NetnsId:
    """The namespace of the calling process: the one whose processes are never fair game.
    (``/proc/1/ns/net`` is not readable on every machine, and PID 1 need not share it.)"""
    ns = netns_of("self")
    assert ns is not None, "/proc/self/ns/net must be readable"
    return ns


def pids() -> Iterator[int]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            yield int(entry.name)


def in_netns(namespaces: Iterable[NetnsId]) -> list[ProcessId]:
    """Every process whose network namespace is one of ``namespaces``, except the caller's."""
    wanted = set(namespaces) - {own_netns()}
    found = []
    for pid in pids():
        if netns_of(pid) in wanted and (ident := identify(pid)) is not None:
            found.append(ident)
    return found


def send(proc: ProcessId, sig: int) -> bool:
    """Signal ``proc`` only if it is still the process recorded; True if it was signalled."""
    if proc.pid == os.getpid():
        return False
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:
        return False  # gone
    try:
        if not proc.alive():  # the PID now belongs to another process (or a zombie)
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def terminate(procs: Iterable[ProcessId], grace_s: float = 2.0) -> list[ProcessId]:
    """SIGTERM, wait up to ``grace_s``, SIGKILL what is left; return what is still alive."""
    procs = sorted(set(procs))
    for p in procs:
        send(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(p.alive() for p in procs):
        time.sleep(0.05)
    for p in procs:
        send(p, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(p.alive() for p in procs):
        time.sleep(0.05)
    return [p for p in procs if p.alive()]

