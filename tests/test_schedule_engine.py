"""The one chunk-schedule engine: dispatch rules, its analytic driver, and the model, the
workers' orders and the simulator agreeing because they all use it."""

from __future__ import annotations

from fractions import Fraction

import pytest

from testbed.core.errors import FabricLabError
from testbed.sim.collectives import MultidimFabric, hierarchical_allreduce
from workloads.collectives.halving_doubling import COLLECTIVE as HD
from workloads.hierarchical import schedule
from workloads.model import predict, simulate
from workloads.schedule_engine import ChunkEngine, Phase, chunk_phases, run_analytic
from workloads.themis import ChunkPlan, plan


def phase(chunk: int, dim: int, sent: int, index: int = 0) -> Phase:
    return Phase(chunk, index, dim, "AR", Fraction(sent), Fraction(sent), 1)


def test_fifo_and_scf_pick_and_tie_to_the_lower_chunk():  # the fabriclab semantics
    chunks = [[phase(0, 0, 5)], [phase(1, 0, 3)], [phase(2, 0, 3)]]
    fifo = [r.phase.chunk for r in run_analytic(ChunkEngine(chunks, 1, "fifo",
                                                            semantics="fabriclab"),
                                                lambda ph: ph.sent)]
    scf = [r.phase.chunk for r in run_analytic(ChunkEngine(chunks, 1, "scf",
                                                           semantics="fabriclab"),
                                               lambda ph: ph.sent)]
    assert fifo == [0, 1, 2] and scf == [1, 2, 0]


def test_slots_run_phases_of_one_dimension_side_by_side():
    chunks = [[phase(c, 0, 4)] for c in range(3)]
    runs = run_analytic(ChunkEngine(chunks, 1, "fifo", max_active=2), lambda ph: ph.sent)
    assert [(r.phase.chunk, r.slot, r.start, r.end) for r in runs] == [
        (0, 0, 0, 4), (1, 1, 0, 4), (2, 0, 4, 8)]


def test_tolerance_makes_near_keys_tie():
    chunks = [[phase(0, 0, 2)], [phase(1, 0, 1)]]
    exact = ChunkEngine(chunks, 1, "scf", semantics="fabriclab")
    exact.begin(0)
    assert exact.dispatch()[0][0].chunk == 1
    near = [[phase(0, 0, 1)], [Phase(1, 0, 0, "AR", Fraction(1), Fraction(1) - Fraction(1, 10**12),
                                     1)]]
    loose = ChunkEngine(near, 1, "scf", tolerance=(1e-9, 1e-12), semantics="fabriclab")
    loose.begin(0.0)
    assert loose.dispatch()[0][0].chunk == 0  # within tolerance: the lower chunk


def test_engine_refuses_an_unknown_order():
    with pytest.raises(FabricLabError, match="order"):
        ChunkEngine([], 1, "lifo")


def test_the_workers_orders_are_the_models_order():
    dims, bws = (4, 2, 3), (300e9, 100e9, 200e9)
    plans = plan(dims, bws, 4 * 10007, 9, "themis", align=4)
    for order in ("fifo", "scf"):
        pred = predict(dims, bws, 4 * 10007, 9, "themis", order=order, align=4)
        sched = schedule(plans, dims, bws, order, 1)
        for d in range(3):
            model_order = [(r.chunk, r.op) for r in pred.schedule if r.dim == d]
            worker_order = [(ph.chunk, ph.op) for ph in sched.sequences.get((d, 0), ())]
            assert model_order == worker_order


@pytest.mark.parametrize("order", ["fifo", "scf"])
def test_the_simulators_order_and_time_are_the_models(order):
    dims, bws = (4, 4), (200e9, 100e9)
    plans = plan(dims, bws, 48 << 20, 8, "themis")
    pred = simulate(plans, dims, bws, order=order)
    sim = hierarchical_allreduce(MultidimFabric(dims, bws), plans, order)
    assert sim.time_s == pytest.approx(pred.time_s, rel=1e-9)
    assert [(s.chunk, s.dim, s.op) for s in sim.schedule] == [
        (r.chunk, r.dim, r.op) for r in pred.schedule]


def test_model_counts_steps_of_the_dimension_collective():
    dims, bws = (4, 8), (1e9, 1e9)
    ring = predict(dims, bws, 1 << 20, 4, "baseline")
    hd = predict(dims, bws, 1 << 20, 4, "baseline", dim_algorithm="halving-doubling")
    assert hd.time_s == ring.time_s  # bandwidth only: both send the same bytes
    ring_l = predict(dims, bws, 1 << 20, 4, "baseline", step_latency_s=1e-4)
    hd_l = predict(dims, bws, 1 << 20, 4, "baseline", dim_algorithm="halving-doubling",
                   step_latency_s=1e-4)
    assert hd_l.time_s < ring_l.time_s  # log2 n steps against n-1
    phases = chunk_phases(ChunkPlan(0, 64, (0, 1)), dims, HD)
    assert [p.steps for p in phases] == [2, 6, 2]
    with pytest.raises(FabricLabError, match="power-of-two"):
        predict((3, 4), bws, 1 << 20, 4, dim_algorithm="halving-doubling")
