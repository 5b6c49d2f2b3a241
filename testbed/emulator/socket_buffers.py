"""The buffers of ovs-vswitchd's packet sockets, set from outside the daemon.

The userspace datapath moves every packet through ``AF_PACKET`` sockets: one per port that it
reads the port's packets from, and one it sends every packet through. Each is made with the
machine's default buffer (``net.core.rmem_default`` / ``wmem_default``, 208 KiB on Debian),
which holds three 64 KiB segments. A full receiving socket drops what arrives, and nothing
but the socket's own drop counter (``ss -0 -m``: ``d``) sees it. The buffers are set through a
copy of the daemon's descriptor (``pidfd_getfd``), with ``SO_RCVBUFFORCE`` /
``SO_SNDBUFFORCE``, which root may use past ``rmem_max``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
from pathlib import Path

from testbed.core.errors import FabricLabError

SYS_PIDFD_GETFD = 438  # x86_64 and every architecture with the generic syscall table
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33
#: what each port's receiving socket gets: 33 ms of packets at 1 Gbit/s, the fastest link the
#: emulator runs (the kernel charges a segment's truesize, a little above its bytes);
#: ``FABRICLAB_OVS_RCVBUF`` (bytes, 0: leave the default) overrides it, to compare
RECEIVE_BUFFER_BYTES = 4 * 1024 * 1024


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


def receive_buffer_bytes() -> int:
    """:data:`RECEIVE_BUFFER_BYTES`, or ``FABRICLAB_OVS_RCVBUF`` when set (0: the default)."""
    text = os.environ.get("FABRICLAB_OVS_RCVBUF", "")
    try:
        return int(text) if text else RECEIVE_BUFFER_BYTES
    except ValueError:
        raise FabricLabError(f"FABRICLAB_OVS_RCVBUF is {text!r}: give a size in bytes "
                             "(0 leaves the machine's default)") from None


def enlarge_receive_buffers(pid: int, size_bytes: int) -> int:
    """Give every port's receiving socket of ovs-vswitchd ``pid`` ``size_bytes``; return how
    many sockets were set (0 on the kernel datapath, which has none)."""
    done = 0
    if size_bytes <= 0:
        return 0
    for inode, ifindex in packet_sockets(pid).items():
        if ifindex:
            with contextlib.suppress(FabricLabError):  # a port removed meanwhile
                set_buffer(pid, inode, size_bytes, SO_RCVBUFFORCE)
                done += 1
    return done
