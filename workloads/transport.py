"""Point-to-point ring links between worker ranks: the ``zerocopy`` and ``rpc`` transports.

A *link* is one rank's place in one ring: it sends to the next rank and receives from the
previous one. Links are identified by ``(channel, slot)``: the channel is the dimension whose
NIC address carries the traffic (the flat ring uses channel 0), the slot lets one dimension
run several chunk phases at once on separate connections.

``zerocopy`` models a remote memory region: every transfer is a fixed header followed by
the bytes of the caller's registered numpy memory, sent with ``sendmsg`` on memoryviews and
received with ``recv_into`` straight into the destination (or a preallocated scratch region).
``rpc`` models an RPC framework: every transfer is a grpc unary request carrying the
serialized tensor, which the receiver deserializes into a new array and copies into place.

Both transports send on a per-link sender thread while the caller receives, so a ring step is
full duplex and large messages cannot deadlock on full socket buffers. Every blocking wait
has a timeout; failures raise :class:`CollectiveError` subclasses with a one-sentence message.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import struct
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from testbed.core.errors import FabricLabError
from testbed.core.registry import TRANSPORTS

# Header of every transfer: sender, channel, slot, collective, chunk, phase, step, slice,
# nbytes.
HEADER = struct.Struct("!IIIIIIIIQ")
# Hello sent once on every new zerocopy connection: magic, sender, channel, slot.
HELLO = struct.Struct("!4sIII")
MAGIC = b"FLR1"
RPC_METHOD = "/fabriclab.Ring/Push"
RPC_MAX_MESSAGE = 2**31 - 1
RPC_MIN_RATE = 1e6  # bytes/s: an rpc message gets the timeout plus size / this rate


class CollectiveError(FabricLabError):
    """A collective or its set-up failed.

    ``kind`` tells the launcher how primary it is; ``peer`` is the rank this one was waiting
    for, if any (an error blaming a peer that failed itself is just an echo).
    """

    kind = "error"

    def __init__(self, message: str, peer: int | None = None) -> None:
        super().__init__(message)
        self.peer = peer


class RendezvousError(CollectiveError):
    """A peer never appeared while the ranks were connecting."""

    kind = "rendezvous"


class CollectiveTimeout(CollectiveError):
    """A peer stopped sending or receiving for longer than the timeout."""

    kind = "timeout"


class PeerLostError(CollectiveError):
    """A peer closed its connection (usually because it failed first)."""

    kind = "peer_lost"


class Endpoint(NamedTuple):
    """An address a rank listens on for one dimension."""

    ip: str
    port: int

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}"


class Tag(NamedTuple):
    """Identifies one transfer: collective, chunk, phase of the chunk, ring step, and the
    slice of that step's shard (a pipelined step sends its shard in slices)."""

    coll: int
    chunk: int
    phase: int
    step: int
    slice: int = 0


@dataclass(frozen=True)
class LinkSpec:
    """One ring link of this rank: send to ``next_rank`` at ``next_addr``, receive from prev."""

    channel: int
    slot: int
    next_rank: int
    prev_rank: int
    local: Endpoint
    next_addr: Endpoint


def _as_bytes(arr: np.ndarray) -> memoryview:
    """A flat byte view of a contiguous array (no copy)."""
    return memoryview(arr).cast("B")


