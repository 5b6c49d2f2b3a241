"""What every transport shares: the link and transport interfaces, transfer tags and headers,
and the errors a collective raises.

A *link* is one rank's place in one ring: it sends to the next rank and receives from the
previous one. Links are identified by ``(channel, slot)``: the channel is the dimension whose
NIC address carries the traffic (the flat ring uses channel 0), the slot lets one dimension
run several chunk phases at once on separate connections.

A transport (one module each, e.g. :mod:`.zerocopy`, :mod:`.rpc`) subclasses :class:`Transport`
and :class:`PeerLink`, and is registered in :data:`testbed.core.registry.TRANSPORTS` as the class.
Every link counts the payload bytes it sent and the bytes it copied in user space (the copies
its own code makes: staging, serialising, parsing; not the kernel's socket copies, nor those
inside a library such as grpc), so a run can state its copies per byte moved.
Its links send on a per-link sender thread while the caller receives, so a ring step is full
duplex and large messages cannot deadlock on full socket buffers; a link may first write what
its socket takes at once on the caller's thread (:meth:`PeerLink.send_nowait`). Every blocking
wait has a timeout; failures raise :class:`CollectiveError` subclasses with a one-sentence message.
"""

from __future__ import annotations

import contextlib
import queue
import struct
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from testbed.core.errors import FabricLabError

# Header of every transfer: sender, channel, slot, collective, chunk, phase, step, slice,
# nbytes.
HEADER = struct.Struct("!IIIIIIIIQ")


# The factors a rung of the transport ladder is made of, one step changing one of them:
# ``copies`` (staging buffers on each side or none), ``message`` (the tensor's raw bytes or a
# protobuf message), ``calls`` (a one-way stream, or a reply per call with so many in
# flight), ``framework`` (fabriclab's own sockets or grpc).
LADDER_FACTORS = ("copies", "message", "calls", "framework")


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
    sport: int = 0  # the source port to connect from; 0: an ephemeral one




class PeerLink(ABC):
    """One rank's position in one ring; :meth:`exchange` is a full-duplex ring step."""

    def __init__(self, me: int, spec: LinkSpec, timeout: float) -> None:
        self.me = me
        self.spec = spec
        self.timeout = timeout
        self._scratch = np.empty(0, dtype=np.float32)
        # Counters, each written by one thread only: the sender thread's and the receiver's.
        self.sent_bytes = 0
        self.copied_on_send_bytes = 0
        self.copied_on_receive_bytes = 0
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
        """Send ``arr``, which must stay untouched until finished. While the sender thread is
        idle, the caller writes what the socket takes without waiting (:meth:`send_nowait`):
        a small transfer then costs no hand-off between threads. The thread sends the rest."""
        rest = None
        if self._jobs.unfinished_tasks == 0:  # the thread has sent all it was given
            try:
                rest = self.send_nowait(tag, arr)
            except CollectiveError as exc:
                self._done.put(exc)
                return
            if rest == ():
                self.sent_bytes += arr.nbytes
                self._done.put(None)
                return
        self._jobs.put((tag, arr, rest))

    def send_nowait(self, tag: Tag, arr: np.ndarray) -> tuple[memoryview, ...] | None:
        """Write as much of the transfer as the socket takes without waiting, and return what
        is left for :meth:`send_rest` (``()``: all of it went); or None, to leave the whole
        transfer to :meth:`send` on the sender thread (the default)."""
        return None

    def send_rest(self, tag: Tag, rest: tuple[memoryview, ...]) -> None:
        """Blocking send of what :meth:`send_nowait` left (runs on the sender thread)."""
        raise NotImplementedError(f"{type(self).__name__} sends nothing without waiting")

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
            tag, arr, rest = job
            try:
                if rest is None:
                    self.send(tag, arr)
                else:
                    self.send_rest(tag, rest)
                self.sent_bytes += arr.nbytes
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
            self._jobs.task_done()  # after its result is queued: see start_send

    @abstractmethod
    def send(self, tag: Tag, arr: np.ndarray) -> None:
        """Blocking send of ``arr`` to the next rank (runs on the sender thread)."""

    @abstractmethod
    def receive(self, tag: Tag, out: np.ndarray) -> None:
        """Blocking receive from the previous rank into ``out``."""

    @property
    def copied_bytes(self) -> int:
        """Bytes this link copied in user space so far, sending and receiving."""
        return self.copied_on_send_bytes + self.copied_on_receive_bytes

    def settle(self) -> None:
        """Wait for the replies the peer still owes this link's calls (none here: only
        pipelined request/response links have any); may raise :class:`CollectiveError`."""
        return None

    def close(self) -> None:
        # Settle first: a socket closed with unread data resets its connection, and a grpc
        # channel closed with calls in flight cancels them; either could lose the end of this
        # rank's last transfer.
        with contextlib.suppress(CollectiveError):
            self.settle()
        self._jobs.put(None)


class Transport(ABC):
    """Builds a rank's links (rendezvous) and tears them down."""

    name: ClassVar[str] = "?"
    # What comparisons measure other transports against (rpc: the framework overhead the
    # zero-copy idea removes).
    reference: ClassVar[bool] = False
    # Its transfers take the wire's time (no copies, no serialisation): the times the
    # simulator gives every transport.
    wire_speed: ClassVar[bool] = False
    binds_source_port: ClassVar[bool] = False  # it connects from ``LinkSpec.sport``
    # Its place on the transport ladder (0: zerocopy), or None: comparisons say which rung's
    # cost dominates. ``factors`` is what it is made of, one value per factor (see
    # LADDER_FACTORS); each rung differs from the one below in exactly one factor, and
    # ``adds`` names it first ("calls: ...").
    rung: ClassVar[int | None] = None
    adds: ClassVar[str] = ""
    factors: ClassVar[dict[str, str]] = {}

    def __init__(self, me: int, timeout: float) -> None:
        self.me = me
        self.timeout = timeout
        self.links: dict[tuple[int, int], PeerLink] = {}

    @abstractmethod
    def listen(self, endpoints: dict[int, Endpoint]) -> None:
        """Start listening on this rank's address of every channel (before any connect)."""

    @abstractmethod
    def connect(self, specs: Iterable[LinkSpec], deadline: float
                ) -> dict[tuple[int, int], PeerLink]:
        """Connect every link, retrying until ``deadline`` (``time.monotonic()``)."""

    @abstractmethod
    def abort(self) -> None:
        """Wake every blocked transfer with an error (used when one part already failed)."""

    def copied_bytes(self) -> int:
        """Bytes every link of this rank copied in user space so far (see the module doc)."""
        return sum(link.copied_bytes for link in self.links.values())

    def close(self) -> None:
        for link in self.links.values():
            link.close()
