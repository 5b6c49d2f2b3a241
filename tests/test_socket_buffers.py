"""Setting the buffer of another process's packet socket (testbed/emulator/socket_buffers.py),
on packet sockets of this test's own process (root)."""

import os
import socket

import pytest

from testbed.emulator import socket_buffers


@pytest.mark.root
def test_a_packet_sockets_buffer_is_set_through_a_copy_of_its_descriptor():
    if os.geteuid() != 0:
        pytest.skip("needs root (a packet socket)")
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)) as bound, \
            socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as unbound:
        bound.bind(("lo", 3))
        mine = socket_buffers.packet_sockets(os.getpid())
        inode = os.fstat(bound.fileno()).st_ino
        assert mine[inode] == socket.if_nametoindex("lo")
        assert mine[os.fstat(unbound.fileno()).st_ino] == 0
        socket_buffers.set_buffer(os.getpid(), inode, 8 * 1024 * 1024,
                                  socket_buffers.SO_RCVBUFFORCE)
        assert bound.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 8 * 1024 * 1024
        assert unbound.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) < 8 * 1024 * 1024
