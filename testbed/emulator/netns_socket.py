"""A listening TCP socket inside another network namespace, for a process that stays in its
own: the controller's OpenFlow port on a stand-in server's LAN (issue #43).

``setns`` moves only the calling thread, so a short-lived thread enters the namespace, makes
the socket and ends; the socket stays in the namespace it was made in. Python 3.11 has no
``os.setns``: libc's is called through ctypes.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from pathlib import Path

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")  # where `ip netns add` pins named namespaces


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def server_socket_in(netns: str, host: str, port: int = 0, backlog: int = 128) -> socket.socket:
    """A TCP socket listening on ``host``:``port`` inside the named namespace (``ip netns``)."""
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def inside() -> None:
        try:
            fd = os.open(NETNS_DIR / netns, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                _setns(fd)
            finally:
                os.close(fd)
            made.append(socket.create_server((host, port), backlog=backlog))
        except BaseException as exc:  # handed to the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=inside, name=f"netns-{netns}")
    worker.start()
    worker.join()
    if failed:
        raise OSError(f"could not listen on {host}:{port} in namespace {netns}: {failed[0]}")
    return made[0]
