"""``staged`` (ladder rung L1): ``zerocopy`` plus one staging copy on each side.

The sender copies the tensor into a staging buffer of its own and sends that; the receiver
receives into a staging buffer and copies out of it into the destination (the paper's "RDMA
with copy"). The frame is zerocopy's header, the payload's length, then the payload: the rungs
above (:mod:`.serialised`, :mod:`.rpclite`) change only what :meth:`StagedLink.encode` puts in
the payload and how :meth:`StagedLink.decode` reads it back.
"""

from __future__ import annotations

import struct
from typing import ClassVar

import numpy as np

from workloads.transports.base import CollectiveError, Tag
from workloads.transports.zerocopy import ZeroCopyLink, ZeroCopyTransport, as_bytes

LENGTH = struct.Struct("!Q")
# A payload is the tensor plus this much framing at most (a serialised tensor's fields).
MAX_OVERHEAD_BYTES = 1 << 16


class _Region:
    """A byte buffer grown only when too small (the registered-memory analogue)."""

    def __init__(self) -> None:
        self._buf = np.empty(0, dtype=np.uint8)

    def view(self, nbytes: int) -> memoryview:
        if self._buf.size < nbytes:
            self._buf = np.empty(nbytes, dtype=np.uint8)
        return memoryview(self._buf)[:nbytes]


class StagedLink(ZeroCopyLink):
    """zerocopy's link, staging every transfer in a buffer on each side (two copies a byte)."""

    def __init__(self, *args, **kwargs) -> None:
        self._out_stage, self._in_stage = _Region(), _Region()
        self._out_len = bytearray(LENGTH.size)
        self._in_len = memoryview(bytearray(LENGTH.size))
        super().__init__(*args, **kwargs)

    def encode(self, tag: Tag, arr: np.ndarray) -> memoryview:
        """The payload that carries ``arr`` (here: a copy of its bytes in the staging buffer)."""
        view = self._out_stage.view(arr.nbytes)
        view[:] = as_bytes(arr)
        self.copied_on_send_bytes += arr.nbytes
        return view

    def decode(self, tag: Tag, payload: memoryview, out: np.ndarray) -> None:
        """Fill ``out`` from a received payload (here: copy it out of the staging buffer)."""
        as_bytes(out)[:] = payload
        self.copied_on_receive_bytes += out.nbytes

    def frame(self, tag: Tag, arr: np.ndarray) -> list[memoryview]:
        payload = self.encode(tag, arr)
        LENGTH.pack_into(self._out_len, 0, len(payload))
        return [memoryview(self._out_len), payload]

    def receive(self, tag: Tag, out: np.ndarray) -> None:
        self.receive_header(tag, out.nbytes)
        self.receive_into(tag, self._in_len)
        (nbytes,) = LENGTH.unpack(self._in_len)
        if nbytes > out.nbytes + MAX_OVERHEAD_BYTES:
            raise CollectiveError(
                f"rank {self.me} got a {nbytes}-byte payload from rank {self.prev_rank} for a "
                f"{out.nbytes}-byte tensor on {self.where(tag)}; the ranks run different "
                "transports")
        payload = self._in_stage.view(nbytes)
        self.receive_into(tag, payload)
        self.decode(tag, payload, out)


class StagedTransport(ZeroCopyTransport):
    """zerocopy's connections and rendezvous, with staged links."""

    name = "staged"
    rung = 1
    adds = "copies: a staging copy on each side"
    factors: ClassVar[dict[str, str]] = {
        **ZeroCopyTransport.factors, "copies": "a staging buffer on each side"}
    wire_speed = False  # the copies cost time the simulator does not model
    link_class = StagedLink
