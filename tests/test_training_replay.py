"""The training replay: ASTRA-sim 1.0's loop per workload type, collectives on dimension subsets,
the Themis greedy, and the engine it shares with the single-collective model."""

from fractions import Fraction

import pytest

from testbed.core.astra_formats import AstraDim
from testbed.core.registry import SCHEDULES
from workloads.model import predict
from workloads.schedule_engine import Phase, insert_position, larger_size
from workloads.themis import plan
from workloads.training.astra_text import parse_workload
from workloads.training.collectives import chunk_specs
from workloads.training.platform import LogicalDim, ReplaySystem, logical_dims
from workloads.training.replay import replay

NET = (AstraDim("switch", 4, 40.0), AstraDim("switch", 4, 20.0))
HD = {k: ("halving-doubling",) * 2 for k in ("ALLREDUCE", "REDUCESCATTER", "ALLGATHER")}
HD["ALLTOALL"] = ("direct",) * 2


def system(**kw):
    base = {"splits": 16, "intra": "fifo", "inter": "baseline", "implementations": HD}
    return ReplaySystem(**{**base, **kw})


def test_compute_only_pass_is_compute_plus_one_cycle_per_step():
    w = parse_workload("DATA\n2\na -1 10 NONE 0 20 NONE 0 30 NONE 0 1\n"
                       "b -1 1 NONE 0 2 NONE 0 3 NONE 0 1\n", "w")
    r = replay(w, NET, system())
    # forward a, b; weight gradient b, input gradient b, weight gradient a; a step costs 1 cycle
    assert r.pass_end_ns == [10 + 1 + 1 + 1 + 3 + 1 + 2 + 1 + 30]
    assert r.finish_ns == r.pass_end_ns[0] + 1 and r.exposed_ns == 0


@pytest.mark.parametrize("inter, intra", [("baseline", "fifo"), ("themis", "fifo")])
def test_fused_all_reduce_adds_the_single_collective_time(inter, intra):
    size = 1 << 26
    w = parse_workload(f"DATA\n1\na -1 100 NONE 0 0 NONE 0 50 ALLREDUCE {size} 7\n", "w")
    r = replay(w, NET, system(inter=inter, intra=intra))
    (c,) = r.collectives
    expected = 100 + 1 + 50 + (c.finished_ns - c.issued_ns) + 7
    assert float(r.finish_ns) == pytest.approx(expected, rel=1e-9)
    # the collective alone is the bandwidth model's time plus ASTRA-sim 1.0's whole-ns clock
    # and reduction time (a few ns per phase, docs/workload-replay.md)
    alone = predict((4, 4), [40 * 2**30 * 8, 20 * 2**30 * 8], size, 16,
                    policy=inter, order=intra, dim_algorithm="halving-doubling")
    assert float(c.finished_ns - c.issued_ns) == pytest.approx(alone.time_s * 1e9, rel=1e-4)
    assert r.collectives[0].dims == (0, 1)


def test_forward_waits_for_previous_pass_weight_gradient():
    w = parse_workload("DATA\n1\na -1 100 NONE 0 0 NONE 0 50 ALLREDUCE 67108864 0\n", "w")
    one = replay(w, NET, system())
    two = replay(w, NET, system(), passes=2)
    comm = one.collectives[0].done_ns - one.collectives[0].issued_ns
    # pass 2's forward starts only when pass 1's All-Reduce is done
    assert two.pass_end_ns[1] == two.collectives[0].done_ns + 100 + 1 + 50
    assert two.finish_ns == two.collectives[1].done_ns == two.pass_end_ns[1] + comm


def test_break_dimension_splits_where_the_group_ends():
    dims = (AstraDim("switch", 16, 150.0), AstraDim("switch", 64, 100.0))
    logical, boundary = logical_dims(dims, 128)
    assert [d.size for d in logical] == [16, 8, 8] and boundary == 1
    assert [d.gbyte_s for d in logical] == [150.0, 100.0, 100.0]
    assert logical_dims(dims, 16)[1] == 0 and logical_dims(dims, 1)[1] == -1


def test_transformer_collectives_use_model_and_data_dimensions():
    layer = "l -1 10 ALLREDUCE 65536 10 ALLGATHER 4096 10 ALLREDUCE 65536 1\n"
    w = parse_workload("HYBRID_TRANSFORMER model_parallel_NPU_group: 4\n2\n" + layer * 2, "t")
    r = replay(w, NET, system(inter="themis"))
    by_stage = {(c.layer, c.stage): c.dims for c in r.collectives}
    assert by_stage[("l", "fwd")] == (0,) and by_stage[("l", "ig")] == (0,)
    assert by_stage[("l", "wg")] == (1,)
    assert r.finish_ns > r.compute_ns


