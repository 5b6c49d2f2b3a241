"""The controller's two listening sockets, both bound by the testbed before the controller
starts and inherited as open descriptors, and who may talk on them.

Binding in the parent closes the race a "find a free port, then let the child bind it" scheme
leaves open (another local user takes the port in between and plays controller to the
switches, or API to the runner). The HTTP API is a Unix socket of mode 0600 in a directory
of mode 0700, so only root reaches it (and no web page can, whatever its DNS says). The
OpenFlow listener is TCP on the loopback, because Open vSwitch connects to it there: a
connection is served only if the peer's socket belongs to root (the switches are
ovs-vswitchd's), and a second connection claiming a datapath already connected is refused.

os-ken's OpenFlowController binds its own listener (``StreamServer((host, port), ...)``) and
takes no descriptor, so :func:`serve_openflow_on` swaps the ``StreamServer`` name in the
framework's controller module for one serving the inherited socket.
"""

from __future__ import annotations

import os
import socket
from typing import Any

API_FD_ENV = "FABRICLAB_API_FD"
OF_FD_ENV = "FABRICLAB_OF_FD"
API_HOST = "fabriclab-controller"  # the Host header every API request must carry
# stand-in servers (issue #43): OpenFlow listens on the first one's LAN address, inside its
# namespace; the LAN is reachable only from the stand-ins' namespaces, which only root can
# enter, so a switch is accepted there by its server's address (comma-separated list)
OF_LAN_PEERS_ENV = "FABRICLAB_OF_LAN_PEERS"


def inherited_socket(env_name: str) -> socket.socket | None:
    """The listening socket whose descriptor the environment variable names, if any."""
    fd = os.environ.get(env_name)
    return socket.socket(fileno=int(fd)) if fd else None


def serve_openflow_on(sock: socket.socket) -> None:
    """Make the framework's OpenFlowController accept on ``sock`` instead of binding."""
    import eventlet.greenio

    from sdn_app.compat import CONTROLLER_MODULE

    base = CONTROLLER_MODULE.StreamServer

    class InheritedServer(base):  # type: ignore[misc,valid-type]
        def __init__(self, _listen_info: Any, handle: Any = None, **_kwargs: Any) -> None:
            self.server = eventlet.greenio.GreenSocket(sock)
            self.handle = handle

    CONTROLLER_MODULE.StreamServer = InheritedServer


def _hex_addr(addr: tuple[str, int]) -> str:
    """An IPv4 (address, port) as /proc/net/tcp writes it (little-endian address)."""
    packed = socket.inet_aton(addr[0])
    return f"{int.from_bytes(packed, 'little'):08X}:{addr[1]:04X}"


def peer_uid(sock: socket.socket) -> int | None:
    """The user owning the other end of a loopback TCP connection (from /proc/net/tcp: the
    entry whose local address is our peer and whose remote address is us), or None."""
    try:
        mine, theirs = _hex_addr(sock.getsockname()), _hex_addr(sock.getpeername())
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[1] == theirs and fields[2] == mine:
                    return int(fields[7])
    except (OSError, ValueError, IndexError):
        pass
    return None


def switch_refused(sock: socket.socket) -> str | None:
    """Why a switch connection is refused (None: served): on the loopback, a peer socket not
    owned by root; on a stand-in LAN, a peer that is not one of the servers."""
    lan = os.environ.get(OF_LAN_PEERS_ENV)
    if lan:
        try:
            peer = sock.getpeername()[0]
        except OSError:
            return "a peer that is gone"
        return None if peer in lan.split(",") else f"{peer}, not a server's LAN address"
    uid = peer_uid(sock)
    return None if uid == 0 else f"a process of uid {uid}: switches are root's"
