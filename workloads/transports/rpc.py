"""``rpc`` (ladder rung L6): an RPC framework's transfers.

Every transfer is a grpc unary request carrying the serialized tensor, which the receiver
deserializes into a new array and copies into place (grpc is imported only when used). The
sender waits for each call's (empty) reply before sending the next. Copies a byte, as counted
(grpc's own are not): two sending (``tobytes``, the header's concatenation), two receiving
(the new array, the assignment).

A subclass changes what a call carries by overriding :meth:`RpcLink.encode` and
:meth:`RpcLink.decode`, and the transport's :meth:`RpcTransport.codec` (how grpc serialises
requests and replies, and the mailbox key of a request), as :mod:`.rpcproto` does;
:mod:`.rpcpipelined` keeps several calls in flight instead of one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workloads.transports.base import (
    HEADER,
    CollectiveTimeout,
    Endpoint,
    LinkSpec,
    PeerLink,
    PeerLostError,
    RendezvousError,
    Tag,
    Transport,
)

RPC_METHOD = "/fabriclab.Ring/Push"
RPC_MAX_MESSAGE = 2**31 - 1
RPC_MIN_RATE = 1e6  # bytes/s: an rpc message gets the timeout plus size / this rate


class _Mailbox:
    """Received rpc payloads keyed by (channel, slot, tag), waited for by the consumers."""

    def __init__(self) -> None:
        self._items: dict[tuple, bytes] = {}
        self._cond = threading.Condition()
        self.closed = False

    def put(self, key: tuple, payload: bytes) -> None:
        with self._cond:
            self._items[key] = payload
            self._cond.notify_all()

    def get(self, key: tuple, timeout: float) -> bytes | None:
        """The payload for ``key``, or None on timeout or abort."""
        end = time.monotonic() + timeout
        with self._cond:
            while key not in self._items:
                left = end - time.monotonic()
                if left <= 0 or self.closed:
                    return None
                self._cond.wait(left)
            return self._items.pop(key)

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()


HELLO_TAG = Tag(2**32 - 1, 0, 0, 0)


def _raw_key(request: bytes) -> tuple:
    _sender, channel, slot, *tag, _nbytes = HEADER.unpack_from(request)
    return (channel, slot, *tag)


@dataclass(frozen=True)
class Codec:
    """How grpc carries a transport's calls: the mailbox key ``(channel, slot, *tag)`` of a
    received request, the (empty) reply every call gets, and grpc's (de)serialisers of
    requests and replies (None: raw bytes)."""

    key: Callable[[Any], tuple]
    reply: Callable[[], Any] = bytes
    request_to: Callable | None = None
    request_from: Callable | None = None
    reply_to: Callable | None = None
    reply_from: Callable | None = None


class RpcLink(PeerLink):
    """A link whose every transfer is one grpc unary call carrying the serialized tensor."""

    def __init__(self, me: int, spec: LinkSpec, timeout: float, call, mailbox: _Mailbox) -> None:
        self._call = call
        self._mailbox = mailbox
        super().__init__(me, spec, timeout)

    def allowance(self, nbytes: int) -> float:
        """Seconds one whole message may take: the timeout plus 1 s per MB (slow links)."""
        return self.timeout + nbytes / RPC_MIN_RATE

    def encode(self, tag: Tag, arr: np.ndarray):
        """The request carrying ``arr``: the header and the tensor's bytes."""
        self.copied_on_send_bytes += 2 * arr.nbytes
        return self.header(tag, arr.nbytes) + arr.tobytes()

    def decode(self, tag: Tag, request, out: np.ndarray) -> None:
        """Fill ``out`` from a received request."""
        self.check_header(memoryview(request)[: HEADER.size], tag, out.nbytes)
        tensor = np.frombuffer(request, dtype=np.float32, offset=HEADER.size).copy()
        out[...] = tensor
        self.copied_on_receive_bytes += 2 * out.nbytes

    def send(self, tag: Tag, arr: np.ndarray) -> None:
        import grpc

        payload = self.encode(tag, arr)
        try:
            self._call(payload, timeout=self.allowance(arr.nbytes),
                       wait_for_ready=tag == HELLO_TAG)
        except grpc.RpcError as exc:
            raise self.call_failed(exc, tag, arr.nbytes) from None

    def call_failed(self, exc, tag: Tag, nbytes: int) -> CollectiveTimeout | PeerLostError:
        """The error to raise for the grpc error ``exc`` of the call carrying ``tag``."""
        import grpc

        code = exc.code() if hasattr(exc, "code") else None
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            cls = RendezvousError if tag == HELLO_TAG else CollectiveTimeout
            return cls(
                f"rank {self.me} could not reach rank {self.next_rank} at "
                f"{self.spec.next_addr} within {self.allowance(nbytes):.3g} s on "
                f"{self.where(tag)}; is that worker running?",
                peer=self.next_rank,
            )
        return PeerLostError(
            f"rank {self.me} lost rank {self.next_rank} on {self.where(tag)} ({code})",
            peer=self.next_rank,
        )

    def receive(self, tag: Tag, out: np.ndarray) -> None:
        key = (self.spec.channel, self.spec.slot, *tag)
        payload = self._mailbox.get(key, self.allowance(out.nbytes))
        if payload is None and self._mailbox.closed:
            raise PeerLostError(f"rank {self.me} stopped waiting on {self.where(tag)}: aborted")
        if payload is None and tag == HELLO_TAG:
            raise RendezvousError(
                f"rank {self.me} never heard from rank {self.prev_rank} on dimension "
                f"{self.spec.channel} before the rendezvous deadline; is that worker running?",
                peer=self.prev_rank,
            )
        if payload is None:
            raise CollectiveTimeout(
                f"rank {self.me} waited more than {self.allowance(out.nbytes):.3g} s for data "
                f"from rank {self.prev_rank} on {self.where(tag)}; that peer is stalled or gone",
                peer=self.prev_rank,
            )
        self.decode(tag, payload, out)


