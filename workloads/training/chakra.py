"""Read Chakra execution traces (MLCommons' ``et_def.proto``, what ASTRA-sim 2.x replays) and
replay one rank's trace on the collective runner.

The schema is declared here with the ``protobuf`` package's descriptors (the field numbers and
types of ``et_def.proto``'s ``GlobalMetadata``, ``Node`` and ``AttributeProto``; the
fields the replay does not read are skipped by the parser), so no generated code or compiler
is needed. A trace file is a ``GlobalMetadata`` message and then ``Node`` messages, each
preceded by its length as a varint.

Replay (as ASTRA-sim 2.x's ``Workload.cc`` issues nodes): a node is issued when every node it
depends on (data and control) has finished, dependency-free nodes in ascending id order; one
compute node on the GPU, one on the CPU (``is_cpu_op``) and one communication node run at a
time. A compute node lasts ``duration_micros`` (1 ns when 0); a collective node runs its
``comm_type`` (All-Reduce, All-Gather, Reduce-Scatter, All-to-All) of ``comm_size`` bytes on the
``involved_dim`` dimensions (all when absent) through the same chunk engine as ASTRA-sim 1.0
workloads, so the system file's chunking, Themis and queue policies apply, plus 2.x's one
system-side change: each reducing message of a ring Reduce-Scatter or All-Reduce phase costs
three passes over local memory at the system's ``local-mem-bw``
(:func:`~workloads.training.collectives.local_reduction_ns`). Send and receive nodes, memory
nodes and other collective types are refused in one sentence.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Any

from testbed.core.astra_formats import AstraDim
from testbed.core.errors import FabricLabError
from workloads.training.model import ALLGATHER, ALLREDUCE, ALLTOALL, REDUCESCATTER
from workloads.training.platform import ReplaySystem, logical_dims
from workloads.training.runner import WAKE, CollectiveRecord, CollectiveRunner

# et_def.proto's enums (values are the schema's)
NODE_TYPES = {0: "INVALID_NODE", 1: "METADATA_NODE", 2: "MEM_LOAD_NODE", 3: "MEM_STORE_NODE",
              4: "COMP_NODE", 5: "COMM_SEND_NODE", 6: "COMM_RECV_NODE", 7: "COMM_COLL_NODE"}
COLLECTIVE_OF_COMM_TYPE = {0: ALLREDUCE, 2: ALLGATHER, 6: ALLTOALL, 7: REDUCESCATTER}
COMM_TYPE_NAMES = {0: "ALL_REDUCE", 1: "REDUCE", 2: "ALL_GATHER", 3: "GATHER", 4: "SCATTER",
                   5: "BROADCAST", 6: "ALL_TO_ALL", 7: "REDUCE_SCATTER",
                   8: "REDUCE_SCATTER_BLOCK", 9: "BARRIER"}
# AttributeProto's scalar value fields: (name, number, descriptor type)
_SCALARS = (("double_val", 3, "TYPE_DOUBLE"), ("float_val", 5, "TYPE_FLOAT"),
            ("int32_val", 7, "TYPE_INT32"), ("int64_val", 9, "TYPE_INT64"),
            ("uint32_val", 11, "TYPE_UINT32"), ("uint64_val", 13, "TYPE_UINT64"),
            ("sint32_val", 15, "TYPE_SINT32"), ("sint64_val", 17, "TYPE_SINT64"),
            ("fixed32_val", 19, "TYPE_FIXED32"), ("fixed64_val", 21, "TYPE_FIXED64"),
            ("sfixed32_val", 23, "TYPE_SFIXED32"), ("sfixed64_val", 25, "TYPE_SFIXED64"),
            ("bool_val", 27, "TYPE_BOOL"), ("string_val", 29, "TYPE_STRING"))
_INT_FIELDS = ("int32_val", "int64_val", "uint32_val", "uint64_val", "sint32_val",
               "sint64_val", "fixed32_val", "fixed64_val", "sfixed32_val", "sfixed64_val")


@cache
def schema() -> dict[str, Any]:
    """The message classes ``GlobalMetadata``, ``Node``, ``AttributeProto`` and ``BoolList``."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="fabriclab_chakra_et.proto",
                                           package="ChakraProtoMsg", syntax="proto3")

    def field(msg, name: str, number: int, kind: str, repeated: bool = False,
              type_name: str | None = None, oneof: int | None = None) -> None:
        fd = msg.field.add(name=name, number=number, type=getattr(fdp, kind),
                           label=fdp.LABEL_REPEATED if repeated else fdp.LABEL_OPTIONAL)
        if type_name:
            fd.type_name = type_name
        if oneof is not None:
            fd.oneof_index = oneof

    bool_list = f.message_type.add(name="BoolList")
    field(bool_list, "values", 1, "TYPE_BOOL", repeated=True)
    int64_list = f.message_type.add(name="Int64List")
    field(int64_list, "values", 1, "TYPE_INT64", repeated=True)
    attr = f.message_type.add(name="AttributeProto")
    attr.oneof_decl.add(name="value")
    field(attr, "name", 1, "TYPE_STRING")
    field(attr, "doc_string", 2, "TYPE_STRING")
    for name, number, kind in _SCALARS:
        field(attr, name, number, kind, oneof=0)
    field(attr, "int64_list", 10, "TYPE_MESSAGE", type_name=".ChakraProtoMsg.Int64List", oneof=0)
    field(attr, "bool_list", 28, "TYPE_MESSAGE", type_name=".ChakraProtoMsg.BoolList", oneof=0)
    meta = f.message_type.add(name="GlobalMetadata")
    field(meta, "version", 1, "TYPE_STRING")
    field(meta, "attr", 2, "TYPE_MESSAGE", repeated=True,
          type_name=".ChakraProtoMsg.AttributeProto")
    node = f.message_type.add(name="Node")
    field(node, "id", 1, "TYPE_UINT64")
    field(node, "name", 2, "TYPE_STRING")
    field(node, "type", 3, "TYPE_INT32")  # the NodeType enum, read as its number
    field(node, "ctrl_deps", 4, "TYPE_UINT64", repeated=True)
    field(node, "data_deps", 5, "TYPE_UINT64", repeated=True)
    field(node, "start_time_micros", 6, "TYPE_UINT64")
    field(node, "duration_micros", 7, "TYPE_UINT64")
    field(node, "attr", 10, "TYPE_MESSAGE", repeated=True,
          type_name=".ChakraProtoMsg.AttributeProto")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return {name: message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"ChakraProtoMsg.{name}"))
        for name in ("GlobalMetadata", "Node", "AttributeProto", "BoolList", "Int64List")}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("truncated length")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def encode(messages: Sequence[Any]) -> bytes:
    """Messages as a trace file: each serialized and preceded by its length as a varint."""
    out = bytearray()
    for message in messages:
        body = message.SerializeToString()
        n = len(body)
        while True:
            byte = n & 0x7F
            n >>= 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                break
        out += body
    return bytes(out)


