"""``rpc-lite-sw`` (ladder rung L4): ``rpc-lite`` stop-and-wait, one call in flight.

The sender waits for each call's response before it sends the next request, as a grpc unary
call made from one thread does (:mod:`.rpc`); everything else is ``rpc-lite``'s: the same
sockets, the same protobuf message, the same response. Between ``rpc-lite`` and ``rpc-proto``
it makes the pipelining one rung and grpc (in place of fabriclab's sockets) another.
"""

from __future__ import annotations

from typing import ClassVar

from workloads.transports.rpclite import RpcLiteLink, RpcLiteTransport


class RpcLiteStopAndWaitLink(RpcLiteLink):
    """An rpc-lite link that waits for every call's response before the next call."""

    window = 1


class RpcLiteStopAndWaitTransport(RpcLiteTransport):
    name = "rpc-lite-sw"
    rung = 4
    adds = "calls: stop-and-wait (a reply awaited per call), not 8 in flight"
    factors: ClassVar[dict[str, str]] = {
        **RpcLiteTransport.factors, "calls": "a reply per call, stop-and-wait"}
    link_class = RpcLiteStopAndWaitLink
