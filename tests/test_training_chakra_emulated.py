"""A Chakra trace on the emulator, its pure parts: the pass the model plans from the trace
(the simulator's own replay, keeping its issue order), the real-time walk of the trace's nodes
against a fake clock and engine, and what the emulator refuses."""

from pathlib import Path

import pytest
from realtime_helpers import FakeClock, ModelEngine

from testbed.core.errors import SpecError
from testbed.core.formulas import TCP_GOODPUT
from workloads.launcher import loopback_job
from workloads.training.chakra import encode, read_trace, replay_trace, schema
from workloads.training.chakra_examples import LAYERS, PASSES, training_trace
from workloads.training.emulated import (
    emulator_problem,
    plan_pass,
    predicted_exposed_s,
    predicted_pass_s,
)
from workloads.training.jobs import job_platform
from workloads.training.library import ChakraTrace, scaled
from workloads.training.realtime import Compute, TraceRealTime

DIMS, RATES = [2, 2], [40e6, 20e6]
COMP, COLL = 4, 7


def platform():
    """The simulator's platform of a 2x2 job at 40/20 Mbit/s in 4 chunks, as a worker makes
    it."""
    job = loopback_job(ranks=4, dims=DIMS, dim_bandwidths=RATES, chunks=4,
                       training={"model": "themis-resnet50"})
    return job_platform(job, TCP_GOODPUT)


def node(nid, kind, deps=(), micros=0, **attrs):
    n = schema()["Node"](id=nid, name=f"n{nid}", type=kind, data_deps=list(deps),
                         duration_micros=micros)
    for name, value in attrs.items():
        n.attr.add(name=name, int64_val=value)
    return n


def trace_bytes(*nodes) -> bytes:
    return encode([schema()["GlobalMetadata"](version="0.0.4"), *nodes])


def chakra(data: bytes, **scale) -> ChakraTrace:
    return scaled(ChakraTrace(tuple(read_trace(data, "t.0.et")), "t.0.et"), **scale)


# compute 3 us; then an All-Reduce and, beside it, 2 us of compute; then 5 us after both
SMALL = trace_bytes(node(1, COMP, micros=3), node(2, COLL, [1], comm_type=0, comm_size=1 << 20),
                    node(3, COMP, [1], micros=2), node(4, COMP, [2, 3], micros=5))


def walk(w, plan, late_s=0.0):
    clock = FakeClock()
    engine = ModelEngine(plan, late_s)
    runner = TraceRealTime(w.nodes, plan, engine, Compute("sleep", clock, clock.sleep),
                           clock=clock)
    engine.runner = runner
    return runner.run()


def test_the_plan_is_the_simulators_replay_in_its_issue_order():
    w = chakra(SMALL, compute_scale=10)
    plan = plan_pass(w, *platform())
    assert plan.issued == ((1, "COMP_NODE", None), (2, "COMM_COLL_NODE", 0),
                           (3, "COMP_NODE", None), (4, "COMP_NODE", None))
    (c,) = plan.collectives
    assert (c.layer, c.kind, c.size_bytes, c.dims, c.update_ns) == (2, "ALLREDUCE", 1 << 20,
                                                                     (0, 1), 0)
    assert c.chunk_ids == tuple(range(len(plan.chunks))) and len(c.chunk_ids) == 4
    every = sorted((p.chunk, p.index) for seq in plan.sequences.values() for p in seq)
    assert every == sorted((p.chunk, p.index) for phases in plan.chunks for p in phases)
    # compute at 10x (100 us in all); the plan's model is the simulator's replay of the trace
    sim = replay_trace(w.nodes, *platform())
    assert plan.model.compute_ns == sim.compute_ns == 100_000
    assert plan.model.finish_ns == sim.finish_ns
    assert sim.finish_ns == 30_000 + (sim.collectives[0].done_ns - 30_000) + 50_000


@pytest.mark.parametrize("data", [SMALL, training_trace()], ids=["small", "training"])
def test_the_walk_reproduces_the_model_with_a_fake_clock(data):
    w = chakra(data, size_scale=1 / 64, compute_scale=10)
    plan = plan_pass(w, *platform())
    res = walk(w, plan)
    assert res.time_s == pytest.approx(predicted_pass_s(plan), abs=1e-6)
    assert res.compute_s == pytest.approx(float(plan.model.compute_ns) / 1e9, abs=1e-9)
    assert res.exposed_s == pytest.approx(predicted_exposed_s(plan), abs=1e-6)
    for t, rec in zip(res.collectives, plan.model.collectives, strict=True):  # issued in time
        assert t.issued - res.start == pytest.approx(float(rec.issued_ns) / 1e9, abs=1e-6)
    if data != SMALL:
        assert len(plan.collectives) == len(LAYERS) * PASSES


