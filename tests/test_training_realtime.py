"""The emulator's training replay, its pure parts: the pass the model plans (what every rank
executes), the real-time loop against a fake clock and engine, and what it refuses."""

from fractions import Fraction
from pathlib import Path

import pytest
from realtime_helpers import FakeClock, ModelEngine

from testbed.core.formulas import TCP_GOODPUT
from workloads.launcher import loopback_job
from workloads.training.astra_text import parse_workload
from workloads.training.emulated import (
    emulator_problem,
    plan_pass,
    predicted_exposed_s,
    predicted_pass_s,
)
from workloads.training.jobs import job_platform
from workloads.training.library import load, scaled
from workloads.training.realtime import Compute, RealTime
from workloads.training.replay import replay

TINY = Path(__file__).parent / "data" / "training-tiny.txt"
DIMS, RATES = [2, 2], [40e6, 20e6]


def platform(algorithm="baseline"):
    """The simulator's platform of a 2x2 job at 40/20 Mbit/s, as a worker makes it."""
    job = loopback_job(ranks=4, dims=DIMS, dim_bandwidths=RATES, training={"file": str(TINY)},
                       algorithm=algorithm, chunks=4)
    return job_platform(job, TCP_GOODPUT)


@pytest.mark.parametrize("algorithm", ["baseline", "themis"])
def test_the_plan_runs_every_chunk_phase_once_in_a_per_dimension_order(algorithm):
    w = load(file=str(TINY))
    plan = plan_pass(w, *platform(algorithm))
    assert [(c.layer, c.stage) for c in plan.collectives] == [(2, "wg"), (1, "wg"), (0, "wg")]
    assert [k for _, _, k in plan.issued] == [0, 1, 2]
    every = [ph for seq in plan.sequences.values() for ph in seq]
    assert sorted((p.chunk, p.index) for p in every) == sorted(
        (p.chunk, p.index) for phases in plan.chunks for p in phases)
    for (d, _), seq in plan.sequences.items():
        assert all(p.dim == d for p in seq)
    ids = [cid for c in plan.collectives for cid in c.chunk_ids]
    assert ids == list(range(len(plan.chunks)))
    # the plan's pass is the replay's one pass
    assert plan.model.finish_ns == replay(w, *platform(algorithm)).finish_ns


def test_real_time_loop_reproduces_the_model_with_a_fake_clock():
    w = load(file=str(TINY))
    plan = plan_pass(w, *platform())
    clock = FakeClock()
    engine = ModelEngine(plan)
    runner = RealTime(w, plan, engine, Compute("sleep", clock, clock.sleep), clock=clock)
    engine.runner = runner
    res = runner.run()
    assert res.time_s == pytest.approx(predicted_pass_s(plan), abs=1e-6)
    assert res.compute_s == pytest.approx(float(plan.model.compute_ns) / 1e9, abs=1e-6)
    assert res.waiting_s == pytest.approx(float(plan.model.exposed_ns) / 1e9, abs=1e-6)
    assert res.exposed_s == pytest.approx(predicted_exposed_s(plan), abs=1e-6)
    assert res.exposed_s > res.waiting_s  # the last collective runs after the compute
    assert all(t.issued is not None and t.finished is not None for t in res.collectives)


def test_busy_compute_spins_until_the_time_and_carries_overshoot():
    clock = FakeClock()
    steps = iter([0.0, 0.3, 0.7, 1.2, 1.2])  # what the clock reads at each call

    def reads():
        return 100.0 + next(steps)

    c = Compute("busy", reads)
    c.spend(1.0)  # begin 0, then 0.3, 0.7 (< 1), 1.2 (done), took 1.2
    assert c.spent == pytest.approx(1.2) and c.debt == pytest.approx(0.2)
    c2 = Compute("sleep", clock, clock.sleep)
    c2.spend(0.5)
    c2.spend(Fraction(1, 10**9))  # a 1 ns step
    assert c2.spent == pytest.approx(0.5 + 1e-9)


def test_what_the_emulator_refuses_is_one_sentence():
    a2a = parse_workload("DATA\n1\na -1 10 ALLTOALL 4096 0 NONE 0 10 ALLREDUCE 4096 1\n", "w")
    msg = emulator_problem(a2a, [2, 2], 4, "jobs.0.workload")
    assert "ALLTOALL is not replayed on the emulator" in msg and "--backend sim" in msg
    tiny = scaled(load(file=str(TINY)), size_scale=1e-5)
    assert "fewer float32 values than the job's 4 chunks" in emulator_problem(tiny, [2, 2], 4)
    assert emulator_problem(load(file=str(TINY)), [2, 2], 4) is None
    t = load(model="themis-transformer-1t")  # All-Gathers on its model-parallel dimensions
    assert "is not replayed on the emulator" in emulator_problem(t, [4, 4], 1)


@pytest.mark.parametrize(("workload", "says"), [
    ({"file": "/nonexistent/w.txt"}, "jobs.0.workload: workload file /nonexistent/w.txt:"),
    ({"model": "themis-dlrm-medium"}, "ALLTOALL is not replayed on the emulator"),
    ({"file": str(TINY), "size_scale": 1e-5}, "fewer float32 values than the job's 4 chunks"),
])
def test_the_emulator_refuses_a_training_job_in_one_sentence_before_any_fabric(workload, says):
    from testbed.core.errors import SpecError
    from testbed.core.experiment import expand
    from testbed.core.topology import build_plan
    from testbed.emulator.workers import check_training

    (exp,) = expand({
        "name": "t", "policy": "shortest",
        "fabric": {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                                {"size": 2, "mbit_s": 20, "kind": "switch"}]},
        "jobs": [{"name": "t", "hosts_wanted": 4, "chunks": 4,
                  "workload": {"kind": "training", **workload}}]})
    with pytest.raises(SpecError) as err:
        check_training(exp, build_plan(exp.fabric, exp.rate_scale))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_workload_with_layers_without_collectives_runs_its_one_collective():
    """The artifact's fused ResNet-50: 54 layers, one All-Reduce (on layer 0); every issue
    call of the loop, with or without a collective, matches the model's."""
    w = scaled(load(model="themis-resnet50"), 0.01, 10)
    plan = plan_pass(w, *platform())
    assert len(plan.issued) == 54 and [k for *_, k in plan.issued if k is not None] == [0]
    clock = FakeClock()
    engine = ModelEngine(plan)
    runner = RealTime(w, plan, engine, Compute("sleep", clock, clock.sleep), clock=clock)
    engine.runner = runner
    assert runner.run().time_s == pytest.approx(predicted_pass_s(plan), abs=1e-6)