def test_themis_greedy_on_all_dimensions_matches_the_all_reduce_planner():
    sizes, bw = (16, 8, 8), (200.0, 100.0, 50.0)
    greedy = SCHEDULES.get("themis").replay_orderer(sizes, bw)  # the replay's own greedy
    plans = plan(sizes, bw, 1 << 24, 16, policy="themis")
    assert [tuple(greedy.order((1 << 24) // 16, (True,) * 3, False)) for _ in plans] == [
        p.rs_order for p in plans]


def test_all_gather_runs_dimensions_descending_and_all_to_all_ascending():
    dims = [LogicalDim(4, "switch", 40.0, 0, 0), LogicalDim(4, "switch", 20.0, 0, 1)]
    ag = chunk_specs("ALLGATHER", 1600, (True, True), dims, system(splits=1), None)
    assert [(op, d) for op, d, _ in ag[0].steps] == [("AG", 1), ("AG", 0)]
    assert [s for _, _, s in ag[0].steps] == [1600, 6400]
    a2a = chunk_specs("ALLTOALL", 1600, (True, False), dims, system(splits=2), None)
    assert len(a2a) == 2 and a2a[0].steps == (("A2A", 0, 800),)
    assert chunk_specs("ALLREDUCE", 1600, (False, False), dims, system(), None) == []


def test_dlrm_forward_waits_for_the_embedding_all_to_all():
    emb = "e -1 10 ALLTOALL 1048576 10 ALLTOALL 1048576 10 ALLREDUCE 1048576 1\n"
    mlp = "m -1 10 NONE 0 10 NONE 0 10 NONE 0 1\n"
    w = parse_workload("HYBRID_DLRM 1\n3\n" + emb + mlp * 2, "d")
    r = replay(w, NET, system(inter="themis", intra="scf"))
    kinds = [(c.stage, c.kind, c.dims) for c in r.collectives]
    assert ("fwd", "ALLTOALL", (0, 1)) in kinds and ("ig", "ALLTOALL", (0, 1)) in kinds
    fwd = next(c for c in r.collectives if c.stage == "fwd")
    # layer 1 (the last bottom layer) waits, after its compute, for the embedding's all-to-all
    assert r.layers[0].waiting_ns["fwd"] == fwd.done_ns - (fwd.issued_ns + 1 + 10)


def test_micro_issues_one_collective_per_pass_at_once():
    w = parse_workload("MICRO\n1\nc -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1048576 0\n", "m")
    one, three = replay(w, NET, system()), replay(w, NET, system(), passes=3)
    assert len(three.collectives) == 3 and all(c.issued_ns == 0 for c in three.collectives)
    assert three.finish_ns == pytest.approx(3 * one.finish_ns, rel=1e-6)
    assert isinstance(three.finish_ns, Fraction)


def test_scf_compares_the_larger_of_input_and_output_as_astra_sim_does():
    # a Reduce-Scatter of 1 MiB meets a waiting All-Gather of a 256 KiB shard on 4 NPUs (output
    # 1 MiB): ASTRA-sim 1.0 puts the newcomer in front (seen in its own trace); by input size
    # it would go behind
    waiting = [Phase(1, 5, 0, "AG", Fraction(262144), Fraction(3 * 262144), 2)]
    rs = Phase(2, 0, 0, "RS", Fraction(1048576), Fraction(786432), 2)
    assert insert_position(waiting, rs, "scf", 3, size=larger_size) == 0
    assert insert_position(waiting, rs, "scf", 3) == 1
    assert insert_position(waiting, rs, "scf", 1, size=larger_size) == 1  # one phase left: back


def test_all_to_all_direct_at_once_ring_one_message_after_another():
    from workloads.training.collectives import ChunkSpec, phase_rate, phases
    sw = LogicalDim(4, "switch", 1.0, 0, 0)
    fc = LogicalDim(4, "fully_connected", 3.0, 0, 0)
    spec = ChunkSpec(4096, (("A2A", 0, 4096),))
    for dim, impl, messages in ((sw, "direct", 1), (sw, "ring", 6), (fc, "direct", 1),
                                (fc, "ring", 6)):
        sysm = system(implementations={**HD, "ALLTOALL": (impl,)})
        (phase,) = phases(spec, 0, "ALLTOALL", [dim], sysm)
        # each message is 1 KiB at one link's rate (a switch: the NPU's; FC: a third of it);
        # direct sends the three at once, ring the six of its steps one after another
        assert phase.sent / phase_rate(dim, "ALLTOALL", "A2A", sysm) == pytest.approx(
            messages * 1024 / (dim.gbyte_s / dim.links * 2**30 / 1e9))


def test_a_split_fully_connected_dimension_keeps_its_links():
    dims = (AstraDim("ring", 2, 500.0), AstraDim("fully_connected", 8, 175.0),
            AstraDim("switch", 2, 12.5))
    logical, boundary = logical_dims(dims, 4)
    assert [d.size for d in logical] == [2, 2, 4, 2] and boundary == 1
    assert [d.links for d in logical] == [1, 7, 7, 1]


# AnalyticalAstra (ASTRA-sim 1.0 07d5d19, astra-network-analytical d27635b), one collective of
# S bytes in one chunk on one 40 GB/s switch dimension of n NPUs (link latency 1, endpoint
# delay 1): its Reduce-Scatter took this many ns longer than the All-Gather of S/n, which sends
# the same messages without reducing them (docs/themis-semantics.md)
MEASURED_REDUCTION_NS = [  # (implementation, n, S, RS - AG)
    ("halving-doubling", 2, 1 << 26, 0), ("halving-doubling", 4, 1 << 22, 6),
    ("halving-doubling", 8, 1 << 24, 36), ("halving-doubling", 16, 1 << 26, 171),
    ("ring", 2, 1 << 22, 12), ("ring", 8, 1 << 26, 336), ("ring", 16, 1 << 22, 0),
    ("direct", 4, 1 << 26, 99), ("direct", 8, 1 << 24, 12)]


@pytest.mark.parametrize("impl, n, size, extra", MEASURED_REDUCTION_NS)
def test_reduction_time_is_astra_sim_1_0s_local_memory(impl, n, size, extra):
    from workloads.training.collectives import astra1_reduction_ns
    dim = LogicalDim(n, "switch", 40.0, 0, 0)
    sysm = system(implementations={"REDUCESCATTER": (impl,)})
    assert astra1_reduction_ns("RS", Fraction(size), "REDUCESCATTER", dim, sysm) == extra
    assert astra1_reduction_ns("AG", Fraction(size), "REDUCESCATTER", dim, sysm) == 0


# The phases' durations in AnalyticalAstra's own trace of a 4x4 switch system (40 and 20 GB/s):
# (dimension, op, input bytes, ns), latencies of 1 ns per hop and endpoint included
MEASURED_PHASE_NS = [(0, "RS", 1 << 22, 73255), (0, "RS", 1 << 20, 18317),
                     (1, "RS", 1 << 20, 36628), (1, "RS", 1 << 22, 146497),
                     (0, "AG", 1 << 18, 18317), (1, "AG", 1 << 18, 36628)]


@pytest.mark.parametrize("d, op, size, ns", MEASURED_PHASE_NS)
def test_a_phase_takes_astra_sim_1_0s_whole_ns(tmp_path, d, op, size, ns):
    from workloads.training.collectives import ChunkSpec, phases
    from workloads.training.runner import CollectiveRunner
    network, sysm = _four_by_four(tmp_path, "FIFO", "baseline", 64)
    dims = logical_dims(network, None)[0]
    (phase,) = phases(ChunkSpec(size, ((op, d, size),)), 0, "ALLREDUCE", dims, sysm)
    assert CollectiveRunner(dims, sysm)._duration(phase, "ALLREDUCE") == ns


def _four_by_four(tmp_path, intra, inter, splits):
    """The network and system files of the minimal case, as AnalyticalAstra read them."""
    from testbed.core.astra_formats import read_network, system_pairs
    from workloads.training.platform import replay_system
    net = tmp_path / "net.json"
    net.write_text(
        '{"topology-name": "Hierarchical", "topologies-per-dim": ["Switch", "Switch"], '
        '"dimension-type": ["N", "N"], "dimensions-count": 2, "units-count": [4, 4], '
        '"links-count": [1, 1], "link-latency": [1, 1], "link-bandwidth": [40, 20], '
        '"nic-latency": [0, 0], "router-latency": [0, 0], "hbm-latency": [1, 1], '
        '"hbm-bandwidth": [1, 1], "hbm-scale": [0, 0]}')
    text = ("scheduling-policy: LIFO\nendpoint-delay: 1\nactive-chunks-per-dimension: 1\n"
            f"preferred-dataset-splits: {splits}\nboost-mode: 1\n"
            + "".join(f"{k}-implementation: halvingDoubling_halvingDoubling\n"
                      for k in ("all-reduce", "all-gather", "reduce-scatter"))
            + "all-to-all-implementation: direct_direct\ncollective-optimization: localBWAware\n"
            f"intra-dimension-scheduling: {intra}\ninter-dimension-scheduling: {inter}\n")
    dims = read_network(net)
    return dims, replay_system(system_pairs(text, "sys.txt"), len(dims), "sys.txt")


# AnalyticalAstra's "all passes finished at time" for one All-Reduce of S bytes in 64 chunks on
# that 4x4 system (benchmarks/data/astra_collectives_reference.csv has the command line's form)
@pytest.mark.parametrize("intra, inter, size, finish_ns", [
    ("SCF", "themis", 1 << 24, 602664), ("SCF", "themis", 1 << 28, 9632524),
    ("FIFO", "themis", 1 << 28, 7838081), ("FIFO", "baseline", 1 << 28, 9376261)])
def test_scf_on_commensurate_rates_orders_ties_as_astra_sim_1_0(tmp_path, intra, inter, size,
                                                               finish_ns):
    # with exact arithmetic a dimension-0 Reduce-Scatter and a dimension-1 one end at the same
    # instant; ASTRA-sim's whole-ns clock and reduction time end the dimension-1 one first, so
    # SCF serves a waiting All-Gather there before the newcomer (without them: 490586 and
    # 7837693 ns, 18.6% early)
    dims, sysm = _four_by_four(tmp_path, intra, inter, 64)
    w = parse_workload(f"MICRO\n1\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE {size} 5\n", "w")
    assert replay(w, dims, sysm).finish_ns == finish_ns
