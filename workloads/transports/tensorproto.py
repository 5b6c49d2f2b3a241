"""Protobuf messages shaped like TensorFlow's ``TensorProto`` (dtype, shape, the tensor's bytes
in ``tensor_content``), built at import time with the protobuf runtime's descriptor API (no
generated code, no protoc): ``Tensor``, ``Transfer`` (a tagged tensor: the request the
``rpc-proto`` transport sends, as TensorFlow's ``RecvTensorResponse`` carries a tensor) and
``Ack`` (its empty reply).

Copies, as this module's functions count them (upb, the protobuf runtime, copies a bytes field
when it is set and when it is read): filling a message is two (``tobytes``, the field's own),
serialising one, parsing one, reading the tensor out two (the field, the assignment).
"""

from __future__ import annotations

import numpy as np

from workloads.transports.base import HEADER, CollectiveError, Tag

DT_FLOAT = 1  # TensorFlow's DataType enum value for float32


def _messages() -> dict[str, type]:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(
        name="fabriclab/tensor.proto", package="fabriclab", syntax="proto3")
    field = descriptor_pb2.FieldDescriptorProto
    types = {"int32": field.TYPE_INT32, "uint32": field.TYPE_UINT32,
             "int64": field.TYPE_INT64, "bytes": field.TYPE_BYTES}

    def message(name: str, *fields: tuple[str, str, bool]) -> None:
        m = fdp.message_type.add(name=name)
        for number, (fname, ftype, repeated) in enumerate(fields, start=1):
            kind = {"type": field.TYPE_MESSAGE, "type_name": f".fabriclab.{ftype}"} \
                if ftype not in types else {"type": types[ftype]}
            m.field.add(name=fname, number=number, **kind,
                        label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL)

    message("TensorShape", ("dim", "int64", True))
    message("Tensor", ("dtype", "int32", False), ("shape", "TensorShape", False),
            ("tensor_content", "bytes", False))
    message("Transfer", *((f, "uint32", False) for f in HEADER_FIELDS),
            ("tensor", "Tensor", False))
    message("Ack")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"fabriclab.{name}"))
            for name in ("Tensor", "Transfer", "Ack")}


# The fields of base.HEADER a Transfer carries (its nbytes is the tensor's own length).
HEADER_FIELDS = ("sender", "channel", "slot", "coll", "chunk", "phase", "step", "slice")
assert len(HEADER_FIELDS) == len(HEADER.format) - 2  # "!" and nbytes

_CLASSES: dict[str, type] = {}


def message_class(name: str) -> type:
    """The message class ``name`` (``Tensor``, ``Transfer`` or ``Ack``); protobuf is imported
    on first use."""
    if not _CLASSES:
        _CLASSES.update(_messages())
    return _CLASSES[name]


def fill_tensor(msg, arr: np.ndarray) -> int:
    """Put float32 ``arr`` into the Tensor message ``msg``; returns the bytes copied."""
    msg.dtype = DT_FLOAT
    msg.shape.dim[:] = arr.shape
    msg.tensor_content = arr.tobytes()
    return 2 * arr.nbytes


def read_tensor(msg, out: np.ndarray, where: str) -> int:
    """Copy the Tensor message ``msg`` into ``out``; returns the bytes copied."""
    content = msg.tensor_content
    if msg.dtype != DT_FLOAT or len(content) != out.nbytes:
        raise CollectiveError(
            f"{where}: got a tensor of dtype {msg.dtype} and {len(content)} bytes, expected "
            f"float32 and {out.nbytes} bytes; the ranks disagree on the schedule")
    out.reshape(-1)[...] = np.frombuffer(content, dtype=np.float32)
    return 2 * out.nbytes


def transfer(sender: int, channel: int, slot: int, tag: Tag, arr: np.ndarray):
    """A Transfer message carrying ``arr`` and its copies (see :func:`fill_tensor`)."""
    msg = message_class("Transfer")(sender=sender, channel=channel, slot=slot, coll=tag.coll,
                                    chunk=tag.chunk, phase=tag.phase, step=tag.step,
                                    slice=tag.slice)
    return msg, fill_tensor(msg.tensor, arr)
