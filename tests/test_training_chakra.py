"""Chakra execution traces: read with the protobuf package from the schema, replayed on the
collective runner; what it cannot run is one sentence."""

import csv
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

from testbed.core.astra_formats import AstraDim, system_pairs
from testbed.core.errors import FabricLabError, SpecError
from workloads.training.astra_text import parse_workload
from workloads.training.chakra import encode, read_trace, replay_trace, schema
from workloads.training.collectives import local_reduction_ns
from workloads.training.platform import LogicalDim, ReplaySystem, replay_system
from workloads.training.replay import replay

REFERENCE = Path(__file__).resolve().parents[1] / "benchmarks/data/astra2_chakra_reference.csv"

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
    # the same All-Reduce alone (ASTRA-sim 2.x's clock: not 1.0's whole ns, so not a 1.0
    # microbenchmark's time)
    alone = replay_trace(read_trace(trace(node(2, 7, comm_type=0, comm_size=size)), "a"), NET,
                         SYSTEM)
    assert r.finish_ns == 3000 + alone.finish_ns + 2000
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


# ---------------------------------------------------------------- ASTRA-sim 2.x's local memory

RING8 = LogicalDim(8, "ring", 50.0, 500.0, 0)
RINGS = ReplaySystem(splits=4, local_mem_gbyte_s=50.0, implementations={
    k: ("ring",) for k in ("ALLREDUCE", "REDUCESCATTER", "ALLGATHER", "ALLTOALL")})


def test_local_reduction_is_charged_on_reducing_ring_phases_only():
    # 7 reducing messages of 32 KiB, each written once and read twice at 50e9 bytes/s
    assert local_reduction_ns("AR", Fraction(1 << 18), "ALLREDUCE", RING8, RINGS) == 7 * 3 * 655
    assert local_reduction_ns("RS", Fraction(1 << 18), "REDUCESCATTER", RING8, RINGS) \
        == 7 * 3 * 655
    assert local_reduction_ns("AG", Fraction(1 << 18), "ALLGATHER", RING8, RINGS) == 0
    assert local_reduction_ns("AR", Fraction(1 << 18), "ALLREDUCE", RING8,
                              replace(RINGS, local_mem_gbyte_s=None)) == 0
    hd = replace(RINGS, implementations={"ALLREDUCE": ("halving-doubling",)})
    assert local_reduction_ns("AR", Fraction(1 << 18), "ALLREDUCE", RING8, hd) == 0


def test_a_workload_text_replay_does_not_charge_local_memory():
    """ASTRA-sim 1.0 charges no time per local-mem-bw; only Chakra replays (2.x) do."""
    text = "MICRO\n1\nc -1 0 NONE 0 0 NONE 0 0 ALLREDUCE 1048576 0\n"
    net = (AstraDim("ring", 8, 50.0, 500.0),)
    with_mem = replay(parse_workload(text, "m"), net, RINGS).finish_ns
    without = replay(parse_workload(text, "m"), net,
                     replace(RINGS, local_mem_gbyte_s=None)).finish_ns
    data = trace(node(1, 7, comm_type=0, comm_size=1 << 20))
    chakra = replay_trace(read_trace(data, "t"), net, RINGS).finish_ns
    chakra_without = replay_trace(read_trace(data, "t"), net,
                                  replace(RINGS, local_mem_gbyte_s=None)).finish_ns
    assert with_mem == without and chakra == chakra_without + 4 * 7 * 3 * 655


def test_a_bad_local_mem_bw_is_one_sentence():
    with pytest.raises(SpecError) as err:
        replay_system(system_pairs('{"local-mem-bw": 0}', "s.json"), 1, "s.json")
    assert str(err.value) == "s.json: local-mem-bw: 0.0 must be above 0"


def _all_reduce_rows() -> list[dict]:
    with REFERENCE.open() as f:
        return [r for r in csv.DictReader(f) if r["backend"] == "congestion_unaware"
                and r["case"].startswith("ar")]


@pytest.mark.parametrize("row", _all_reduce_rows(), ids=lambda r: r["case"])
def test_all_reduce_traces_finish_as_astra_sim_2_recorded(row):
    """benchmarks/data/astra2_chakra_reference.csv: ASTRA-sim 2.x's analytical backend on one
    All-Reduce node (its microbenchmark), rings of rings, the rt_template system."""
    npus = [int(n) for n in row["npus"].split("x")]
    size = int(row["case"].split("-")[1].removesuffix("MiB")) << 20
    net = tuple(AstraDim("ring", n, float(row["bandwidth_gbyte_s"]), float(row["latency_ns"]))
                for n in npus)
    system = replace(RINGS, endpoint_delay_ns=10.0,
                     local_mem_gbyte_s=float(row["local_mem_gbyte_s"]),
                     implementations={k: ("ring",) * len(npus) for k in RINGS.implementations})
    data = trace(node(0, 7, comm_type=0, comm_size=size))
    got = replay_trace(read_trace(data, "t"), net, system).finish_ns
    assert float(got) / int(row["finish_ns"]) == pytest.approx(1.0, abs=0.01)
