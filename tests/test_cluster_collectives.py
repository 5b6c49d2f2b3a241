"""The cluster simulator runs collectives from the registries (no root): every built-in one,
and a plug-in collective registered from outside the package, whose bytes on every link are
what its own steps say (and which the loopback workers run exactly too)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from collective_helpers import allreduce_counts, inputs

from sdn_app.allocation.cluster import Cluster
from testbed.core.errors import FabricLabError
from testbed.core.registry import ALLTOALLS, COLLECTIVES
from testbed.sim.cluster import ClusterConfig, simulate_cluster
from testbed.sim.job_plans import (
    JobPlan,
    cluster_collective,
    collective_shape,
    host_path,
    job_plan,
    rank_order,
)
from testbed.sim.traces import TraceJob
from workloads.launcher import local_configs

PLUGINS = Path(__file__).parent / "plugins"
REPO = Path(__file__).parent.parent
LINK_BPS = 100e9
GRAD = 64_000_000


@pytest.fixture
def star(monkeypatch):
    """The ``star`` collective of tests/plugins, registered as a plug-in would be."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    COLLECTIVES.register("star", "fl_collective_demo:COLLECTIVE")
    yield COLLECTIVES.get("star")
    COLLECTIVES.unregister("star")


def plan_bytes(plan: JobPlan) -> Counter:
    """Bytes per directed link, one iteration of the plan (weights count sub-flows)."""
    out: Counter = Counter()
    for j, rail in enumerate(plan.rails):
        weights = plan.rail_weights(j) or [1] * len(rail)
        for path, w in zip(rail, weights, strict=True):
            for link in path:
                out[link] += plan.rail_bytes[j] * w
    return out


def steps_bytes(steps, alloc, spines: int) -> Counter:
    """Bytes per directed link straight from a collective's steps and the policy's paths."""
    order = rank_order(alloc)
    out: Counter = Counter()
    for step in steps:
        for a, b, nbytes in step:
            for link in host_path(alloc, order[a], order[b], spines):
                out[link] += nbytes
    return out


def test_a_plug_in_collective_runs_at_cluster_scale_with_its_own_bytes(star) -> None:
    alloc = Cluster(4, 4, 4).allocate("x", 8, "vclos")  # 2 leaves x 4 hosts
    plan = job_plan(alloc, GRAD, LINK_BPS, 4, None, collective="star")
    want = steps_bytes(star.transfers("AR", 8, GRAD), alloc, 4)
    got = plan_bytes(plan)
    assert set(got) == set(want)
    assert all(got[link] == pytest.approx(want[link]) for link in want)
    # the root's links carry n-1 times a leaf's share: star is not bandwidth-optimal
    root = rank_order(alloc)[0]
    assert got[("hd", *root)] == pytest.approx(7 * (GRAD + GRAD / 8))

    # a job of it, alone on the cluster: gather phase then scatter phase, each bound by the
    # root's host link carrying 7 flows of S + S/8
    job = TraceJob("j0", 0.0, 8, "m", iterations=3, compute_s=0.5, grad_bytes=GRAD)
    result = simulate_cluster([job], ClusterConfig(4, 4, 4, "vclos", collective="star"))
    (row,) = result.rows
    comm_s = 2 * 7 * (GRAD + GRAD / 8) * 8 / LINK_BPS
    assert row["run_s"] == pytest.approx(3 * (0.5 + comm_s))
    assert row["slowdown"] == pytest.approx(1.0)


def test_a_plug_in_collective_named_by_a_job_of_a_trace(star) -> None:
    jobs = [TraceJob(f"j{i}", float(i), 8, "m", 2, 0.1, GRAD, collective=c)
            for i, c in enumerate(["star", "ring", "star"])]
    result = simulate_cluster(jobs, ClusterConfig(4, 4, 4, "ecmp", seed=3))
    assert result.summary["jobs_completed"] == 3
    ring, star_job = result.rows[1], result.rows[0]
    assert star_job["isolated_s"] > ring["isolated_s"]  # 2·7·(1+1/8) S against 2·7/8 S


