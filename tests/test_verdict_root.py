"""The pipeline invariants on a real fabric (root): a run beside busy loops is caught by the
scheduler invariant, a run whose ovs-vswitchd is held to 0.15 of a core by the switch
invariant, each named with its place and time; the busy loops and the quota are this test's
own and are undone when it ends."""

from __future__ import annotations

import json

import pytest

from testbed.core.experiment import expand
from testbed.emulator.runner import Runner
from testbed.emulator.schedstat import switch_pid
from testbed.emulator.stress import busy_loops, cpu_quota

pytestmark = [pytest.mark.root, pytest.mark.slow]


def run(tmp_path, name: str) -> dict:
    (exp,) = expand({
        "name": name,
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "host_link_mbit_s": 50, "uplink_mbit_s": 50},
        "policy": "vclos", "timeout_s": 240,
        "jobs": [{"name": job, "hosts": hosts,
                  "workload": {"kind": "allreduce", "sizes": ["4MiB"], "iterations": 4,
                               "warmup": 1}}
                 for job, hosts in (("a", ["h0", "h2"]), ("b", ["h1", "h3"]))]})
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    return json.loads((run_dir / "fidelity.json").read_text())


def test_busy_loops_beside_the_workers_trip_the_scheduler_invariant(tmp_path):
    with busy_loops(3):
        fid = run(tmp_path, "busy")
    assert fid["verdict"] == "not faithful"
    found = fid["scheduler"]["violations"]
    assert found, fid["reasons"]
    assert {v["job"] for v in found} <= {"a", "b"}
    assert all(v["process"].split()[0] in {"h0", "h1", "h2", "h3"} for v in found)
    assert all(v["end_s"] > v["start_s"] >= 0 and v["worst_wait_share"] > 0.1 for v in found)
    assert any(r.startswith("scheduler invariant: job ") for r in fid["reasons"])


def test_a_switch_held_to_a_fraction_of_a_core_trips_the_switch_invariant(tmp_path):
    pid = switch_pid()
    assert pid is not None
    with open(f"/proc/{pid}/cgroup") as f:
        before = f.read()
    with cpu_quota(pid, 0.15):
        fid = run(tmp_path, "slow-switch")
    with open(f"/proc/{pid}/cgroup") as f:
        assert f.read() == before  # back where it was
    assert fid["verdict"] == "not faithful"
    found = fid["switch"]["violations"]
    assert found and all(v["process"] == "ovs-vswitchd" and v["job"] is None for v in found)
    assert any(r.startswith("switch invariant: ovs-vswitchd") for r in fid["reasons"])