class Link(ABC):
    """One rank's position in one ring; :meth:`exchange` is a full-duplex ring step."""

    def __init__(self, me: int, spec: LinkSpec, timeout: float) -> None:
        self.me = me
        self.spec = spec
        self.timeout = timeout
        self._scratch = np.empty(0, dtype=np.float32)
        self._jobs: queue.Queue = queue.Queue()
        self._done: queue.Queue = queue.Queue()
        self._thread = threading.Thread(
            target=self._sender_loop, name=f"send-c{spec.channel}s{spec.slot}", daemon=True
        )
        self._thread.start()

    @property
    def next_rank(self) -> int:
        return self.spec.next_rank

    @property
    def prev_rank(self) -> int:
        return self.spec.prev_rank

    def scratch(self, count: int) -> np.ndarray:
        """A preallocated float32 region of ``count`` elements (grown only when too small)."""
        if self._scratch.size < count:
            self._scratch = np.empty(count, dtype=np.float32)
        return self._scratch[:count]

    def where(self, tag: Tag) -> str:
        return (
            f"dimension {self.spec.channel} (collective {tag.coll}, chunk {tag.chunk}, "
            f"phase {tag.phase}, step {tag.step}"
            + (f", slice {tag.slice})" if tag.slice else ")")
        )

    def header(self, tag: Tag, nbytes: int) -> bytes:
        s = self.spec
        return HEADER.pack(self.me, s.channel, s.slot, *tag, nbytes)

    def check_header(self, raw: bytes | memoryview, tag: Tag, nbytes: int) -> None:
        """Raise if a received header is not the expected transfer (a protocol bug)."""
        got = HEADER.unpack(raw)
        want = (self.prev_rank, self.spec.channel, self.spec.slot, *tag, nbytes)
        if got != want:
            raise CollectiveError(
                f"rank {self.me} expected transfer {want} from rank {self.prev_rank} but got "
                f"{got}; the ranks disagree on the schedule"
            )

    def exchange(self, tag: Tag, send: np.ndarray, recv: np.ndarray) -> None:
        """Send ``send`` to the next rank while receiving ``recv`` from the previous one."""
        self.start_send(tag, send)
        try:
            self.receive(tag, recv)
        except BaseException:
            self.finish_send(tag, quiet=True)
            raise
        self.finish_send(tag)

    def start_send(self, tag: Tag, arr: np.ndarray) -> None:
        """Queue ``arr`` for the sender thread (``arr`` must stay untouched until finished)."""
        self._jobs.put((tag, arr))

    def finish_send(self, tag: Tag, quiet: bool = False) -> None:
        """Wait for the queued send; raise its error unless ``quiet``.

        No deadline here: every send itself gives up after the timeout without progress.
        """
        while True:
            try:
                err = self._done.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._thread.is_alive():
                    err = CollectiveError(f"rank {self.me}: the sender thread died")
                    break
        if err is not None and not quiet:
            raise err

    def _sender_loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            tag, arr = job
            try:
                self.send(tag, arr)
                self._done.put(None)
            except CollectiveError as exc:
                self._done.put(exc)
            except Exception as exc:  # report, never kill the sender thread silently
                self._done.put(
                    PeerLostError(
                        f"rank {self.me} failed sending to rank {self.next_rank} on "
                        f"{self.where(tag)}: {exc}",
                        peer=self.next_rank,
                    )
                )

    @abstractmethod
    def send(self, tag: Tag, arr: np.ndarray) -> None:
        """Blocking send of ``arr`` to the next rank (runs on the sender thread)."""

    @abstractmethod
    def receive(self, tag: Tag, out: np.ndarray) -> None:
        """Blocking receive from the previous rank into ``out``."""

    def close(self) -> None:
        self._jobs.put(None)


class Transport(ABC):
    """Builds a rank's links (rendezvous) and tears them down."""

    name = "?"

    def __init__(self, me: int, timeout: float) -> None:
        self.me = me
        self.timeout = timeout
        self.links: dict[tuple[int, int], Link] = {}

    @abstractmethod
    def listen(self, endpoints: dict[int, Endpoint]) -> None:
        """Start listening on this rank's address of every channel (before any connect)."""

    @abstractmethod
    def connect(self, specs: Iterable[LinkSpec], deadline: float) -> dict[tuple[int, int], Link]:
        """Connect every link, retrying until ``deadline`` (``time.monotonic()``)."""

    @abstractmethod
    def abort(self) -> None:
        """Wake every blocked transfer with an error (used when one part already failed)."""

    def close(self) -> None:
        for link in self.links.values():
            link.close()


# --------------------------------------------------------------------------- zerocopy


def _recv_exact(sock: socket.socket, view: memoryview) -> int:
    """Fill ``view`` from ``sock``; returns bytes read (less than asked only on EOF)."""
    got = 0
    total = len(view)
    while got < total:
        n = sock.recv_into(view[got:], total - got)
        if n == 0:
            return got
        got += n
    return got


def _send_views(sock: socket.socket, views: list[memoryview]) -> None:
    """Send all ``views`` with as few ``sendmsg`` calls as the kernel allows."""
    views = [v for v in views if len(v)]
    while views:
        n = sock.sendmsg(views)
        while n:
            if n >= len(views[0]):
                n -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][n:]
                n = 0


