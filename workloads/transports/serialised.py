"""``serialised`` (ladder rung L2): ``staged`` plus serialisation of the tensor.

The payload is a ``Tensor`` protobuf message (:mod:`.tensorproto`, shaped like TensorFlow's
``TensorProto``): the sender fills and serialises one per transfer, the receiver parses it out
of its staging buffer and copies the tensor into place. Copies a byte: three sending (the
tensor's bytes, the message field, the serialised message) and four receiving (the staged
bytes handed to the parser, the parse, the field, the assignment).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from workloads.transports.base import Tag
from workloads.transports.staged import StagedLink, StagedTransport
from workloads.transports.tensorproto import fill_tensor, message_class, read_tensor


class SerialisedLink(StagedLink):
    """A staged link whose payload is the tensor as a serialised protobuf message."""

    def encode(self, tag: Tag, arr: np.ndarray) -> memoryview:
        msg = message_class("Tensor")()
        copied = fill_tensor(msg, arr)
        data = msg.SerializeToString()
        self.copied_on_send_bytes += copied + arr.nbytes
        return memoryview(data)

    def decode(self, tag: Tag, payload: memoryview, out: np.ndarray) -> None:
        msg = message_class("Tensor").FromString(bytes(payload))
        copied = read_tensor(msg, out, f"rank {self.me} on {self.where(tag)}")
        self.copied_on_receive_bytes += copied + 2 * out.nbytes


class SerialisedTransport(StagedTransport):
    name = "serialised"
    rung = 2
    adds = "message: the tensor as a protobuf message, not raw bytes"
    factors: ClassVar[dict[str, str]] = {
        **StagedTransport.factors, "message": "protobuf"}
    link_class = SerialisedLink
