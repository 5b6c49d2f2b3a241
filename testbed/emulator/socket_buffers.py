"""The packet sockets of ovs-vswitchd: their table (`ss`), and their buffers, set from outside.

The userspace datapath moves every packet through ``AF_PACKET`` sockets: one per port that it
reads the port's packets from, and one it sends every packet through, each made with the
machine's default buffer (208 KiB on Debian). The sending socket needs far more
(``scripts/start-ovs.sh``; a stand-in's is set here). A full receiving socket drops what
arrives, counted only by the socket (``ss -0 -m``: ``d``; ``drops.json`` records it per
port). A buffer is set through a copy of the daemon's descriptor (``pidfd_getfd``), with
``SO_SNDBUFFORCE`` or ``SO_RCVBUFFORCE``, which root may use past ``wmem_max``/``rmem_max``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
from pathlib import Path

from testbed.core.errors import FabricLabError

SYS_PIDFD_GETFD = 438  # x86_64 and every architecture with the generic syscall table
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33
SS_TIMEOUT_S = 10


def packet_socket_table() -> str | None:
    """``ss -0 -m -p``: every packet socket of this namespace with its owner and its memory
    (``skmem``: buffers, drops); None without ``ss`` or when it fails."""
    try:
        out = subprocess.run(["ss", "-0", "-m", "-p"], capture_output=True, text=True,
                             timeout=SS_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def socket_fds(pid: int) -> dict[int, int]:
    """The process's sockets: inode -> descriptor."""
    fds = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                fds[int(target[8:-1])] = int(fd)
    return fds


def packet_sockets(pid: int) -> dict[int, int]:
    """The process's packet sockets: inode -> the interface index each is bound to (0: none),
    from ``/proc/PID/net/packet`` (its network namespace's)."""
    mine = socket_fds(pid)
    found = {}
    for line in Path(f"/proc/{pid}/net/packet").read_text().splitlines()[1:]:
        cols = line.split()
        if len(cols) > 8 and int(cols[8]) in mine:
            found[int(cols[8])] = int(cols[4])
    return found


def set_buffer(pid: int, inode: int, size_bytes: int, option: int) -> None:
    """Set ``option`` (:data:`SO_SNDBUFFORCE` or :data:`SO_RCVBUFFORCE`) of process ``pid``'s
    socket ``inode`` to ``size_bytes``."""
    fd = socket_fds(pid).get(inode)
    if fd is None:
        raise FabricLabError(f"process {pid} no longer holds socket {inode}")
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        copy = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if copy < 0:
            err = ctypes.get_errno()
            raise FabricLabError(f"cannot reach process {pid}'s socket: {os.strerror(err)}")
    finally:
        os.close(pidfd)
    with socket.socket(fileno=copy) as sock:
        # the kernel doubles what it is given (room for its own bookkeeping)
        sock.setsockopt(socket.SOL_SOCKET, option, size_bytes // 2)
