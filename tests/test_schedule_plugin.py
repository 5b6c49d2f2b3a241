"""A chunk schedule registered from outside the package (tests/plugins/fl_schedule_demo.py:
``reverse``, every chunk the last dimension first) runs in a training job: the job's replay
orders its chunks with the plug-in, the simulator's iterations are that replay's (and not the
baseline's), an entry point makes ``fabriclab run`` find it, and a schedule that cannot order
a replay's chunks is refused in one sentence. The emulator's run: test_schedule_plugin_root.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from testbed.cli import main
from testbed.core.errors import SpecError
from testbed.core.experiment import expand
from testbed.core.formulas import TCP_GOODPUT
from testbed.core.jobs import resolve
from testbed.core.registry import SCHEDULES
from testbed.core.topology import build_plan
from workloads.training.emulated import plan_pass
from workloads.training.jobs import iteration_rows, job_platform, job_workload, replay_job

PLUGINS = Path(__file__).parent / "plugins"
REPO = Path(__file__).parent.parent
PLUGIN = "reverse"
# a fast small dimension and a slow large one: the order decides where the chunk's bytes go
DIMS = [{"size": 2, "mbit_s": 100}, {"size": 4, "mbit_s": 25}]
WORKLOAD = {"kind": "training", "model": "themis-gnmt", "size_scale": 1e-3,
            "compute_scale": 10, "passes": 3, "warmup": 1}


def experiment(algorithm: str, workload: dict | None = None) -> dict:
    return {"name": "sched", "fabric": {"kind": "multidim", "dims": DIMS},
            "jobs": [{"name": "train", "hosts_wanted": 8, "algorithm": algorithm,
                      "chunks": 4, "dim_algorithm": "ring",
                      "workload": workload or WORKLOAD}]}


def resolved(algorithm: str):
    """The experiment's one job, resolved on its fabric."""
    (exp,) = expand(experiment(algorithm))
    plan = build_plan(exp.fabric, exp.rate_scale)
    return resolve(exp.jobs[0], plan, [h.name for h in plan.hosts])


@pytest.fixture
def registered(monkeypatch):
    """The plug-in registered through the registry's API (and its plan-only twin)."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    SCHEDULES.register(PLUGIN, "fl_schedule_demo:SCHEDULE")
    SCHEDULES.register("plan-only", "fl_schedule_demo:PLAN_ONLY")
    yield SCHEDULES.get(PLUGIN)
    SCHEDULES.unregister(PLUGIN)
    SCHEDULES.unregister("plan-only")


@pytest.fixture
def installed_schedule(tmp_path, monkeypatch):
    """The plug-in as pip would install it: a distribution with an entry point, on this
    process's path and its children's (PYTHONPATH)."""
    site = tmp_path / "site"
    dist = site / "fl_schedule_demo-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fl-schedule-demo\n"
                                   "Version: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[fabriclab.schedules]\n{PLUGIN} = fl_schedule_demo:SCHEDULE\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(PLUGINS), str(REPO)]))
    yield


def chunk_orders(algorithm: str) -> set[tuple[tuple[str, int], ...]]:
    """The (op, dim) sequences of every chunk of one pass of the job's replay."""
    job = resolved(algorithm)
    network, system = job_platform(job)
    pass_plan = plan_pass(job_workload(job), network, system)
    return {tuple((p.op, p.dim) for p in chunk) for chunk in pass_plan.chunks}


def sim_times(tmp_path: Path, algorithm: str) -> tuple[list[float], dict]:
    spec = tmp_path / f"{algorithm}.json"
    spec.write_text(json.dumps(experiment(algorithm)))
    out = tmp_path / algorithm
    assert main(["run", str(spec), "--backend", "sim", "--out", str(out), "--no-report"]) == 0
    (run,) = out.iterdir()
    rows = pq.read_table(run / "jobs/train/iterations-rank0.parquet").to_pylist()
    (job,) = json.loads((run / "jobs.json").read_text())
    return [r["time"] for r in rows], job


def test_the_jobs_replay_orders_its_chunks_with_the_plugin(registered):
    job = resolved(PLUGIN)
    _, system = job_platform(job)
    assert system.inter == PLUGIN and system.chunk_schedule() is registered
    # every chunk Reduce-Scatters on the last dimension first, unlike the baseline's
    assert chunk_orders(PLUGIN) == {(("RS", 1), ("AR", 0), ("AG", 1))}
    assert chunk_orders("baseline") == {(("RS", 0), ("AR", 1), ("AG", 0))}


def test_a_plugin_schedule_runs_in_a_training_job_on_the_simulator(tmp_path, registered):
    """``fabriclab run --backend sim``: the job's iterations are the replay's under the plug-in
    (its large phase on the slow dimension: slower than the baseline's)."""
    times, record = sim_times(tmp_path, PLUGIN)
    base, _ = sim_times(tmp_path, "baseline")
    assert record["algorithm"] == PLUGIN and record["status"] == "ok"
    job = resolved(PLUGIN)
    workload = job_workload(job)
    want = replay_job(job, TCP_GOODPUT, 0.0, workload)
    assert times == pytest.approx([r["time"] for r in iteration_rows(want, job, workload)])
    assert len(times) == len(base) == 3 and times[0] == base[0]  # the first pass waits for none
    assert all(t > 1.2 * b for t, b in zip(times[1:], base[1:], strict=True))


def test_an_installed_plugin_schedule_runs_a_training_job(tmp_path, installed_schedule):
    """The entry point alone (no registration in this process) is enough for `fabriclab run`."""
    spec = tmp_path / "installed.json"
    spec.write_text(json.dumps(experiment(PLUGIN)))
    proc = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(spec), "--backend",
                           "sim", "--out", str(tmp_path / "out"), "--no-report"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = (tmp_path / "out").iterdir()
    (job,) = json.loads((run / "jobs.json").read_text())
    assert job["algorithm"] == PLUGIN and job["status"] == "ok"


def test_a_schedule_without_replay_orderer_is_refused_for_training(registered):
    with pytest.raises(SpecError, match="chunk schedule plan-only has no replay_orderer") as err:
        expand(experiment("plan-only"))
    assert "\n" not in str(err.value)
    # an All-Reduce job runs it
    (exp,) = expand(experiment("plan-only", {"kind": "allreduce", "sizes": ["64KiB"]}))
    assert exp.jobs[0].algorithm == "plan-only"
