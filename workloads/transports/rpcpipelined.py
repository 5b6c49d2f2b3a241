"""``rpc-pipelined`` (ladder rung L7): ``rpc`` with up to 8 unary calls in flight per link.

The sender starts each call with grpc's ``future`` and goes on to the next transfer without
waiting for the reply; before a call would make more than :data:`WINDOW` unanswered, it waits
for the oldest. Everything else is ``rpc``'s (raw bytes, grpc's channels), so the step from
``rpc`` is the pipelining alone, at the same window as ``rpc-lite``'s on fabriclab's sockets.
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar

import numpy as np

from workloads.transports.base import Tag
from workloads.transports.rpc import HELLO_TAG, RpcLink, RpcTransport
from workloads.transports.rpclite import WINDOW


class RpcPipelinedLink(RpcLink):
    """An rpc link that keeps up to :data:`WINDOW` calls in flight."""

    window = WINDOW

    def __init__(self, *args, **kwargs) -> None:
        self._in_flight: deque = deque()  # (tag, nbytes, future), oldest first
        super().__init__(*args, **kwargs)

    def send(self, tag: Tag, arr: np.ndarray) -> None:
        if tag == HELLO_TAG:  # the rendezvous waits for its peer, as rpc's does
            super().send(tag, arr)
            return
        while len(self._in_flight) >= self.window:
            self._await_oldest()
        future = self._call.future(self.encode(tag, arr), timeout=self.allowance(arr.nbytes))
        self._in_flight.append((tag, arr.nbytes, future))

    def _await_oldest(self) -> None:
        import grpc

        tag, nbytes, future = self._in_flight.popleft()
        try:
            future.result()
        except grpc.RpcError as exc:
            raise self.call_failed(exc, tag, nbytes) from None

    def settle(self) -> None:
        while self._in_flight:
            self._await_oldest()


class RpcPipelinedTransport(RpcTransport):
    name = "rpc-pipelined"
    rung = 7
    adds = "calls: 8 in flight, not stop-and-wait (through grpc)"
    factors: ClassVar[dict[str, str]] = {
        **RpcTransport.factors, "calls": "a reply per call, 8 in flight"}
    reference = False
    link_class = RpcPipelinedLink
