"""The workers' latency per step, measured on a real fabric before the jobs (root): what the
run records, and the model and the prediction adding it."""

from __future__ import annotations

import json

import pytest

from testbed.core.experiment import expand
from testbed.core.jobs import resolve
from testbed.core.topology import build_plan
from testbed.emulator.runner import Runner
from workloads.flat_model import flat_allreduce_s

pytestmark = [pytest.mark.root, pytest.mark.slow]

HOSTS = ["h0", "h1", "h2", "h3"]
SPEC = {"name": "alpha", "policy": "ecmp", "measure_step_latency": True,
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
                   "host_link_mbit_s": 50, "uplink_mbit_s": 50},
        "jobs": [{"name": "a", "hosts": HOSTS, "algorithm": "ring",
                  "workload": {"kind": "allreduce", "sizes": ["4KiB"], "iterations": 3}}]}


def test_a_run_measures_the_latency_per_step_and_its_prediction_adds_it(tmp_path):
    (exp,) = expand(SPEC)
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    fid = json.loads((run_dir / "fidelity.json").read_text())
    measured = fid["step_latency"]
    # Python workers through Open vSwitch take more than the model's microseconds a step
    latency_s = measured["step_latency_s"]
    assert measured["per_job_s"] == {"a": latency_s} and 0 < latency_s < 1.0, measured
    # the probe ran apart from the jobs: its traces are not a job's
    assert (run_dir / "step-latency" / "a-step-latency").is_dir()
    assert sorted(p.name for p in (run_dir / "jobs").iterdir()) == ["a"]
    (job,) = json.loads((run_dir / "jobs.json").read_text())
    plan = build_plan(exp.fabric, exp.rate_scale)
    ring = resolve(exp.jobs[0], plan, HOSTS).plugin("ring")
    assert job["model_s"]["4096"] == pytest.approx(
        flat_allreduce_s(plan, HOSTS, ring, 4096, latency_s))
    (replay,) = (run_dir / "prediction").glob("*/env.json")
    assert json.loads(replay.read_text())["sim"]["step_latency_s"] == latency_s


def test_a_themis_job_is_measured_against_the_simulator(tmp_path):
    """Themis on a leaf-spine has no α-β model: its probe's latency is the one at which the
    simulator's time for the probe is the measured one; the simulator's two runs are kept,
    and the prediction adds the figure."""
    spec = {**SPEC, "jobs": [{**SPEC["jobs"][0], "algorithm": "themis", "order": "scf",
                              "dims": [2, 2], "chunks": 2}]}
    (exp,) = expand(spec)
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    measured = json.loads((run_dir / "fidelity.json").read_text())["step_latency"]
    latency_s = measured["step_latency_s"]
    assert measured["against"] == {"a": "simulator"} and 0 < latency_s < 1.0, measured
    sims = run_dir / "step-latency" / "a-step-latency-sim"
    assert sorted(p.name for p in sims.iterdir()) == ["0us", "1000us"]
    (replay,) = (run_dir / "prediction").glob("*/env.json")
    assert json.loads(replay.read_text())["sim"]["step_latency_s"] == latency_s
