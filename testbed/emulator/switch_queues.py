"""Bytes waiting for ``ovs-vswitchd``: the receive queues of the packet sockets it reads its
ports through (the switch invariant of :mod:`analysis.switch_invariant` judges them).

Open vSwitch's userspace datapath (the only one here: the kernel module is missing) receives
each port's packets on an ``AF_PACKET`` socket. A packet that has reached the switch's port
but not yet been read by the switch waits in that socket's receive queue, which
``/proc/net/packet`` lists per socket (``Rmem``: bytes queued, as the kernel charges them).
A switch that keeps up reads each packet within microseconds of its arrival, so its queues
read empty at almost every sample; a switch that falls behind holds packets there, and once a
queue reaches the socket's buffer the kernel drops what arrives.

Only the switch's own sockets count: their inodes are read from ``/proc/PID/fd`` (another
program's capture socket on a switch port is not the switch's queue). Only reads; the switch is
never signalled.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKET_TABLE = Path("/proc/net/packet")
SYS_NET = Path("/sys/class/net")


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets ``pid`` holds open (none if it is gone)."""
    out = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[len("socket:["):-1])
    return out


def parse_packet_table(text: str, inodes: set[str]) -> dict[int, int]:
    """{interface index: bytes queued} over the sockets of ``inodes`` in ``text`` (the
    contents of ``/proc/net/packet``: sk RefCnt Type Proto Iface R Rmem User Inode)."""
    held: dict[int, int] = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 9 or fields[8] not in inodes:
            continue
        ifindex, rmem = int(fields[4]), int(fields[6])
        if ifindex:
            held[ifindex] = held.get(ifindex, 0) + rmem
    return held


def ifindex_of(name: str) -> int | None:
    """The index of root-namespace interface ``name`` (None if it does not exist)."""
    try:
        return int((SYS_NET / name / "ifindex").read_text())
    except (OSError, ValueError):
        return None


class SwitchQueues:
    """Reads how many bytes wait for the switch on each of ``ports`` (root-namespace interface
    names of switch ports); ``read()`` gives {port: bytes}."""

    REFRESH_READS = 100  # look for sockets the switch opened since, once in this many reads

    def __init__(self, pid: int, ports: list[str]) -> None:
        self.pid = pid
        self.index = {i: name for name in ports if (i := ifindex_of(name)) is not None}
        self._inodes = socket_inodes(pid)
        self._reads = 0

    def read(self) -> dict[str, int]:
        self._reads += 1
        if self._reads % self.REFRESH_READS == 0:
            self._inodes = socket_inodes(self.pid)
        try:
            text = PACKET_TABLE.read_text()
        except OSError:
            return {}
        held = parse_packet_table(text, self._inodes)
        return {name: held.get(i, 0) for i, name in self.index.items()}