def test_a_late_collective_holds_back_what_depends_on_it():
    w = chakra(SMALL, compute_scale=10)
    plan = plan_pass(w, *platform())
    res = walk(w, plan, late_s=0.01)
    # node 4 (50 us) starts when the All-Reduce ends, 10 ms late
    done = res.collectives[0].finished - res.start
    assert res.time_s == pytest.approx(done + 50e-6, abs=1e-9)
    assert res.time_s == pytest.approx(predicted_pass_s(plan) + 0.01, abs=1e-6)


def test_what_the_emulator_refuses_in_a_trace_is_one_sentence():
    gather = trace_bytes(node(1, COMP, micros=1), node(2, COLL, [1], comm_type=2, comm_size=64))
    msg = emulator_problem(chakra(gather), DIMS, 4, "jobs.0.workload")
    assert msg == ("jobs.0.workload: node 2 (n2)'s ALLGATHER is not replayed on the emulator "
                   "(it runs ALLREDUCE); use --backend sim")
    tiny = trace_bytes(node(1, COLL, comm_type=0, comm_size=8))
    assert "node 1 (n1)'s collective has 8 bytes, fewer float32 values than the job's 4 " \
           "chunks" in emulator_problem(chakra(tiny), DIMS, 4)
    assert emulator_problem(chakra(SMALL), DIMS, 4) is None
    assert emulator_problem(chakra(training_trace()), [8], 4) is None


@pytest.mark.parametrize(("nodes", "says"), [
    ((node(1, 5, comm_size=64),), "node 1 (n1): COMM_SEND_NODE nodes are not replayed yet"),
    ((node(1, 6, comm_size=64),), "node 1 (n1): COMM_RECV_NODE nodes are not replayed yet"),
    ((node(1, COLL, comm_type=6, comm_size=64),), "node 1 (n1)'s ALLTOALL is not replayed on "
                                                  "the emulator"),
])
def test_the_emulator_refuses_such_a_training_job_before_any_fabric(tmp_path, nodes, says):
    from testbed.core.experiment import expand
    from testbed.core.topology import build_plan
    from testbed.emulator.workers import check_training

    path = Path(tmp_path) / "t.0.et"
    path.write_bytes(trace_bytes(*nodes))
    (exp,) = expand({
        "name": "t", "policy": "shortest",
        "fabric": {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                                {"size": 2, "mbit_s": 20, "kind": "switch"}]},
        "jobs": [{"name": "t", "hosts_wanted": 4, "chunks": 4,
                  "workload": {"kind": "training", "file": str(path)}}]})
    with pytest.raises(SpecError) as err:
        check_training(exp, build_plan(exp.fabric, exp.rate_scale))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_chakra_training_trace_runs_on_local_workers(tmp_path):
    """The workers' own path (plan, walk, real chunked All-Reduces) on loopback: one row per
    pass, every collective's sum right."""
    from testbed.core.traces import read_table
    from workloads.launcher import run_local

    path = Path(tmp_path) / "train.0.et"
    path.write_bytes(training_trace())
    out = Path(tmp_path) / "out"
    run_local(ranks=4, dims=[2, 2], algorithm="baseline", chunks=2, out_dir=out, timeout=30,
              collective_timeout=30, wall_timeout=90,
              training={"file": str(path), "passes": 2, "warmup": 1, "size_scale": 1 / 256})
    it = read_table(out, "iterations").to_pandas()
    assert len(it) == 4 * 2 and it["correct"].all() and set(it["model"]) == {"train.0.et"}
    assert (it["buckets"] == len(LAYERS) * PASSES).all()
    # the trace's compute: 3.5 ms per pass of it, 2 of them
    assert ((it["compute"] > 6.9e-3) & (it["compute"] < 7.1e-3)).all()
    assert (it["time"] >= it["compute"]).all()
    assert it["exposed_dim"].isna().all()  # as the simulator's row of a trace: not split
    colls = read_table(out, "collectives").to_pandas()
    assert len(colls) == 4 * 2 * len(LAYERS) * PASSES and colls["correct"].all()
