"""A link writes what its socket takes at once on the caller's thread, and leaves the rest,
and every later transfer until it is sent, to its sender thread (``PeerLink.start_send``)."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from testbed.core.registry import TRANSPORTS
from workloads.transports.base import Endpoint, LinkSpec, PeerLostError, Tag

TIMEOUT_S = 10.0
SMALL_SNDBUF_BYTES = 4096  # the kernel doubles it; far below the large transfer


def pair(transport: str) -> tuple:
    """Two ranks' links of a 2-rank ring, over socket pairs: (rank 0's, rank 1's)."""
    link_class = TRANSPORTS.get(transport).link_class
    a_out, b_in = socket.socketpair()
    b_out, a_in = socket.socketpair()
    for s in (a_out, b_in, b_out, a_in):
        s.settimeout(TIMEOUT_S)
    a_out.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_SNDBUF_BYTES)
    b_in.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_SNDBUF_BYTES)
    here = Endpoint("127.0.0.1", 0)
    a = link_class(0, LinkSpec(0, 0, 1, 1, here, here), TIMEOUT_S, a_out, a_in)
    b = link_class(1, LinkSpec(0, 0, 0, 0, here, here), TIMEOUT_S, b_out, b_in)
    return a, b


@pytest.fixture(params=["zerocopy", "staged", "rpc-lite"])
def links(request):
    a, b = pair(request.param)
    yield a, b
    for link in (a, b):
        link.close()


def receive_all(link, tags: list[Tag], outs: list[np.ndarray]) -> threading.Thread:
    """Receive ``tags`` into ``outs`` on a thread (rank 1 reading late, or in time)."""
    thread = threading.Thread(
        target=lambda: [link.receive(t, o) for t, o in zip(tags, outs, strict=True)])
    thread.start()
    return thread


def test_a_small_transfer_goes_out_on_the_callers_thread(links):
    a, b = links
    arr = np.arange(256, dtype=np.float32)
    a.start_send(Tag(0, 0, 0, 0), arr)
    assert a._jobs.unfinished_tasks == 0  # nothing for the sender thread
    a.finish_send(Tag(0, 0, 0, 0))
    out = np.empty_like(arr)
    b.receive(Tag(0, 0, 0, 0), out)
    np.testing.assert_array_equal(out, arr)
    assert a.sent_bytes == arr.nbytes


def test_what_the_socket_cannot_take_goes_to_the_thread_and_later_transfers_queue_behind(links):
    a, b = links
    big = np.arange(1 << 20, dtype=np.float32)  # 4 MiB: far more than the socket buffers
    small = np.full(16, 7.0, dtype=np.float32)
    tags = [Tag(0, 0, 0, 0), Tag(0, 0, 0, 1)]
    a.start_send(tags[0], big)  # returns at once: nobody reads yet
    assert a._jobs.unfinished_tasks == 1  # the rest of it is the thread's
    a.start_send(tags[1], small)  # must not overtake the rest of the first
    assert a._jobs.unfinished_tasks >= 1
    outs = [np.empty_like(big), np.empty_like(small)]
    reader = receive_all(b, tags, outs)  # header checks: the order on the wire is kept
    a.finish_send(tags[0])
    a.finish_send(tags[1])
    reader.join(TIMEOUT_S)
    assert not reader.is_alive()
    np.testing.assert_array_equal(outs[0], big)
    np.testing.assert_array_equal(outs[1], small)
    assert a.sent_bytes == big.nbytes + small.nbytes


def test_a_peer_gone_is_reported_by_finish_send_not_raised_by_start_send():
    a, b = pair("zerocopy")
    b.in_sock.close()  # rank 1 is gone before rank 0 sends
    tag = Tag(0, 0, 0, 0)
    a.start_send(tag, np.ones(4, dtype=np.float32))
    with pytest.raises(PeerLostError, match="lost its connection to rank 1"):
        a.finish_send(tag)
    a.close()
    b.close()


def test_a_link_that_overrides_send_keeps_its_own_send():
    """A plug-in link built on zerocopy that changes ``send`` (not ``frame``) is not bypassed."""
    from workloads.transports.zerocopy import ZeroCopyLink

    class CountingLink(ZeroCopyLink):
        sends = 0

        def send(self, tag, arr):
            CountingLink.sends += 1
            super().send(tag, arr)

    a, b = pair("zerocopy")
    link = CountingLink(0, a.spec, TIMEOUT_S, a.out_sock, a.in_sock)
    arr = np.ones(4, dtype=np.float32)
    link.start_send(Tag(0, 0, 0, 0), arr)
    link.finish_send(Tag(0, 0, 0, 0))
    out = np.empty_like(arr)
    b.receive(Tag(0, 0, 0, 0), out)
    np.testing.assert_array_equal(out, arr)
    assert CountingLink.sends == 1
    link.close()  # closes a's sockets too: a only lent them
    a._jobs.put(None)  # a's idle sender thread ends
    b.close()