@dataclass(frozen=True)
class TraceNode:
    """One node of a rank's trace (``kind`` a :data:`NODE_TYPES` name)."""

    id: int
    name: str
    kind: str
    deps: tuple[int, ...]
    duration_ns: int = 1
    cpu: bool = False
    collective: str | None = None
    size_bytes: int = 0
    involved: tuple[bool, ...] | None = None
    priority: int = 0


def _attrs(node: Any) -> dict[str, Any]:
    out = {}
    for a in node.attr:
        which = a.WhichOneof("value")
        if which == "bool_list":
            out[a.name] = tuple(a.bool_list.values)
        elif which == "int64_list":
            out[a.name] = tuple(a.int64_list.values)
        elif which is not None:
            out[a.name] = getattr(a, which)
    return out


def _integer(attrs: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = attrs.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        if value is None:
            raise FabricLabError(f"{where} has no {key} attribute")
        raise FabricLabError(f"{where}: attribute {key} is {value!r}, not a whole number")
    return value


def read_trace(data: bytes, source: str = "trace.et") -> list[TraceNode]:
    """The nodes of one rank's Chakra trace; anything the replay cannot run is one sentence
    naming the file and the node."""
    classes = schema()
    from google.protobuf.message import DecodeError

    nodes: list[TraceNode] = []
    at = 0
    index = -1
    while at < len(data):
        try:
            length, at = _varint(data, at)
            body = data[at:at + length]
            if len(body) != length:
                raise ValueError("truncated message")
            at += length
            message = classes["GlobalMetadata" if index < 0 else "Node"]()
            message.ParseFromString(body)
        except (ValueError, DecodeError):
            what = "its global metadata" if index < 0 else f"node record {index}"
            raise FabricLabError(f"{source} is not a Chakra execution trace: {what} does not "
                                 "decode") from None
        index += 1
        if index == 0:
            continue
        nodes.append(_node(message, source))
    if index < 0:
        raise FabricLabError(f"{source} is empty, not a Chakra execution trace")
    return nodes


def _node(message: Any, source: str) -> TraceNode:
    kind = NODE_TYPES.get(message.type, f"type {message.type}")
    where = f"{source}: node {message.id} ({message.name or 'unnamed'})"
    attrs = _attrs(message)
    deps = tuple(dict.fromkeys([*message.data_deps, *message.ctrl_deps]))
    base = {"id": message.id, "name": message.name, "kind": kind, "deps": deps,
            "cpu": bool(attrs.get("is_cpu_op", False))}
    if kind in ("COMP_NODE", "INVALID_NODE", "METADATA_NODE"):
        duration = message.duration_micros * 1000 if kind == "COMP_NODE" else 0
        return TraceNode(**base, duration_ns=max(duration, 1) if kind == "COMP_NODE" else 0)
    if kind == "COMM_COLL_NODE":
        code = _integer(attrs, "comm_type", where)
        collective = COLLECTIVE_OF_COMM_TYPE.get(code)
        if collective is None:
            raise FabricLabError(f"{where}: collective {COMM_TYPE_NAMES.get(code, code)} is not "
                                 "replayed (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL)")
        involved = attrs.get("involved_dim")
        if involved is not None and not isinstance(involved, tuple):
            raise FabricLabError(f"{where}: attribute involved_dim must be a bool_list")
        return TraceNode(**base, collective=collective,
                         size_bytes=_integer(attrs, "comm_size", where),
                         involved=involved, priority=_integer(attrs, "comm_priority", where, 0))
    raise FabricLabError(f"{where}: {kind} nodes are not replayed yet (compute and collective "
                         "nodes are)")


def node_unit(node: TraceNode) -> str | None:
    """The unit ``node`` occupies while it runs (one node per unit at a time): ``gpu``,
    ``cpu`` or ``comm``; None for a node that takes no time."""
    if node.kind == "COMP_NODE":
        return "cpu" if node.cpu else "gpu"
    if node.kind == "COMM_COLL_NODE":
        return "cpu" if node.cpu else "comm"
    return None


@dataclass
class TraceResult:
    """A trace replay: ``finish_ns`` when the last node finished."""

    finish_ns: Fraction
    node_end_ns: dict[int, Fraction]
    collectives: list[CollectiveRecord]
    dim_busy_ns: list[Fraction]
    compute_ns: Fraction


class _TraceReplay(CollectiveRunner):
    charges_local_memory = True  # ASTRA-sim 2.x's reduction time at the system's local-mem-bw

    def __init__(self, nodes: Sequence[TraceNode], network: Sequence[AstraDim],
                 system: ReplaySystem, source: str) -> None:
        dims, _ = logical_dims(network, None)
        super().__init__(dims, system)
        self.nodes = {n.id: n for n in nodes}
        if len(self.nodes) != len(nodes):
            raise FabricLabError(f"{source}: two nodes share an id")
        self.waiting_on: dict[int, set[int]] = {}
        self.dependents: dict[int, list[int]] = {i: [] for i in self.nodes}
        for n in nodes:
            missing = [d for d in n.deps if d not in self.nodes]
            if missing:
                raise FabricLabError(f"{source}: node {n.id} depends on node {missing[0]}, "
                                     "which is not in the trace")
            self.waiting_on[n.id] = set(n.deps)
            for d in n.deps:
                self.dependents[d].append(n.id)
        self.ready: list[int] = [i for i, deps in self.waiting_on.items() if not deps]
        heapq.heapify(self.ready)
        self.busy_units: set[str] = set()
        self.running_comm: dict[int, int] = {}  # collective key -> node id
        self.end: dict[int, Fraction] = {}
        self.compute = Fraction(0)
        # every node issued, in order: (node id, its kind, its collective's record index or
        # None), what a real-time replay walks (workloads.training.emulated)
        self.issued: list[tuple[int, str, int | None]] = []

    def issue_ready(self) -> None:
        held = []
        while self.ready:
            nid = heapq.heappop(self.ready)
            node = self.nodes[nid]
            unit = node_unit(node)
            if unit is not None and unit in self.busy_units:
                held.append(nid)
                continue
            if unit is not None:
                self.busy_units.add(unit)
            key = None
            if node.kind == "COMP_NODE":
                self.compute += node.duration_ns
                self.at(self.now + node.duration_ns, WAKE, nid)
            elif node.kind == "COMM_COLL_NODE":
                involved = node.involved or (True,) * len(self.dims)
                involved = tuple(involved[:len(self.dims)]) + (False,) * max(
                    0, len(self.dims) - len(involved))
                key = self.issue_collective(node.collective, node.size_bytes, involved,
                                            node.priority, Fraction(0), node.name, node.kind)
                if key is None:
                    self.at(self.now, WAKE, nid)
                else:
                    self.running_comm[key] = nid
            else:
                self.at(self.now, WAKE, nid)
            self.issued.append((nid, node.kind, key))
        for nid in held:
            heapq.heappush(self.ready, nid)

    def wake(self, nid: object) -> None:
        self.finish_node(int(nid))

    def collective_done(self, key: int) -> None:
        self.finish_node(self.running_comm.pop(key))

    def finish_node(self, nid: int) -> None:
        node = self.nodes[nid]
        unit = node_unit(node)
        if unit is not None:
            self.busy_units.discard(unit)
        self.end[nid] = self.now
        for d in self.dependents[nid]:
            self.waiting_on[d].discard(nid)
            if not self.waiting_on[d]:
                heapq.heappush(self.ready, d)
        self.issue_ready()

    def run(self, source: str) -> TraceResult:
        self.issue_ready()
        self.run_events()
        if len(self.end) != len(self.nodes):
            raise FabricLabError(f"{source}: {len(self.nodes) - len(self.end)} nodes never "
                                 "become free of dependencies (a dependency cycle)")
        return TraceResult(max(self.end.values(), default=Fraction(0)), self.end,
                           self.records, self.busy, self.compute)


def replay_trace(nodes: Sequence[TraceNode], network: Sequence[AstraDim],
                 system: ReplaySystem, source: str = "trace.et") -> TraceResult:
    """Replay one rank's trace ``nodes`` on ``network`` under ``system``."""
    return _TraceReplay(nodes, network, system, source).run(source)