class ZeroCopyLink(Link):
    """A link over two TCP connections: one to the next rank, one from the previous."""

    def __init__(
        self, me: int, spec: LinkSpec, timeout: float,
        out_sock: socket.socket, in_sock: socket.socket,
    ) -> None:
        self.out_sock = out_sock
        self.in_sock = in_sock
        self._hdr_view = memoryview(bytearray(HEADER.size))  # incoming header
        self._out_hdr = bytearray(HEADER.size)  # outgoing header, packed in place
        super().__init__(me, spec, timeout)

    def send(self, tag: Tag, arr: np.ndarray) -> None:
        data = _as_bytes(arr)
        s = self.spec
        HEADER.pack_into(self._out_hdr, 0, self.me, s.channel, s.slot, *tag, len(data))
        try:
            _send_views(self.out_sock, [memoryview(self._out_hdr), data])
        except TimeoutError:
            raise CollectiveTimeout(
                f"rank {self.me} could not send to rank {self.next_rank} for "
                f"{self.timeout:g} s on {self.where(tag)}; that peer is stalled",
                peer=self.next_rank,
            ) from None
        except OSError as exc:
            raise PeerLostError(
                f"rank {self.me} lost its connection to rank {self.next_rank} on "
                f"{self.where(tag)} ({exc.strerror or exc})",
                peer=self.next_rank,
            ) from None

    def receive(self, tag: Tag, out: np.ndarray) -> None:
        data = _as_bytes(out)
        try:
            if _recv_exact(self.in_sock, self._hdr_view) == HEADER.size:
                self.check_header(self._hdr_view, tag, len(data))
                if _recv_exact(self.in_sock, data) == len(data):
                    return
        except TimeoutError:
            raise CollectiveTimeout(
                f"rank {self.me} waited more than {self.timeout:g} s for data from rank "
                f"{self.prev_rank} on {self.where(tag)}; that peer is stalled or gone",
                peer=self.prev_rank,
            ) from None
        except OSError as exc:
            raise PeerLostError(
                f"rank {self.me} lost its connection from rank {self.prev_rank} on "
                f"{self.where(tag)} ({exc.strerror or exc})",
                peer=self.prev_rank,
            ) from None
        raise PeerLostError(
            f"rank {self.me}: rank {self.prev_rank} closed its connection on "
            f"{self.where(tag)}; it probably failed",
            peer=self.prev_rank,
        )

    def close(self) -> None:
        super().close()
        for sock in (self.out_sock, self.in_sock):
            sock.close()


def _tune(sock: socket.socket, timeout: float) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(timeout)


class ZeroCopyTransport(Transport):
    """Persistent TCP connections bound to each dimension's address; raw memory transfers."""

    name = "zerocopy"

    def __init__(self, me: int, timeout: float) -> None:
        super().__init__(me, timeout)
        self.listeners: dict[Endpoint, socket.socket] = {}
        self._socks: list[socket.socket] = []

    def listen(self, endpoints: dict[int, Endpoint]) -> None:
        for ep in set(endpoints.values()):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(tuple(ep))
            except OSError as exc:
                sock.close()
                raise RendezvousError(
                    f"rank {self.me} cannot listen on {ep} ({exc.strerror or exc}); "
                    "pick a free port or an address of this host"
                ) from None
            sock.listen(128)
            sock.settimeout(0.05)
            self.listeners[ep] = sock

    def _connect_one(self, spec: LinkSpec, deadline: float) -> socket.socket:
        last = "no attempt"
        while True:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((spec.local.ip, 0))
                sock.settimeout(max(0.05, min(1.0, deadline - time.monotonic())))
                sock.connect(tuple(spec.next_addr))
                _tune(sock, self.timeout)
                sock.sendall(HELLO.pack(MAGIC, self.me, spec.channel, spec.slot))
                return sock
            except OSError as exc:
                sock.close()
                last = exc.strerror or str(exc)
            if time.monotonic() >= deadline:
                raise RendezvousError(
                    f"rank {self.me} could not connect to rank {spec.next_rank} at "
                    f"{spec.next_addr} (dimension {spec.channel}) before the "
                    f"{self.timeout:g} s deadline ({last}); is that worker running?",
                    peer=spec.next_rank,
                )
            time.sleep(0.05)

    def _accept_all(
        self, specs: list[LinkSpec], deadline: float
    ) -> dict[tuple[int, int], socket.socket]:
        want = {(s.channel, s.slot): s for s in specs}
        got: dict[tuple[int, int], socket.socket] = {}
        while len(got) < len(want):
            for listener in self.listeners.values():
                try:
                    sock, _ = listener.accept()
                except TimeoutError:
                    continue
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                hello = bytearray(HELLO.size)
                n = 0
                with contextlib.suppress(OSError):
                    n = _recv_exact(sock, memoryview(hello))
                if n != HELLO.size:
                    sock.close()
                    continue
                magic, sender, channel, slot = HELLO.unpack(hello)
                spec = want.get((channel, slot))
                if magic != MAGIC or spec is None or sender != spec.prev_rank:
                    sock.close()
                    raise RendezvousError(
                        f"rank {self.me} got an unexpected connection from rank {sender} "
                        f"(channel {channel}, slot {slot}); the workers' configs disagree"
                    )
                _tune(sock, self.timeout)
                got[(channel, slot)] = sock
            if len(got) < len(want) and time.monotonic() >= deadline:
                missing = sorted({s.prev_rank for k, s in want.items() if k not in got})
                dims = sorted({s.channel for k, s in want.items() if k not in got})
                raise RendezvousError(
                    f"rank {self.me} never heard from rank(s) {missing} on dimension(s) "
                    f"{dims} within the {self.timeout:g} s deadline; is that worker running?",
                    peer=missing[0],
                )
        return got

    def connect(self, specs: Iterable[LinkSpec], deadline: float) -> dict[tuple[int, int], Link]:
        specs = list(specs)
        outs = {(s.channel, s.slot): self._connect_one(s, deadline) for s in specs}
        self._socks.extend(outs.values())
        ins = self._accept_all(specs, deadline)
        self._socks.extend(ins.values())
        for listener in self.listeners.values():
            listener.close()
        self.listeners.clear()
        for s in specs:
            key = (s.channel, s.slot)
            self.links[key] = ZeroCopyLink(self.me, s, self.timeout, outs[key], ins[key])
        return self.links

    def abort(self) -> None:
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        super().close()
        for sock in list(self.listeners.values()):
            sock.close()


