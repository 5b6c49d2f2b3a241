"""The experiment runner end to end on real fabrics (root): run directory, summary, report,
and a worker killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pandas as pd
import pytest

from analysis.report import write_report
from testbed.core.experiment import expand
from testbed.emulator import cleanup, procs
from testbed.emulator.runner import Runner

pytestmark = [pytest.mark.root, pytest.mark.slow]

SPEC = {
    "name": "e2e",
    "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
               "host_link_mbit_s": 50, "uplink_mbit_s": 50},
    "policy": "vclos",
    "solo_baselines": True,
    "jobs": [
        {"name": "a", "hosts": ["h0", "h2"],
         "workload": {"kind": "allreduce", "sizes": ["256KiB"], "iterations": 2}},
        {"name": "b", "hosts_wanted": 2, "transport": "rpc",
         "workload": {"kind": "allreduce", "sizes": ["256KiB"], "iterations": 2}},
    ],
}


def test_runner_end_to_end(tmp_path):
    (exp,) = expand(SPEC)
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    for name in ("spec.yaml", "env.json", "topology.json", "controller.log", "jobs.json",
                 "link_samples.parquet", "cpu_samples.parquet", "sched_samples.parquet",
                 "fidelity.json", "summary.json"):
        assert (run_dir / name).exists(), name
    jobs = {j["name"]: j for j in json.loads((run_dir / "jobs.json").read_text())}
    assert set(jobs) == {"a", "b", "a-solo", "b-solo"}
    assert jobs["a-solo"]["solo_of"] == "a" and all(j["status"] == "ok" for j in jobs.values())
    assert len(jobs["a"]["spines"]) == 1  # vClos pinned the cross-leaf pair to one spine
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok"
    a = summary["jobs"]["a"]
    assert a["correct"] and a["busbw_gbit_s"] > 0 and a["slowdown"] is not None
    assert summary["fidelity"]["verdict"] in ("faithful", "not faithful")
    fidelity = json.loads((run_dir / "fidelity.json").read_text())
    assert fidelity["links"] and fidelity["cpu_idle_min"] is not None
    # every worker (solo runs included) and ovs-vswitchd had their CPU wait sampled
    sched = pd.read_parquet(run_dir / "sched_samples.parquet")
    assert set(sched["job"]) == {"a", "b", "a-solo", "b-solo", ""}
    assert fidelity["scheduler"]["judged"] and fidelity["switch"]["judged"]
    assert {j["job"] for j in fidelity["job"]["jobs"]} == set(jobs)
    report = write_report([run_dir], run_dir)
    html = report.read_text()
    assert "Summary" in html and "Fidelity" in html
    assert not cleanup.stale_states() and not list(cleanup.STATE_DIR.glob("*.json"))


def cmdline(pid: str) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def test_worker_killed_mid_run_fails_cleanly(tmp_path):
    spec = dict(SPEC, solo_baselines=False, jobs=[
        {"name": "long", "hosts": ["h0", "h2"],
         "workload": {"kind": "allreduce", "sizes": ["4MiB"], "iterations": 200}}])
    (exp,) = expand(spec)
    runner = Runner(exp, tmp_path)
    thread = threading.Thread(target=runner.run)
    thread.start()
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline:
        # only among the processes the run recorded as its own
        for state in cleanup.load_states()[0]:
            for proc in state.processes():
                cmd = cmdline(str(proc.pid))
                if b"workloads.worker" in cmd and any(b"config-rank1.json" in c for c in cmd):
                    victim = proc
        time.sleep(0.5)
    assert victim, "the worker never started"
    time.sleep(2)
    assert procs.send(victim, signal.SIGKILL)
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert runner.status == "failed" and "rank" in runner.error
    assert "\n" not in runner.error
    run_dir = runner.run_dir
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert (run_dir / "link_samples.parquet").exists()  # what was captured is kept
    assert json.loads((run_dir / "fidelity.json").read_text())["verdict"] == "not faithful"
    assert not list(cleanup.STATE_DIR.glob("*.json"))  # nothing of the run is left
    assert not any(b"workloads.worker" in cmdline(p)
                   for p in filter(str.isdigit, os.listdir("/proc")))


def test_runner_halving_doubling_flat_and_per_dimension(tmp_path):
    """The spec's algorithm and dim_algorithm reach the workers on a real fabric."""
    spec = {
        "name": "hd", "policy": "ecmp",
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 4,
                   "host_link_mbit_s": 50, "uplink_mbit_s": 50},
        "jobs": [
            {"name": "flat", "hosts": ["h0", "h1", "h4", "h5"], "algorithm": "halving-doubling",
             "workload": {"kind": "allreduce", "sizes": ["256KiB"], "iterations": 2}},
            {"name": "dims", "hosts": ["h2", "h3", "h6", "h7"], "algorithm": "themis",
             "dim_algorithm": "halving-doubling", "dims": [2, 2], "chunks": 3,
             "workload": {"kind": "allreduce", "sizes": ["256KiB"], "iterations": 2}},
        ],
    }
    (exp,) = expand(spec)
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    jobs = {j["name"]: j for j in json.loads((run_dir / "jobs.json").read_text())}
    assert jobs["dims"]["dim_algorithm"] == "halving-doubling"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["jobs"]["flat"]["correct"] and summary["jobs"]["dims"]["correct"]
    assert not cleanup.stale_states()


def test_runner_dnn_job(tmp_path):
    """A DNN job's iterations reach the workers (as the DNN workload's own, with no size
    workload) and every bucket's All-Reduce is exact, on a real fabric."""
    spec = {
        "name": "dnn", "policy": "ecmp",
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "host_link_mbit_s": 50, "uplink_mbit_s": 50},
        "jobs": [{"name": "r", "hosts_wanted": 4,
                  "workload": {"kind": "dnn", "model": "resnet50", "scale": 0.001,
                               "compute_scale": 0.01, "iterations": 2, "warmup": 1}}],
    }
    (exp,) = expand(spec)
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    cfg = json.loads((run_dir / "jobs" / "r" / "config-rank0.json").read_text())
    work = cfg["job"]["workload"]  # the resolved job the run recorded, as the worker got it
    assert work["kind"] == "dnn" and (work["iterations"], work["warmup"]) == (2, 1)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["jobs"]["r"]["correct"] and summary["jobs"]["r"]["mean_s"] > 0
