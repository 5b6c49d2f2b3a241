"""An ssh ``ProxyCommand`` that reaches a stand-in server's sshd inside its network namespace:
``python -m testbed.emulator.ssh_proxy NETNS HOST PORT`` (root).

It enters ``/run/netns/NETNS``, connects to HOST:PORT there and hands the connected socket to
ssh over its standard output (``ProxyUseFdpass=yes``), then exits: ssh talks to the sshd
directly, with no process copying bytes in between.

The namespace is entered with ``setns`` on this one process rather than through
``ip netns exec``: a connect needs only the network namespace (not the fresh mount namespace
and ``/sys`` that ``ip netns exec`` makes), so no second program runs per connection, and the
socket keeps its namespace after it is passed. It imports nothing from fabriclab, so ssh can
run it by its path with ``python -I`` (no ``PYTHONPATH`` or user site reaches it).
"""

from __future__ import annotations

import ctypes
import os
import re
import socket
import sys

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"
CONNECT_TIMEOUT_S = 10.0
_NAME = re.compile(r"[a-z][a-z0-9]{0,7}")  # as testbed.core.servers checks a netns name


def enter_netns(name: str) -> None:
    """Move this process into the network namespace ``ip netns`` calls ``name``."""
    fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        if hasattr(os, "setns"):  # Python >= 3.12
            os.setns(fd, CLONE_NEWNET)
        else:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or not _NAME.fullmatch(argv[0]) or not argv[2].isdigit():
        print("usage: ssh_proxy NETNS HOST PORT (NETNS a namespace name, PORT a number)",
              file=sys.stderr)
        return 2
    name, host, port = argv[0], argv[1], int(argv[2])
    try:
        enter_netns(name)
    except OSError as exc:
        print(f"ssh_proxy: cannot enter network namespace {name}: {exc.strerror or exc} "
              "(is the stand-in running? `fabriclab servers status`)", file=sys.stderr)
        return 1
    try:
        conn = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        print(f"ssh_proxy: cannot connect to {host}:{port} in namespace {name}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    conn.settimeout(None)
    out = socket.socket(fileno=os.dup(1))  # ssh's end of a socketpair
    try:
        socket.send_fds(out, [b"\0"], [conn.fileno()])
    finally:
        out.close()
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
