"""Setting the buffers of another process's packet sockets (testbed/emulator/socket_buffers.py):
the environment override (pure), and a packet socket of this process's own (root)."""

import os
import socket

import pytest

from testbed.core.errors import FabricLabError
from testbed.emulator import socket_buffers


def test_the_receive_buffer_is_four_mib_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv("FABRICLAB_OVS_RCVBUF", raising=False)
    assert socket_buffers.receive_buffer_bytes() == 4 * 1024 * 1024
    monkeypatch.setenv("FABRICLAB_OVS_RCVBUF", "0")
    assert socket_buffers.receive_buffer_bytes() == 0
    monkeypatch.setenv("FABRICLAB_OVS_RCVBUF", "4MiB")
    with pytest.raises(FabricLabError, match="FABRICLAB_OVS_RCVBUF"):
        socket_buffers.receive_buffer_bytes()


@pytest.mark.root
def test_a_bound_packet_sockets_receive_buffer_is_set_through_a_copy_of_its_descriptor():
    if os.geteuid() != 0:
        pytest.skip("needs root (a packet socket)")
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)) as bound, \
            socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as unbound:
        bound.bind(("lo", 3))
        mine = socket_buffers.packet_sockets(os.getpid())
        assert mine[os.fstat(bound.fileno()).st_ino] == socket.if_nametoindex("lo")
        assert mine[os.fstat(unbound.fileno()).st_ino] == 0
        assert socket_buffers.enlarge_receive_buffers(os.getpid(), 8 * 1024 * 1024) >= 1
        assert bound.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 8 * 1024 * 1024
        assert unbound.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) < 8 * 1024 * 1024
