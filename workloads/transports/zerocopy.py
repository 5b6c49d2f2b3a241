"""``zerocopy``: a remote memory region over TCP.

Every transfer is a fixed header followed by the bytes of the caller's registered numpy
memory, sent on memoryviews (``writev`` on the caller's thread as far as the socket takes it at
once, ``sendmsg`` on the link's sender thread for the rest) and received with ``recv_into``
straight into the destination (or a preallocated scratch region).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Iterable, Iterator
from typing import ClassVar

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

# Hello sent once on every new zerocopy connection: magic, sender, channel, slot.
HELLO = struct.Struct("!4sIII")
MAGIC = b"FLR1"


def as_bytes(arr: np.ndarray) -> memoryview:
    """A flat byte view of a contiguous array (no copy)."""
    return memoryview(arr).cast("B")



def recv_exact(sock: socket.socket, view: memoryview) -> int:
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
        _drop(views, sock.sendmsg(views))


def _write_nowait(fd: int, views: list[memoryview]) -> list[memoryview]:
    """Write ``views`` to the non-blocking ``fd`` until it would wait; return what is left."""
    views = [v for v in views if len(v)]
    while views:
        try:
            _drop(views, os.writev(fd, views))
        except BlockingIOError:
            break
    return views


def _drop(views: list[memoryview], n: int) -> None:
    """Remove the first ``n`` bytes (sent) from ``views``, in place."""
    while n:
        if n >= len(views[0]):
            n -= len(views[0])
            views.pop(0)
        else:
            views[0] = views[0][n:]
            n = 0


# What a link says when a socket fails, after "rank ME ".
_SEND_STALLED = "could not send to rank {peer} for {timeout:g} s on {where}; that peer is stalled"
_RECEIVE_STALLED = ("waited more than {timeout:g} s for data from rank {peer} on {where}; that "
                    "peer is stalled or gone")
_SEND_LOST = "lost its connection to rank {peer} on {where} ({why})"
_RECEIVE_LOST = "lost its connection from rank {peer} on {where} ({why})"


class ZeroCopyLink(PeerLink):
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

    # The framing the ladder's rungs (staged, serialised, rpc-lite) share: a header, then the
    # views the rung's frame() gives.

    def frame(self, tag: Tag, arr: np.ndarray) -> list[memoryview]:
        """What follows the header of the transfer that carries ``arr`` (here: its bytes)."""
        return [as_bytes(arr)]

    def send(self, tag: Tag, arr: np.ndarray) -> None:
        self.send_rest(tag, (self._pack_header(tag, arr.nbytes), *self.frame(tag, arr)))

    def send_nowait(self, tag: Tag, arr: np.ndarray) -> tuple[memoryview, ...] | None:
        cls = type(self)
        if cls.send is not ZeroCopyLink.send and cls.send_nowait is ZeroCopyLink.send_nowait:
            return None  # a link that sends its own way (not through frame) uses its send
        if self.out_sock.gettimeout() is None:
            return None  # a blocking socket would wait
        views = [self._pack_header(tag, arr.nbytes), *self.frame(tag, arr)]
        with self.sending(tag):
            return tuple(_write_nowait(self.out_sock.fileno(), views))

    def send_rest(self, tag: Tag, rest: tuple[memoryview, ...]) -> None:
        """Blocking send of ``rest``: a whole transfer's views (:meth:`send`), or what
        :meth:`send_nowait` left of one."""
        with self.sending(tag):
            _send_views(self.out_sock, list(rest))

    def receive(self, tag: Tag, out: np.ndarray) -> None:
        data = as_bytes(out)
        self.receive_header(tag, len(data))
        self.receive_into(tag, data)

    def _pack_header(self, tag: Tag, nbytes: int) -> memoryview:
        s = self.spec
        HEADER.pack_into(self._out_hdr, 0, self.me, s.channel, s.slot, *tag, nbytes)
        return memoryview(self._out_hdr)

    def receive_header(self, tag: Tag, nbytes: int) -> None:
        """Receive and check the header of the transfer ``tag`` of ``nbytes`` tensor bytes."""
        self.receive_into(tag, self._hdr_view)
        self.check_header(self._hdr_view, tag, nbytes)

    def receive_into(self, tag: Tag, view: memoryview) -> None:
        """Fill ``view`` from the previous rank (raises if it closes first)."""
        with self.receiving(tag):
            if recv_exact(self.in_sock, view) == len(view):
                return
        raise PeerLostError(
            f"rank {self.me}: rank {self.prev_rank} closed its connection on "
            f"{self.where(tag)}; it probably failed",
            peer=self.prev_rank,
        )

    def sending(self, tag: Tag) -> contextlib.AbstractContextManager[None]:
        """Turn a socket error towards the next rank into a collective error."""
        return self._socket_errors(tag, self.next_rank, _SEND_STALLED, _SEND_LOST)

    def receiving(self, tag: Tag) -> contextlib.AbstractContextManager[None]:
        """Turn a socket error from the previous rank into a collective error."""
        return self._socket_errors(tag, self.prev_rank, _RECEIVE_STALLED, _RECEIVE_LOST)

    @contextlib.contextmanager
    def _socket_errors(self, tag: Tag, peer: int, stalled: str, lost: str) -> Iterator[None]:
        """A timeout as :class:`CollectiveTimeout` (sentence ``stalled``), another socket error
        as :class:`PeerLostError` (``lost``), both naming ``peer``."""
        try:
            yield
        except TimeoutError:
            raise CollectiveTimeout(
                f"rank {self.me} " + stalled.format(peer=peer, timeout=self.timeout,
                                                    where=self.where(tag)),
                peer=peer,
            ) from None
        except OSError as exc:
            raise PeerLostError(
                f"rank {self.me} " + lost.format(peer=peer, where=self.where(tag),
                                                 why=exc.strerror or exc),
                peer=peer,
            ) from None

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
    rung = 0
    factors: ClassVar[dict[str, str]] = {
        "copies": "none", "message": "raw bytes", "calls": "a one-way stream",
        "framework": "fabriclab's sockets"}
    wire_speed = True
    binds_source_port = True
    link_class: ClassVar[type[ZeroCopyLink]] = ZeroCopyLink  # a subclass may send otherwise

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
                if spec.sport:  # a fixed port may still be in TIME_WAIT from a past run
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((spec.local.ip, spec.sport))
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
                    n = recv_exact(sock, memoryview(hello))
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

    def connect(self, specs: Iterable[LinkSpec], deadline: float
                ) -> dict[tuple[int, int], PeerLink]:
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
            self.links[key] = self.link_class(self.me, s, self.timeout, outs[key], ins[key])
        return self.links

    def abort(self) -> None:
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        super().close()
        for sock in list(self.listeners.values()):
            sock.close()