@pytest.mark.parametrize("name", ["ring", "halving-doubling", "direct", "pairwise", "all-pairs"])
def test_every_registered_collective_sends_what_its_steps_say(name: str) -> None:
    """On vClos (deterministic paths) the plan's bytes per link are the steps' own."""
    alloc = Cluster(4, 4, 4).allocate("x", 8, "vclos")
    plan = job_plan(alloc, GRAD, LINK_BPS, 4, None, collective=name)
    steps = (COLLECTIVES.get(name).transfers("AR", 8, GRAD) if name in COLLECTIVES.names()
             else ALLTOALLS.get(name).transfers(8, GRAD))
    want = steps_bytes(steps, alloc, 4)
    got = plan_bytes(plan)
    assert set(got) == set(want)
    assert all(got[link] == pytest.approx(want[link]) for link in want)


def test_steps_merge_into_bundles_in_order_of_first_use() -> None:
    ring = collective_shape("ring", 8)
    assert len(ring.phases) == 1 and ring.phases[0][0].share == Fraction(2 * 7, 8)
    hd = collective_shape("halving-doubling", 8)  # one phase per distance: 4, 2, 1
    assert [p[0].share for p in hd.phases] == [Fraction(2 * d, 8) for d in (4, 2, 1)]
    assert ring.host_share == hd.host_share == Fraction(14, 8)
    pairs = collective_shape("all-pairs", 8)
    assert pairs.phases[0][0].fans_out and pairs.host_share == Fraction(7, 8)


def test_names_old_spellings_and_mistakes() -> None:
    assert cluster_collective("hierarchical") == "rail-ring"
    assert cluster_collective("all-to-all") == "all-pairs"
    with pytest.raises(FabricLabError, match="collective 'nope' is unknown; use one of rail-ring"):
        cluster_collective("nope")
    alloc = Cluster(4, 4, 4).allocate("x", 6, "ecmp")
    with pytest.raises(FabricLabError, match="power-of-two"):
        job_plan(alloc, GRAD, LINK_BPS, 4, None, collective="halving-doubling")


def test_the_cli_runs_a_collective_of_an_installed_distribution(tmp_path: Path) -> None:
    """An entry point makes ``--collective star`` work in ``simulate-cluster``; the old
    ``hierarchical`` still works, with a warning naming what it is now called."""
    dist = tmp_path / "site" / "fl_collective_demo-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fl-collective-demo\n"
                                   "Version: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[fabriclab.collectives]\nstar = fl_collective_demo:COLLECTIVE\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path / "site"), str(PLUGINS), str(REPO)]))
    base = [sys.executable, "-m", "testbed.cli", "simulate-cluster", "--leaves", "4",
            "--spines", "4", "--hosts-per-leaf", "4", "--jobs", "20", "--policy", "vclos"]
    for collective, out in (("star", "a"), ("hierarchical", "b")):
        proc = subprocess.run([*base, "--collective", collective, "--out", str(tmp_path / out)],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert ("now called rail-ring" in proc.stderr) == (collective == "hierarchical")
    proc = subprocess.run([*base, "--collective", "nope", "--out", str(tmp_path / "c")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "collective 'nope' is unknown" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_plug_in_collective_is_exact_on_loopback_workers(tmp_path, star) -> None:
    """The same plug-in runs in real worker threads over zerocopy, every sum exact."""
    counts = [1, 5, 10_007]
    cfgs = local_configs(ranks=4, dims=[4], algorithm="star", sizes=[4], out_dir=tmp_path,
                         transport="zerocopy", timeout=10.0)
    want = [np.sum([inputs(r, c) for r in range(4)], axis=0) for c in counts]
    for rank_out in allreduce_counts(cfgs, counts):
        for w, buf in zip(want, rank_out, strict=True):
            np.testing.assert_array_equal(buf, w)
