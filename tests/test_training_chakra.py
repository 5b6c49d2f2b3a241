"""Chakra execution traces: read with the protobuf package from the schema, replayed on the
collective runner; what it cannot run is one sentence."""

from fractions import Fraction

import pytest

from testbed.core.astra_formats import AstraDim
from testbed.core.errors import FabricLabError
from workloads.training.astra_text import parse_workload
from workloads.training.chakra import encode, read_trace, replay_trace, schema
from workloads.training.platform import ReplaySystem
from workloads.training.replay import replay

NET = (AstraDim("switch", 4, 40.0), AstraDim("switch", 4, 20.0))
IMPL = {k: ("halving-doubling",) * 2 for k in ("ALLREDUCE", "REDUCESCATTER", "ALLGATHER")}
SYSTEM = ReplaySystem(splits=8, implementations={**IMPL, "ALLTOALL": ("direct",) * 2})


def node(nid, kind, deps=(), micros=0, **attrs):
    c = schema()
    n = c["Node"](id=nid, name=f"n{nid}", type=kind, data_deps=list(deps),
                  duration_micros=micros)
    for name, value in attrs.items():
        a = n.attr.add(name=name)
        if isinstance(value, bool):
            a.bool_val = value
        else:
            a.int64_val = value
    return n


def trace(*nodes) -> bytes:
    return encode([schema()["GlobalMetadata"](version="0.0.4"), *nodes])


def test_compute_then_all_reduce_then_compute():
    size = 1 << 24
    data = trace(node(1, 4, micros=3), node(2, 7, deps=[1], comm_type=0, comm_size=size),
                 node(3, 4, deps=[2], micros=2))
    nodes = read_trace(data, "t.0.et")
    assert [n.kind for n in nodes] == ["COMP_NODE", "COMM_COLL_NODE", "COMP_NODE"]
    r = replay_trace(nodes, NET, SYSTEM)
    # the same All-Reduce as an ASTRA-sim 1.0 microbenchmark
    micro = replay(parse_workload(f"MICRO\n1\nc -1 0 NONE 0 0 NONE 0 0 ALLREDUCE {size} 0\n",
                                  "m"), NET, SYSTEM)
    assert r.finish_ns == 3000 + micro.finish_ns + 2000
    assert r.collectives[0].dims == (0, 1) and r.compute_ns == 5000


def test_independent_compute_nodes_share_the_gpu_and_collectives_the_network():
    data = trace(node(1, 4, micros=1), node(2, 4, micros=1),
                 node(3, 7, comm_type=0, comm_size=1 << 20),
                 node(4, 7, comm_type=2, comm_size=1 << 10))
    r = replay_trace(read_trace(data, "t"), NET, SYSTEM)
    assert sorted(r.node_end_ns[i] for i in (1, 2)) == [1000, 2000]  # one after the other
    first, second = r.collectives
    assert second.issued_ns == first.done_ns and second.kind == "ALLGATHER"
    assert isinstance(r.finish_ns, Fraction)


@pytest.mark.parametrize("nodes, words", [
    ((node(1, 5, comm_size=8),), "COMM_SEND_NODE nodes are not replayed"),
    ((node(1, 7, comm_type=5, comm_size=8),), "BROADCAST is not replayed"),
    ((node(1, 7, comm_size=8),), "no comm_type attribute"),
    ((node(1, 4, deps=[9], micros=1),), "depends on node 9"),
])
def test_what_cannot_run_is_one_sentence(nodes, words):
    with pytest.raises(FabricLabError) as err:
        replay_trace(read_trace(trace(*nodes), "t.0.et"), NET, SYSTEM, "t.0.et")
    assert "t.0.et" in str(err.value) and words in str(err.value)


def test_not_a_trace():
    with pytest.raises(FabricLabError) as err:
        read_trace(b"\x05ab", "x.et")
    assert str(err.value).startswith("x.et is not a Chakra execution trace")
