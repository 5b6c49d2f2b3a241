"""The pipeline invariants on a real fabric (root), each named with its place and time: a
worker held to 0.01 of a core (10 ms a second) by the scheduler invariant, ovs-vswitchd held
to 0.15 of a core by the switch invariant; and busy loops beside the run, which do not hold
its jobs back. The busy loops and the quotas are this test's own and are undone when it
ends."""

from __future__ import annotations

import json
import threading

import pytest

from testbed.core.experiment import expand
from testbed.emulator.runner import Runner
from testbed.emulator.schedstat import REALTIME, SchedSampler, switch_pid, switch_sched
from testbed.emulator.stress import busy_loops, connected, cpu_quota

CORES = 0.01  # the worker's quota, in every
PERIOD_US = 1_000_000  # second: held back ~1 s at a time, longer than its queued data lasts

pytestmark = [pytest.mark.root, pytest.mark.slow]


def run(tmp_path, name: str, mbit_s: float = 50, size: str = "4MiB") -> dict:
    (exp,) = expand({
        "name": name,
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "host_link_mbit_s": mbit_s, "uplink_mbit_s": mbit_s},
        "policy": "vclos", "timeout_s": 240,
        "jobs": [{"name": job, "hosts": hosts,
                  "workload": {"kind": "allreduce", "sizes": [size], "iterations": 4,
                               "warmup": 1}}
                 for job, hosts in (("a", ["h0", "h2"]), ("b", ["h1", "h3"]))]})
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    return json.loads((run_dir / "fidelity.json").read_text())



def test_busy_loops_beside_the_run_are_never_missed_by_the_verdict(tmp_path):
    """Three busy loops at nice -10 beside the run: what they cost varies (2026-11-27: jobs at
    0.98-0.99 of their links in 4 runs by hand, 0.69-0.71 in one CI run, each job named by
    the job invariant), so what is asserted is that the verdict never misses it: a job short
    of 90 % of its links makes the run not faithful and is named; a faithful run had every
    job at 90 % or more and its switch never waited too long. Starving a worker or the switch
    for certain is what the quota tests below do."""
    assert (switch_sched(switch_pid()) or "").startswith(tuple(REALTIME.values()))
    with busy_loops(3, nice=-10):
        fid = run(tmp_path, "busy", 100, "8MiB")
    ratios = {j["job"]: min(s["ratio"] for s in j["sizes"]) for j in fid["job"]["jobs"]}
    assert set(ratios) == {"a", "b"}, fid["job"]
    short = sorted(job for job, r in ratios.items() if r < 0.9)
    for job in short:
        assert any(r.startswith(f"job invariant: job {job} reached") for r in fid["reasons"])
    if fid["verdict"] == "faithful":
        assert not short and not fid["reasons"] and not fid["switch"]["violations"]
    else:
        assert fid["reasons"], fid
    for v in fid["scheduler"]["violations"] + fid["switch"]["violations"]:
        assert v["end_s"] > v["start_s"] >= 0 and v["worst_wait_share"] > 0.1


def test_a_worker_held_to_a_fraction_of_a_core_trips_the_scheduler_invariant(tmp_path,
                                                                            monkeypatch):
    """Job a's rank 0 (h0) is held to a sliver of a core by a CPU quota once it has connected:
    the scheduler invariant names that worker, and does not excuse it, as its job's links ran
    short: 4 runs on 2026-11-27 waited 67-100 % of a stretch, links at 0.36-0.46. (Held to
    0.02 of every 0.1 s instead, it once waited 30 % while the data it had queued kept its
    links at 0.96 of their rate: excused, and rightly; the job reached 0.96 of its links.)"""
    spawned: list[int] = []
    watch = SchedSampler.watch

    def noted(self, pid: int, job: str, process: str) -> None:
        watch(self, pid, job, process)
        if job == "a" and process.startswith("h0 "):
            spawned.append(pid)

    monkeypatch.setattr(SchedSampler, "watch", noted)
    done = threading.Event()

    def hold() -> None:  # from its first connection to its peer (it has started)
        while not done.wait(0.01):
            if spawned and connected(spawned[0]):
                with cpu_quota(spawned[0], CORES, PERIOD_US):
                    done.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        fid = run(tmp_path, "slow-worker", 100, "8MiB")
    finally:
        done.set()
        holder.join()
    assert spawned, "job a's rank 0 was never started"
    assert fid["verdict"] == "not faithful"
    found = fid["scheduler"]["violations"]
    mine = [v for v in found if v["job"] == "a" and v["process"].startswith("h0 ")]
    assert mine, fid["reasons"]
    assert all(v["links_ratio"] is not None and v["links_ratio"] < 0.9 for v in mine), mine
    assert any(r.startswith("scheduler invariant: job a's worker h0") for r in fid["reasons"])


