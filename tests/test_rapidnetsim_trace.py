"""RapidNetSim's job list (reconstructed from its stored generator output) as a trace."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from testbed.core.errors import FabricLabError
from testbed.sim.trace_loading import check_trace, load_trace, trace_identity
from testbed.sim.traces import rapidnetsim_trace


def test_the_job_list_scales_its_arrivals_with_the_gap_and_keeps_its_jobs() -> None:
    a, b = rapidnetsim_trace(5000, 241.0), rapidnetsim_trace(5000, 482.0)
    assert len(a) == 5000
    assert [j.gpus for j in a] == [j.gpus for j in b]
    assert all(abs(y.arrival - 2 * x.arrival) < 1e-6 for x, y in zip(a, b, strict=True))
    assert {j.gpus for j in a} <= {8, 64, 128, 192, 256, 384, 512}
    # The generator's rounding: run times are whole 100 s in [1000, 100000] s.
    assert all(1000 <= j.compute_s <= 100000 and j.compute_s % 100 == 0 for j in a)
    assert all(j.grad_bytes == 0 for j in a)  # placement-independent run times


def test_the_offered_load_at_241_s_is_above_nine_tenths() -> None:
    jobs = rapidnetsim_trace(5000, 241.0)
    offered = sum(j.gpus * j.compute_s for j in jobs) / (8192 * jobs[-1].arrival)
    assert 0.9 < offered < 0.95


def test_with_comm_keeps_each_jobs_isolated_run_time_but_sends_bytes() -> None:
    fixed, comm = rapidnetsim_trace(50, 241.0), rapidnetsim_trace(50, 241.0, with_comm=True)
    for f, c in zip(fixed, comm, strict=True):
        assert c.compute_s <= f.compute_s and c.grad_bytes > 0 and c.collective


def test_the_trace_forms_are_checked_with_one_sentence() -> None:
    check_trace("rapidnetsim:241")
    for bad in ("rapidnetsim", "rapidnetsim:fast", "rapidnetsim:-3", "rapidnetsim-comm:inf"):
        with pytest.raises(FabricLabError, match="inter-arrival"):
            check_trace(bad)
    assert len(load_trace("rapidnetsim-comm:285", 7, 0.8, 8192, 1)) == 7
    assert trace_identity("rapidnetsim:241", 0.8)["trace_sha256"]


def test_the_jittered_run_times_are_those_rapidnetsims_own_run_measured() -> None:
    """benchmarks/reference/: RapidNetSim's static_routing run at 241 s finished 1384 jobs;
    each run time (finish - start) is the one the jittered trace draws."""
    path = (Path(__file__).parent.parent / "benchmarks" / "reference"
            / "rapidnetsim_static_routing_241_jobs.csv")
    with path.open(newline="", encoding="utf-8") as fh:
        measured = {int(r["job"]): float(r["finish_s"]) - float(r["start_s"])
                    for r in csv.DictReader(fh) if r["finish_s"]}
    assert len(measured) == 1384
    drawn = rapidnetsim_trace(max(measured) + 1, 241.0, drawn=True)
    own = rapidnetsim_trace(max(measured) + 1, 241.0)
    for j, run_s in measured.items():
        assert drawn[j].compute_s == pytest.approx(run_s, abs=1e-3), j
    assert sum(abs(drawn[j].compute_s - own[j].compute_s) > 1 for j in measured) > 1000
    assert len(load_trace("rapidnetsim-jittered:241", 3, 0.8, 8192, 1)) == 3
