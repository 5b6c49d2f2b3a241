"""The vClos paper's preset: its jobs, per-job collectives, the preset, paper-against-ours."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from analysis.papers import PaperFigure, figures_for, paper_rows, register_figures
from sdn_app.allocation.cluster import Cluster
from sdn_app.policies import get as get_policy
from testbed.core.errors import FabricLabError
from testbed.sim.cluster_run import resolve_preset, simulate_run
from testbed.sim.job_plans import job_plan, rails_time
from testbed.sim.traces import (
    PAPER_MAX_GPUS,
    paper_size_weights,
    vclos_paper_trace,
)


def test_size_distribution_is_a_distribution_capped_at_512() -> None:
    weights = paper_size_weights()
    assert math.isclose(sum(weights.values()), 1.0)
    assert all(w > 0 for w in weights.values())
    assert max(weights) == PAPER_MAX_GPUS
    assert 16 not in weights and 32 not in weights  # the negative mass, repaired
    assert math.isclose(weights[512], 0.27)  # 512 and every larger TPU-v4 size


def test_trace_is_reproducible_and_its_collectives_fit_the_sizes() -> None:
    jobs = vclos_paper_trace(400, seed=3)
    assert jobs == vclos_paper_trace(400, seed=3)
    assert jobs != vclos_paper_trace(400, seed=4)
    kinds = {j.collective for j in jobs}
    assert kinds == {"ring", "halving-doubling", "all-to-all"}
    for j in jobs:
        if j.collective != "ring":
            assert j.gpus & (j.gpus - 1) == 0
        assert 1000 * (1 - 0.35) <= j.compute_s <= 100000
    gaps = [b.arrival - a.arrival for a, b in itertools.pairwise(jobs)]
    assert 180 < sum(gaps) / len(gaps) < 300  # mean inter-arrival 241 s


def test_preset_shapes_follow_the_policy_and_explicit_values_win() -> None:
    ocs = resolve_preset({"preset": "vclos-paper", "policy": "ocs-vclos"})
    assert (ocs["leaves"], ocs["spines"], ocs["hosts_per_leaf"], ocs["ocs_count"],
            ocs["spine_ports_per_ocs"], ocs["jobs"]) == (256, 128, 32, 32, 2, 5000)
    static = resolve_preset({"preset": "vclos-paper", "policy": "vclos", "jobs": 50})
    assert (static["leaves"], static["spines"], static["hosts_per_leaf"]) == (128, 64, 64)
    assert static["jobs"] == 50 and static["trace"] == "vclos-paper"
    with pytest.raises(FabricLabError, match="--preset 'nope' is unknown"):
        resolve_preset({"preset": "nope"})


def test_an_isolated_job_runs_for_its_drawn_duration() -> None:
    """vClos isolates jobs, so each runs for the duration drawn (a multiple of 100 s)."""
    files = simulate_run({"preset": "vclos-paper", "policy": "vclos", "jobs": 30})
    rows = [r.split(",") for r in files.texts["jobs.csv"].splitlines()]
    col = rows[0].index("run_s")
    for r in rows[1:]:
        run = float(r[col])
        assert abs(run - 100 * round(run / 100)) < 1e-6 * run
    assert files.summary["preset"] == "vclos-paper"


@pytest.mark.parametrize("policy", ["vclos", "ecmp"])
def test_all_to_all_alone_is_bound_by_host_links(policy: str) -> None:
    """All pairs at once: each host link carries n-1 flows of S/n, so S(n-1)/n per link."""
    cluster = Cluster(8, 4, 4, 0)
    alloc = get_policy(policy).allocate(cluster, "a", 16)
    size, link = 1e9, 100e9
    plan = job_plan(alloc, size, link, 4, random.Random(1), collective="all-to-all")
    t = plan.intra_s + rails_time(plan, link)
    assert t >= size * 15 / 16 * 8 / link * (1 - 1e-12)
    if policy == "vclos":
        assert math.isclose(t, size * 15 / 16 * 8 / link)


def test_halving_doubling_alone_takes_the_all_reduce_bytes() -> None:
    cluster = Cluster(4, 4, 4, 0)
    alloc = get_policy("vclos").allocate(cluster, "a", 8)
    plan = job_plan(alloc, 1e9, 100e9, 4, None, collective="halving-doubling")
    assert len(plan.phase_rails) == 3  # distances 4, 2, 1
    assert rails_time(plan, 100e9) >= 2 * 7 / 8 * 1e9 * 8 / 100e9 * (1 - 1e-12)


def test_paper_rows_give_median_min_max_and_gap() -> None:
    runs = [{"policy": p, "seed": s, "avg_wait_s": w, "avg_jct_s": 110.0, "avg_isolated_s": 100.0}
            for p, s, w in [("source-routing", 1, 100.0), ("ocs-vclos", 1, 50.0),
                            ("source-routing", 2, 100.0), ("ocs-vclos", 2, 25.0),
                            ("gpu-count", 1, 80.0)]]
    rows = {r["figure"]: r for r in paper_rows("vclos-paper", runs)}
    wait = rows["average job waiting time, OCS-vClos against RapidNetSim's baseline"]
    assert wait["paper"] == "-66.0%"
    assert wait["ours"] == "-62.5% [-75.0%, -50.0%] (2 seeds)"
    assert wait["gap"] == "+3.5 pt"
    bound = rows["the largest waiting-time cut any placement can make against that baseline"]
    assert bound["ours"] == "-20.0% (1 seed)"
    jct = rows["average JCT of OCS-vClos above the optimum"]
    assert jct["ours"].startswith("+10.0%")
    assert paper_rows("no-such-preset", runs) == []


def test_figures_can_be_registered_for_another_preset() -> None:
    register_figures("test-preset", [PaperFigure("x", 2.0, "s", "here", lambda s: [3.0])])
    assert [f.name for f in figures_for("test-preset")] == ["x"]
    assert paper_rows("test-preset", [])[0]["gap"] == "1 s"
    with pytest.raises(FabricLabError):
        register_figures("", [])