def test_a_switch_held_to_a_fraction_of_a_core_trips_the_switch_invariant(tmp_path):
    pid = switch_pid()
    assert pid is not None
    with open(f"/proc/{pid}/cgroup") as f:
        before = f.read()
    sched = switch_sched(pid)
    with cpu_quota(pid, 0.15):
        fid = run(tmp_path, "slow-switch")
    with open(f"/proc/{pid}/cgroup") as f:
        assert f.read() == before  # back where it was
    assert switch_sched(pid) == sched  # real-time again, if it was
    assert fid["verdict"] == "not faithful"
    found = fid["switch"]["violations"]
    assert found and all(v["process"] == "ovs-vswitchd" and v["job"] is None for v in found)
    assert any(r.startswith("switch invariant: ovs-vswitchd") for r in fid["reasons"])



def test_a_quota_holds_a_real_time_thread_as_a_normal_one_and_gives_its_policy_back():
    """A CPU quota binds only normal threads: while it holds, a real-time thread of the process
    (ovs-vswitchd's forwarding thread, as scripts/start-ovs.sh sets it) runs as a normal one,
    and after, real-time again. On a sleep this test starts."""
    import os
    import subprocess

    child = subprocess.Popen(["sleep", "30"])
    try:
        os.sched_setscheduler(child.pid, os.SCHED_RR, os.sched_param(1))
        assert switch_sched(child.pid) == "SCHED_RR 1"
        with cpu_quota(child.pid, 0.5):
            assert switch_sched(child.pid).startswith("SCHED_OTHER nice ")
        assert switch_sched(child.pid) == "SCHED_RR 1"
    finally:
        child.kill()
        child.wait()


SPAWNER = ("import sys, threading, time\n"
           "for line in sys.stdin:\n"
           "    t = threading.Thread(target=time.sleep, args=(30,), daemon=True)\n"
           "    t.start()\n"
           "    print(t.native_id, flush=True)\n")


def test_threads_a_real_time_main_thread_makes_start_normal_with_reset_on_fork():
    """As scripts/start-ovs.sh sets ovs-vswitchd's main thread (real-time, reset-on-fork), the
    threads it makes later (Open vSwitch makes its revalidators and handlers anew with every
    bridge) start on the normal policy; without the flag they would inherit real-time, and
    :func:`realtime_helpers` names them. On a Python process this test starts."""
    import os
    import subprocess
    import sys

    from testbed.emulator.schedstat import policy_of, realtime_helpers

    child = subprocess.Popen([sys.executable, "-c", SPAWNER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)

    def spawn() -> int:
        child.stdin.write("go\n")
        child.stdin.flush()
        return int(child.stdout.readline())

    try:
        os.sched_setscheduler(child.pid, os.SCHED_RR | os.SCHED_RESET_ON_FORK,
                              os.sched_param(1))
        assert switch_sched(child.pid) == "SCHED_RR 1"  # the flag does not hide the policy
        helper = spawn()
        assert policy_of(helper) == os.SCHED_OTHER and realtime_helpers(child.pid) == []
        os.sched_setscheduler(child.pid, os.SCHED_RR, os.sched_param(1))  # without the flag
        inherited = spawn()
        assert policy_of(inherited) in REALTIME
        (named,) = realtime_helpers(child.pid)
        assert named.endswith(f" ({inherited})")
        with cpu_quota(child.pid, 0.5):  # held as normal threads, given back with the flag
            assert policy_of(child.pid) == os.SCHED_OTHER
        assert switch_sched(child.pid) == "SCHED_RR 1"
    finally:
        child.kill()
        child.wait()
