"""``rpc-proto`` (ladder rung L5): ``rpc`` with protobuf messages, as TensorFlow sends tensors;
on the ladder, ``rpc-lite-sw`` over grpc in place of fabriclab's sockets.

Every call's request is a ``Transfer`` message (:mod:`.tensorproto`: the transfer's tag and a
``TensorProto``-like tensor) that grpc serialises and parses with protobuf; the reply is an
empty ``Ack`` message. Copies a byte, as counted (grpc's own are not): three sending (the
tensor's bytes, the message field, serialising), three receiving (parsing, the field, the
assignment).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from workloads.transports.base import CollectiveError, Tag
from workloads.transports.rpc import Codec, RpcLink, RpcTransport
from workloads.transports.tensorproto import message_class, read_tensor, transfer


def _key(msg) -> tuple:
    return (msg.channel, msg.slot, msg.coll, msg.chunk, msg.phase, msg.step, msg.slice)


class RpcProtoLink(RpcLink):
    """An rpc link whose calls carry Transfer messages."""

    def encode(self, tag: Tag, arr: np.ndarray):
        msg, copied = transfer(self.me, self.spec.channel, self.spec.slot, tag, arr)
        self.copied_on_send_bytes += copied + arr.nbytes  # + grpc's SerializeToString
        return msg

    def decode(self, tag: Tag, request, out: np.ndarray) -> None:
        if request.sender != self.prev_rank:
            raise CollectiveError(
                f"rank {self.me} expected {self.where(tag)} from rank {self.prev_rank} but "
                f"rank {request.sender} sent it; the ranks disagree on the schedule")
        copied = read_tensor(request.tensor, out, f"rank {self.me} on {self.where(tag)}")
        self.copied_on_receive_bytes += copied + out.nbytes  # + grpc's parse


class RpcProtoTransport(RpcTransport):
    name = "rpc-proto"
    rung = 5
    adds = "framework: grpc (HTTP/2, its threads and buffers), not fabriclab's sockets"
    factors: ClassVar[dict[str, str]] = {
        **RpcTransport.factors, "message": "protobuf"}
    reference = False
    link_class = RpcProtoLink

    @staticmethod
    def codec() -> Codec:
        transfer_cls, ack = message_class("Transfer"), message_class("Ack")
        return Codec(_key, ack, request_to=transfer_cls.SerializeToString,
                     request_from=transfer_cls.FromString, reply_to=ack.SerializeToString,
                     reply_from=ack.FromString)
