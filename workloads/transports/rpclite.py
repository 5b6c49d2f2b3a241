"""``rpc-lite`` (ladder rung L3): ``serialised`` as a minimal request/response RPC, pipelined.

Every transfer is a request (zerocopy's header, the length, the serialised tensor) on the same
TCP connection as the rungs below, and the receiver answers each with a small response (status
and call number) on that connection's reverse direction. The sender does not wait for a call's
response before sending the next request: up to :attr:`RpcLiteLink.window` calls (8) are in
flight, and it reads the oldest response before it would have more. This is the analogue of an
RPC optimised for the network; what it adds to ``serialised`` is the per-call response and its
system calls. :mod:`.rpclitesw` is the same with one call in flight (stop-and-wait).
"""

from __future__ import annotations

import struct
from typing import ClassVar

import numpy as np

from workloads.transports.base import CollectiveError, Tag
from workloads.transports.serialised import SerialisedLink, SerialisedTransport
from workloads.transports.zerocopy import recv_exact

RESPONSE = struct.Struct("!IQ")  # status (0: ok), call number (from 1, per link)
WINDOW = 8  # calls in flight per link, at most


class RpcLiteLink(SerialisedLink):
    """A serialised link whose every transfer is a call answered by a response."""

    window = WINDOW  # calls in flight at most: a call is sent only once fewer are unanswered

    def __init__(self, *args, **kwargs) -> None:
        self._calls = self._answered = self._received = 0
        self._response_in = memoryview(bytearray(RESPONSE.size))
        super().__init__(*args, **kwargs)

    def send(self, tag: Tag, arr: np.ndarray) -> None:
        super().send(tag, arr)
        self._calls += 1
        while self._calls - self._answered >= self.window:
            self._await_response(tag)

    def send_nowait(self, tag: Tag, arr: np.ndarray) -> tuple[memoryview, ...] | None:
        if self._calls + 1 - self._answered >= self.window:
            return None  # this call fills the window: the thread waits for a response
        rest = super().send_nowait(tag, arr)
        if rest is not None:
            self._calls += 1
        return rest

    def _await_response(self, tag: Tag) -> None:
        with self.sending(tag):
            got = recv_exact(self.out_sock, self._response_in)
        if got != RESPONSE.size:
            raise CollectiveError(f"rank {self.me}: rank {self.next_rank} closed its "
                                  f"connection before answering on {self.where(tag)}",
                                  peer=self.next_rank)
        status, call = RESPONSE.unpack(self._response_in)
        if status or call != self._answered + 1:
            raise CollectiveError(f"rank {self.me}: rank {self.next_rank} answered call {call} "
                                  f"with status {status}, expected call {self._answered + 1} "
                                  f"on {self.where(tag)}", peer=self.next_rank)
        self._answered = call

    def receive(self, tag: Tag, out: np.ndarray) -> None:
        super().receive(tag, out)
        self._received += 1
        with self.receiving(tag):
            self.in_sock.sendall(RESPONSE.pack(0, self._received))

    def settle(self) -> None:
        while self._answered < self._calls:
            self._await_response(Tag(0, 0, 0, 0))


class RpcLiteTransport(SerialisedTransport):
    name = "rpc-lite"
    rung = 3
    adds = "calls: a response per call, 8 in flight, not a one-way stream"
    factors: ClassVar[dict[str, str]] = {
        **SerialisedTransport.factors, "calls": "a reply per call, 8 in flight"}
    link_class = RpcLiteLink