# --------------------------------------------------------------------------- rpc


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


class RpcLink(Link):
    """A link whose every transfer is one grpc unary call carrying the serialized tensor."""

    def __init__(self, me: int, spec: LinkSpec, timeout: float, call, mailbox: _Mailbox) -> None:
        self._call = call
        self._mailbox = mailbox
        super().__init__(me, spec, timeout)

    def allowance(self, nbytes: int) -> float:
        """Seconds one whole message may take: the timeout plus 1 s per MB (slow links)."""
        return self.timeout + nbytes / RPC_MIN_RATE

    def send(self, tag: Tag, arr: np.ndarray) -> None:
        import grpc

        payload = self.header(tag, arr.nbytes) + arr.tobytes()
        try:
            self._call(payload, timeout=self.allowance(arr.nbytes),
                       wait_for_ready=tag == HELLO_TAG)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                cls = RendezvousError if tag == HELLO_TAG else CollectiveTimeout
                raise cls(
                    f"rank {self.me} could not reach rank {self.next_rank} at "
                    f"{self.spec.next_addr} within {self.allowance(arr.nbytes):.3g} s on "
                    f"{self.where(tag)}; is that worker running?",
                    peer=self.next_rank,
                ) from None
            raise PeerLostError(
                f"rank {self.me} lost rank {self.next_rank} on {self.where(tag)} ({code})",
                peer=self.next_rank,
            ) from None

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
        self.check_header(memoryview(payload)[: HEADER.size], tag, out.nbytes)
        tensor = np.frombuffer(payload, dtype=np.float32, offset=HEADER.size).copy()
        out[...] = tensor


class RpcTransport(Transport):
    """A grpc server per dimension address; a client channel per link."""

    name = "rpc"

    def __init__(self, me: int, timeout: float) -> None:
        super().__init__(me, timeout)
        self.mailbox = _Mailbox()
        self.servers: list = []
        self.channels: list = []

    @staticmethod
    def options() -> list[tuple[str, int]]:
        return [
            ("grpc.max_send_message_length", RPC_MAX_MESSAGE),
            ("grpc.max_receive_message_length", RPC_MAX_MESSAGE),
        ]

    def _handle(self, request: bytes, context) -> bytes:
        _sender, channel, slot, *tag, _nbytes = HEADER.unpack_from(request)
        self.mailbox.put((channel, slot, *tag), request)
        return b""

    def listen(self, endpoints: dict[int, Endpoint]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        import grpc

        handler = grpc.method_handlers_generic_handler(
            "fabriclab.Ring",
            {"Push": grpc.unary_unary_rpc_method_handler(self._handle)},
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

    def connect(self, specs: Iterable[LinkSpec], deadline: float) -> dict[tuple[int, int], Link]:
        import grpc

        for s in specs:
            # The client's source address is chosen by routing (grpc cannot bind it).
            channel = grpc.insecure_channel(str(s.next_addr), options=self.options())
            self.channels.append(channel)
            call = channel.unary_unary(RPC_METHOD)
            link = RpcLink(self.me, s, self.timeout, call, self.mailbox)
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


def make_transport(name: str, me: int, timeout: float) -> Transport:
    """The registered transport called ``name`` (``zerocopy``, ``rpc`` or a plug-in's) for
    rank ``me``: a :class:`Transport` subclass built as ``cls(me, timeout)``."""
    return TRANSPORTS.get(name)(me, timeout)