class RpcTransport(Transport):
    """A grpc server per dimension address; a client channel per link."""

    name = "rpc"
    rung = 6
    adds = "message: raw bytes, not a protobuf message (through grpc)"
    factors: ClassVar[dict[str, str]] = {
        "copies": "a staging buffer on each side", "message": "raw bytes",
        "calls": "a reply per call, stop-and-wait", "framework": "grpc"}
    reference = True
    link_class: type[RpcLink] = RpcLink

    def __init__(self, me: int, timeout: float) -> None:
        super().__init__(me, timeout)
        self.mailbox = _Mailbox()
        self._codec = self.codec()
        self.servers: list = []
        self.channels: list = []

    @staticmethod
    def options() -> list[tuple[str, int]]:
        return [
            ("grpc.max_send_message_length", RPC_MAX_MESSAGE),
            ("grpc.max_receive_message_length", RPC_MAX_MESSAGE),
        ]

    @staticmethod
    def codec() -> Codec:
        """How grpc carries this transport's requests and replies: raw bytes."""
        return Codec(_raw_key)

    def _handle(self, request, context):
        self.mailbox.put(self._codec.key(request), request)
        return self._codec.reply()

    def listen(self, endpoints: dict[int, Endpoint]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        import grpc

        codec = self._codec
        handler = grpc.method_handlers_generic_handler(
            "fabriclab.Ring",
            {"Push": grpc.unary_unary_rpc_method_handler(
                self._handle, request_deserializer=codec.request_from,
                response_serializer=codec.reply_to)},
        )
        for ep in set(endpoints.values()):
            server = grpc.server(ThreadPoolExecutor(max_workers=4), options=self.options())
            server.add_generic_rpc_handlers((handler,))
            try:
                port = server.add_insecure_port(str(ep))
            except RuntimeError:
                port = 0
            if port != ep.port:
                server.stop(None)
                raise RendezvousError(
                    f"rank {self.me} cannot serve grpc on {ep}; pick a free port or an "
                    "address of this host"
                )
            server.start()
            self.servers.append(server)

    def connect(self, specs: Iterable[LinkSpec], deadline: float
                ) -> dict[tuple[int, int], PeerLink]:
        import grpc

        for s in specs:
            # The client's source address is chosen by routing (grpc cannot bind it).
            channel = grpc.insecure_channel(str(s.next_addr), options=self.options())
            self.channels.append(channel)
            codec = self._codec
            call = channel.unary_unary(RPC_METHOD, request_serializer=codec.request_to,
                                       response_deserializer=codec.reply_from)
            link = self.link_class(self.me, s, self.timeout, call, self.mailbox)
            self.links[(s.channel, s.slot)] = link
        # Rendezvous: a hello to every next rank, and one from every previous rank.
        empty = np.empty(0, dtype=np.float32)
        links = list(self.links.values())
        for link in links:
            link.timeout = max(0.1, deadline - time.monotonic())
            link.start_send(HELLO_TAG, empty)
        try:
            for link in links:
                link.receive(HELLO_TAG, empty)
            for link in links:
                link.finish_send(HELLO_TAG)
        finally:
            for link in links:
                link.timeout = self.timeout
        return self.links

    def abort(self) -> None:
        self.mailbox.close()

    def close(self) -> None:
        super().close()
        for channel in self.channels:
            channel.close()
        for server in self.servers:
            server.stop(grace=1.0)
