"""Exposed communication per logical dimension, the one rule of both backends
(workloads/training/exposure.py): known answers on hand-made traces, the emulator's real-time
loop giving the simulator's figures when its collectives end when the model's did, and the
emulator's rows carrying one figure per dimension of the job."""

from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import pytest
from realtime_helpers import FakeClock, ModelEngine

from testbed.core.formulas import TCP_GOODPUT
from workloads.launcher import loopback_job
from workloads.training.emulated import plan_pass
from workloads.training.exposure import covered, exposed_per_dim, phase_spans
from workloads.training.jobs import job_platform
from workloads.training.library import load
from workloads.training.realtime import Compute, RealTime

TINY = Path(__file__).parent / "data" / "training-tiny.txt"


def test_overlap_counts_the_union_of_spans_once():
    f = Fraction
    assert covered((f(0), f(10)), [(f(2), f(5)), (f(4), f(7)), (f(9), f(20))]) == 6
    assert covered((f(0), f(10)), []) == 0


def test_each_dimension_counts_the_waits_while_it_carried_a_phase():
    waits = [(0.0, 2.0), (5.0, 8.0)]
    spans = [[(1.0, 3.0), (2.5, 6.0)],  # overlapping phases of one dimension count once
             [(0.0, 10.0)],  # busy throughout: every wait
             []]  # idle: none
    # d0: 1 s of the first wait (1-2) and 1 s of the second (5-6); d1 both waits: 2 + 3
    assert exposed_per_dim(waits, spans, 0.0, 10.0) == pytest.approx([2.0, 5.0, 0.0])
    # dimensions busy together each count the time: 7 > the 5 s waited
    # a window cuts the waits: [1, 7) keeps 1-2 and 5-7
    assert exposed_per_dim(waits, spans, 1.0, 7.0) == pytest.approx([2.0, 3.0, 0.0])
    assert exposed_per_dim([], spans, 0.0, 10.0) == [0.0, 0.0, 0.0]


def test_exact_times_stay_exact():
    f = Fraction
    got = exposed_per_dim([(f(1, 3), f(2, 3))], [[(f(0), f(1, 2))]], f(0), f(1))
    assert got == [f(1, 6)] and isinstance(got[0], Fraction)


def test_phase_spans_put_each_phase_on_its_dimension():
    phases = [SimpleNamespace(dim=1, start=0.5, end=1.0), SimpleNamespace(dim=0, start=0.0,
                                                                          end=0.25)]
    assert phase_spans(phases, 3) == [[(0.0, 0.25)], [(0.5, 1.0)], []]


def test_the_real_time_loop_waits_when_the_model_waited():
    """Against a fake clock, with every collective finishing when the model's did, the loop's
    waits are the model's and the rule gives the simulator's per-dimension figures."""
    job = loopback_job(ranks=4, dims=[2, 2], dim_bandwidths=[40e6, 20e6],
                       training={"file": str(TINY)}, chunks=4)
    w = load(file=str(TINY))
    plan = plan_pass(w, *job_platform(job, TCP_GOODPUT))
    clock = FakeClock()
    engine = ModelEngine(plan)
    runner = RealTime(w, plan, engine, Compute("sleep", clock, clock.sleep), clock=clock)
    engine.runner = runner
    res = runner.run()
    model = plan.model
    ns = 1e-9
    assert [x for w in res.waits for x in w] == pytest.approx(
        [res.start + float(t) * ns for w in model.waits for t in w])
    assert sum(e - s for s, e in res.waits) == pytest.approx(res.exposed_s)
    spans = [[(res.start + float(s) * ns, res.start + float(e) * ns) for s, e in d]
             for d in model.dim_spans]
    want = [float(t) * ns for t in exposed_per_dim(model.waits, model.dim_spans, Fraction(0),
                                                   model.finish_ns)]
    got = exposed_per_dim(res.waits, spans, res.start, res.end)
    assert len(got) == 2 and got == pytest.approx(want, abs=1e-9)
    assert max(want) > 0  # the known answer is not trivially zero


def test_emulator_rows_carry_exposed_communication_per_dimension(tmp_path):
    """The workers' own path on loopback (plan, real-time loop, real chunked All-Reduces): every
    pass's row has one figure per dimension of the job, none above the time the rank waited
    while its phases of that dimension ran."""
    from testbed.core.traces import read_table
    from workloads.launcher import run_local

    run_local(ranks=4, dims=[2, 2], algorithm="baseline", chunks=2, out_dir=tmp_path,
              timeout=30, collective_timeout=30, wall_timeout=90,
              training={"file": str(TINY), "passes": 2, "warmup": 1})
    it = read_table(tmp_path, "iterations").to_pandas()
    ph = read_table(tmp_path, "phases").to_pandas()
    assert len(it) == 4 * 2 and it["correct"].all()
    for _, r in it.iterrows():
        assert len(r["exposed_dim"]) == 2
        assert all(0 <= x <= r["exposed_comm"] + 1e-9 for x in r["exposed_dim"])
        # a dimension can count only time in which this rank ran one of its phases
        mine = ph[(ph["rank"] == r["rank"]) & (ph["iteration"] == r["iteration"])]
        for d, x in enumerate(r["exposed_dim"]):
            on = mine[mine["dim"] == d]
            assert x <= (on["end"] - on["start"]).sum() + 1e-9
