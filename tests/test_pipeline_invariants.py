"""The pipeline invariants (analysis.sched_invariant, analysis.job_invariant) and how the
verdict combines them (testbed.emulator.fidelity.pipeline_record), on made-up samples."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import invariants, job_invariant, sched_invariant
from testbed.core.formulas import TCP_GOODPUT
from testbed.core.registry import POLICIES
from testbed.core.topology import LeafSpineSpec, build_plan
from testbed.emulator.fidelity import pipeline_record
from testbed.emulator.schedstat import (
    DISCOVER_ROUNDS,
    SchedSampler,
    children,
    read_threads,
    switch_pid,
    switch_sched,
)

HZ = 20.0
PLUGINS = Path(__file__).parent / "plugins"


def thread(shares: list[float], *, job: str = "j0", process: str = "h0 rank0", pid: int = 10,
           tid: int = 10, t0: float = 100.0) -> pd.DataFrame:
    """Samples at 20 Hz of one thread waiting ``shares[k]`` of the time in sample interval k."""
    t = t0 + np.arange(len(shares) + 1) / HZ
    wait = np.concatenate([[0.0], np.cumsum(np.array(shares) / HZ)])
    return pd.DataFrame({"time": t, "job": job, "process": process, "pid": pid, "tid": tid,
                         "thread": "python3", "run_s": 0.0, "wait_s": wait})


def test_stretches_hold_the_stretch_length_and_a_short_rest_joins_the_last():
    spans = [(0.0, 1.5), (2.0, 3.0), (4.0, 5.5), (6.0, 7.0)]
    assert sched_invariant.stretches(spans, 2.0) == [[0, 1], [2, 3]]
    assert sched_invariant.stretches([*spans, (8.0, 8.5)], 2.0) == [[0, 1], [2, 3, 4]]
    assert sched_invariant.stretches([(0.0, 1.0)], 2.0) == [[0]]  # less than one stretch


def test_a_worker_that_rarely_waits_is_no_violation():
    found, judged_s = sched_invariant.judge(thread([0.05] * 40), {"j0": [(100.0, 102.0)]})
    assert found.empty
    assert judged_s == pytest.approx(2.0)


def test_a_worker_waiting_while_its_job_communicates_is_located():
    shares = [0.02] * 40 + [0.6] * 80 + [0.02] * 40  # 8 s: 2 quiet, 4 waiting, 2 quiet
    found, _ = sched_invariant.judge(thread(shares), {"j0": [(100.0, 108.0)]})
    (v,) = found.itertuples()
    assert (v.job, v.process, v.pid, v.tid) == ("j0", "h0 rank0", 10, 10)
    assert (v.start, v.end) == pytest.approx((102.0, 106.0))  # two stretches, merged
    assert (v.worst_share, v.wait_s, v.comm_s) == pytest.approx((0.6, 2.4, 4.0))


def test_waiting_between_collectives_costs_the_job_nothing():
    """A worker busy-waiting for a CPU in the gaps between its collectives (as quiet workers
    do while they write their records) waited 45% of the wall time, none of it while it
    communicated: no violation, where half-second stretches of wall time called it one."""
    shares = ([0.0] * 5 + [0.9] * 5) * 16  # 8 s; collectives in the first quarter-second of each
    windows = [(100.0 + k / 2, 100.0 + k / 2 + 0.25) for k in range(16)]
    found, judged_s = sched_invariant.judge(thread(shares), {"j0": windows})
    assert found.empty and judged_s == pytest.approx(4.0)


def test_the_thread_that_waited_most_judges_its_process():
    a = thread([0.06] * 40)
    b = thread([0.3] * 40, tid=11)
    b["thread"] = "sender"
    found, _ = sched_invariant.judge(pd.concat([a, b]), {"j0": [(100.0, 102.0)]})
    (v,) = found.itertuples()
    assert v.worst_share == pytest.approx(0.3) and (v.tid, v.thread) == (11, "sender")
    found, _ = sched_invariant.judge(pd.concat([a, thread([0.07] * 40, tid=11)]),
                                     {"j0": [(100.0, 102.0)]})
    assert found.empty  # 6% and 7%: neither thread over 10%


def test_waiting_outside_the_jobs_collectives_is_not_judged():
    found, judged_s = sched_invariant.judge(thread([0.9] * 40), {"j0": [(105.0, 106.0)],
                                                                 "j1": [(100.0, 102.0)]})
    assert found.empty and judged_s == 0.0


def test_the_switch_is_judged_while_any_job_communicates():
    s = thread([0.8] * 20, job=sched_invariant.SWITCH_JOB, process="ovs-vswitchd")
    found, _ = sched_invariant.judge(s, {"j1": [(100.0, 100.6)], "j2": [(100.4, 101.0)]})
    assert list(found["process"]) == ["ovs-vswitchd"]
    assert found["comm_s"].iloc[0] == pytest.approx(1.0)  # overlapping collectives once


def links_at(ratios: dict[tuple[float, float], float]):
    """A ``links`` callable: the slowest host link's ratio per stretch, keyed by its
    (start, end); 1.0 elsewhere."""
    return lambda job, spans: ratios.get((spans[0][0], spans[-1][1]), 1.0)


WAITS = [0.02] * 40 + [0.6] * 40 + [0.02] * 80  # 8 s: the worker waits in 102-104 s only


def test_a_wait_its_links_did_not_feel_is_excused_and_kept():
    found, _ = sched_invariant.judge(thread(WAITS), {"j0": [(100.0, 108.0)]},
                                     links=links_at({(102.0, 104.0): 0.96}))
    (v,) = found.itertuples()
    assert v.excused and v.links_ratio == pytest.approx(0.96)
    assert (v.start, v.end, v.worst_share) == pytest.approx((102.0, 104.0, 0.6))


def test_a_wait_whose_cost_lands_in_the_next_stretch_is_not_excused():
    """The queue kept the links busy while the worker waited, then ran dry after: the next
    stretch's links show the cost, so the wait is a violation."""
    found, _ = sched_invariant.judge(thread(WAITS), {"j0": [(100.0, 108.0)]},
                                     links=links_at({(104.0, 106.0): 0.7}))
    (v,) = found.itertuples()
    assert not v.excused and v.links_ratio == pytest.approx(0.7)


def test_a_wait_while_its_links_fell_short_is_not_excused():
    found, _ = sched_invariant.judge(thread(WAITS), {"j0": [(100.0, 108.0)]},
                                     links=links_at({(102.0, 104.0): 0.89}))
    assert not found["excused"].any()
    found, _ = sched_invariant.judge(thread(WAITS), {"j0": [(100.0, 108.0)]},
                                     links=lambda job, spans: None)  # links not sampled
    assert not found["excused"].any() and found["links_ratio"].isna().all()


def test_the_switch_is_never_excused():
    s = thread(WAITS, job=sched_invariant.SWITCH_JOB, process="ovs-vswitchd")
    found, _ = sched_invariant.judge(s, {"j0": [(100.0, 108.0)]}, links=links_at({}))
    (v,) = found.itertuples()
    assert not v.excused and v.process == "ovs-vswitchd"


def qdisc(rates: dict[tuple[str, str], float], cap_mbit_s: float = 50.0,
          t0: float = 100.0, seconds: float = 4.0, hz: float = 50.0) -> pd.DataFrame:
    """qdisc samples of links sending at ``rates[(src, dst)]`` of ``cap_mbit_s`` throughout."""
    t = t0 + np.arange(int(seconds * hz) + 1) / hz
    return pd.concat([pd.DataFrame({
        "time": t, "link": f"{min(a, b)}-{max(a, b)}", "src": a, "dst": b,
        "capacity_mbit_s": cap_mbit_s, "backlog_bytes": 0, "drops": 0,
        "sent_bytes": (r * cap_mbit_s * 1e6 / 8 * (t - t0)).astype(int)})
        for (a, b), r in rates.items()])


def test_a_links_ratio_is_what_it_sent_over_the_spans():
    q = qdisc({("h0", "leaf0"): 1.0, ("leaf0", "h0"): 0.5, ("h2", "leaf1"): 1.0,
               ("leaf1", "h2"): 1.0, ("leaf0", "spine0"): 0.1})
    assert invariants.sent_ratio(q[q["src"] == "h0"], [(100.5, 101.5), (102.0, 103.0)]) \
        == pytest.approx(1.0, abs=1e-4)
    assert invariants.slowest_host_link(q, ["h0", "h2"], [(101.0, 103.0)]) \
        == pytest.approx(0.5, abs=1e-4)  # h0's way in; the uplink is not a host's
    assert invariants.slowest_host_link(q, ["h2"], [(101.0, 103.0)]) == pytest.approx(1.0,
                                                                                     abs=1e-4)
    assert invariants.slowest_host_link(q, ["h2"], [(110.0, 112.0)]) is None  # not sampled
    assert invariants.slowest_host_link(q, ["h9"], [(101.0, 103.0)]) is None  # no such link


def test_the_verdict_excuses_a_wait_its_job_s_links_did_not_feel(leaf_spine):
    sched = thread([0.5] * 40, job="a")
    full = {("h0", "leaf0"): 1.0, ("leaf0", "h0"): 1.0, ("h2", "leaf1"): 1.0,
            ("leaf1", "h2"): 1.0}
    args = (sched, {"a": [(100.0, 102.0)]}, [job_rec(0.95 * goodput_gbyte_s(40))],
            leaf_spine, "ovs", lambda a, b: "")
    rec = pipeline_record(*args, qdisc(full))
    assert rec["reasons"] == [] and rec["scheduler"]["violations"] == []
    (e,) = rec["scheduler"]["excused"]
    assert e["process"] == "h0 rank0" and e["links_ratio"] == pytest.approx(1.0, abs=1e-3)
    assert e["excused_by"] == "links"
    # An ECMP job: the job invariant cannot judge it, so only its links could excuse it.
    ecmp = (sched, args[1], [job_rec(0.95 * goodput_gbyte_s(40), policy="ecmp")], *args[3:])
    rec = pipeline_record(*ecmp, qdisc(full | {("h2", "leaf1"): 0.8}))
    assert rec["scheduler"]["excused"] == []
    assert rec["reasons"][0].startswith("scheduler invariant: job a's worker h0 rank0")
    assert "; its job's host links ran at 80% of their rate then" in rec["reasons"][0]
    assert rec["scheduler"]["violations"][0]["links_ratio"] == pytest.approx(0.8, abs=1e-3)
    rec = pipeline_record(*ecmp)  # no qdisc samples: nothing can excuse it
    assert rec["reasons"][0].startswith("scheduler invariant: ")


def test_the_verdict_excuses_a_wait_whose_job_still_reached_its_links(leaf_spine):
    sched = thread([0.5] * 40, job="a")
    slow_link = qdisc({("h0", "leaf0"): 1.0, ("h2", "leaf1"): 0.8})
    args = (sched, {"a": [(100.0, 102.0)]})
    rec = pipeline_record(*args, [job_rec(0.93 * goodput_gbyte_s(40))], leaf_spine, "ovs",
                          lambda a, b: "", slow_link)
    assert rec["reasons"] == [] and rec["scheduler"]["violations"] == []
    (e,) = rec["scheduler"]["excused"]
    assert e["excused_by"] == "job" and e["job_ratio"] == pytest.approx(0.93)
    assert e["links_ratio"] == pytest.approx(0.8, abs=1e-3)
    # Below the job invariant's tolerance: both invariants name it.
    rec = pipeline_record(*args, [job_rec(0.85 * goodput_gbyte_s(40))], leaf_spine, "ovs",
                          lambda a, b: "", slow_link)
    assert rec["scheduler"]["excused"] == []
    assert [r.split(":")[0] for r in rec["reasons"]] == ["scheduler invariant",
                                                         "job invariant"]


def test_overlap_counts_overlapping_windows_once():
    assert sched_invariant.merged([(8, 20), (1, 4), (2, 5)]) == [(1, 5), (8, 20)]


@pytest.fixture
def leaf_spine():
    return build_plan(LeafSpineSpec.model_validate(
        {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
         "host_link_mbit_s": 50, "uplink_mbit_s": 40}))


def job_rec(busbw_gbyte_s: float, policy: str | None = "vclos", **extra) -> dict:
    return {"name": "a", "status": "ok", "policy": policy, "hosts": ["h0", "h2"], "dims": [2],
            "workload": {"kind": "allreduce"}, "model_s": None,
            "results": [{"size": 8 << 20, "time_us": 1e6, "busbw": busbw_gbyte_s,
                         "in_place": True}]} | extra


def goodput_gbyte_s(mbit_s: float) -> float:
    return mbit_s * TCP_GOODPUT * 1e6 / 8 / 1e9


def test_a_job_across_leaves_is_held_to_its_slowest_link(leaf_spine):
    assert job_invariant.path_rate_mbit_s(leaf_spine, ["h0", "h2"]) == 40  # the uplinks
    assert job_invariant.path_rate_mbit_s(leaf_spine, ["h0", "h1"]) == 50  # one leaf
    (ok,) = job_invariant.judge([job_rec(0.95 * goodput_gbyte_s(40))], leaf_spine)
    assert ok["judged"] and not ok["violated"]
    assert ok["sizes"][0]["ratio"] == pytest.approx(0.95)
    (slow,) = job_invariant.judge([job_rec(0.7 * goodput_gbyte_s(40))], leaf_spine)
    assert slow["violated"]


def test_ecmp_jobs_are_not_judged_and_say_why(leaf_spine):
    (v,) = job_invariant.judge([job_rec(0.01, policy="ecmp")], leaf_spine)
    assert not v["judged"] and not v["violated"] and "ecmp" in v["why_not"]


def test_an_isolating_policy_from_outside_is_judged_with_no_other_edit(leaf_spine, monkeypatch):
    """tests/plugins/fl_isolating_demo.py says it isolates jobs, and that is all it takes."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    POLICIES.register("spine-per-job", "fl_isolating_demo:POLICY")
    try:
        (ok,) = job_invariant.judge([job_rec(0.95 * goodput_gbyte_s(40),
                                             policy="spine-per-job")], leaf_spine)
        assert ok["judged"] and not ok["violated"]
        (slow,) = job_invariant.judge([job_rec(0.7 * goodput_gbyte_s(40),
                                               policy="spine-per-job")], leaf_spine)
        assert slow["judged"] and slow["violated"]
    finally:
        POLICIES.unregister("spine-per-job")


def test_each_policy_says_whether_it_isolates_jobs(leaf_spine):
    isolating = {name for name, policy in POLICIES.items() if policy.isolates_jobs}
    assert isolating == {"vclos", "ocs-vclos", "gpu-count"}
    (v,) = job_invariant.judge([job_rec(0.01, policy="not-registered-here")], leaf_spine)
    assert not v["judged"]


def test_the_model_time_judges_a_multidim_job(leaf_spine):
    (v,) = job_invariant.judge([job_rec(0.0, policy="static",
                                        model_s={str(8 << 20): 0.5})], leaf_spine)
    assert v["sizes"][0]["ratio"] == pytest.approx(0.5) and v["violated"]


def test_the_verdict_names_the_invariant_the_place_and_the_time(leaf_spine):
    switch = thread([0.0] * 20, job="", process="ovs-vswitchd", pid=5, tid=6)
    sched = pd.concat([thread([0.5] * 20, job="a"), switch])
    rec = pipeline_record(sched, {"a": [(100.0, 101.0)]}, [job_rec(0.5 * goodput_gbyte_s(40))],
                          leaf_spine, "ovs", lambda a, b: "; busiest then: spin (2.0 CPU-s)")
    sched_reason, job_reason = rec["reasons"]
    assert sched_reason.startswith("scheduler invariant: job a's worker h0 rank0 (pid 10")
    assert "50% of the time its job communicated at 0.0–1.0 s" in sched_reason
    assert sched_reason.endswith("busiest then: spin (2.0 CPU-s)")
    assert job_reason.startswith("job invariant: job a reached 50%")
    assert "(All-Reduce of 8MiB)" in job_reason and "TCP" not in job_reason  # not read
    rec = pipeline_record(sched, {"a": [(100.0, 101.0)]},
                          [job_rec(0.5 * goodput_gbyte_s(40), tcp_timeouts=3)], leaf_spine,
                          "ovs", lambda a, b: "")
    assert rec["reasons"][1].endswith("; its hosts' TCP counted 3 retransmission timeouts "
                                      "while it ran (each stalls a flow 200 ms or more)")
    assert rec["job"]["jobs"][0]["tcp_timeouts"] == 3
    assert rec["switch"]["judged"] and rec["switch"]["violations"] == []
    assert rec["scheduler"]["violations"][0]["thread"] == "python3"


def test_no_sched_samples_judge_nothing(leaf_spine):
    rec = pipeline_record(None, {}, [], leaf_spine, "ovs", lambda a, b: "")
    assert rec["reasons"] == [] and not rec["scheduler"]["judged"]
    assert not rec["switch"]["judged"]


def test_the_sampler_reads_its_own_threads():
    mine = read_threads(os.getpid())
    assert any(tid == os.getpid() for tid, *_ in mine)
    assert all(wait_ns >= 0 and run_ns >= 0 for _, _, run_ns, wait_ns, _ in mine)
    assert {state for *_, state in mine} <= set("RSDTtXZPI")
    assert dict((tid, state) for tid, *_, state in mine)[os.getpid()] == "R"  # reading now
    assert read_threads(2**22 + 1) == []  # beyond pid_max: no such process
    with SchedSampler(hz=100, switch=False) as s:
        s.watch(os.getpid(), "j", "me")
        while s.rounds < 3:
            time.sleep(0.01)
    df = s.samples()
    assert set(df["process"]) == {"me"}
    assert df["state"].str.len().eq(1).all()
    assert (df.groupby("tid")["wait_s"].diff().dropna() >= 0).all()


def test_switch_pid_needs_a_live_ovs_vswitchd(tmp_path):
    f = tmp_path / "ovs-vswitchd.pid"
    f.write_text(f"{os.getpid()}\n")  # alive, but not ovs-vswitchd
    assert switch_pid(f) is None
    assert switch_pid(tmp_path / "missing.pid") is None


def test_the_sampler_adopts_a_watched_processs_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in children(os.getpid())
        with SchedSampler(hz=100, switch=False) as s:
            s.watch(os.getpid(), "j", "me")
            while s.rounds < DISCOVER_ROUNDS + 3:
                time.sleep(0.01)
        assert child.pid in set(s.samples()["pid"])
    finally:
        child.kill()
        child.wait()


def test_only_the_switchs_forwarding_threads_are_judged():
    """ovs-vswitchd's main thread (TID = PID) forwards on the userspace datapath, as do pmd
    threads; a revalidator waiting 50% of the collectives holds no packet back."""
    main = thread([0.05] * 40, job=sched_invariant.SWITCH_JOB, process="ovs-vswitchd",
                  pid=5, tid=5)
    reval = thread([0.5] * 40, job=sched_invariant.SWITCH_JOB, process="ovs-vswitchd",
                   pid=5, tid=7).assign(thread="revalidator1208")
    found, _ = sched_invariant.judge(pd.concat([main, reval]), {"j": [(100.0, 102.0)]})
    assert found.empty
    pmd = thread([0.5] * 40, job=sched_invariant.SWITCH_JOB, process="ovs-vswitchd",
                 pid=5, tid=8).assign(thread="pmd-c01/id:9")
    found, _ = sched_invariant.judge(pd.concat([main, reval, pmd]), {"j": [(100.0, 102.0)]})
    assert list(found["thread"]) == ["pmd-c01/id:9"]
    worker = thread([0.5] * 40, pid=20, tid=21)  # a worker's threads are all judged
    assert len(sched_invariant.judge(worker, {"j0": [(100.0, 102.0)]})[0]) == 1


def test_switch_sched_names_the_policy_of_a_thread():
    """This test's own process runs under the normal policy at its nice; a PID that names no
    process reads as None."""
    assert switch_sched(os.getpid()) == f"SCHED_OTHER nice {os.nice(0)}"
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    assert switch_sched(child.pid) is None


def test_a_run_is_told_when_the_switch_forwards_without_real_time(monkeypatch):
    """A userspace switch at a normal policy gets one sentence naming the fix; a real-time one,
    or the kernel datapath (where the module forwards), none."""
    from testbed.emulator import preflight, schedstat

    monkeypatch.setattr(preflight, "datapath", lambda: "user")
    monkeypatch.setattr(schedstat, "switch_sched", lambda: "SCHED_OTHER nice -10")
    problem = preflight.forwarding_problem()
    assert problem and "SCHED_OTHER nice -10" in problem and "scripts/start-ovs.sh" in problem
    monkeypatch.setattr(schedstat, "switch_sched", lambda: "SCHED_RR 1")
    monkeypatch.setattr(schedstat, "realtime_helpers", lambda: [])
    assert preflight.forwarding_problem() is None
    # Threads made by a real-time main thread without reset-on-fork inherit its priority.
    monkeypatch.setattr(schedstat, "realtime_helpers",
                        lambda: ["revalidator377 (31015)", "handler376 (31014)"])
    problem = preflight.forwarding_problem()
    assert problem.startswith("2 threads of ovs-vswitchd besides its forwarding thread run "
                              "real-time (revalidator377 (31015), handler376 (31014))")
    assert problem.endswith("run `bash scripts/start-ovs.sh` as root")
    monkeypatch.setattr(schedstat, "switch_sched", lambda: "SCHED_OTHER nice -10")
    monkeypatch.setattr(preflight, "datapath", lambda: "kernel")
    assert preflight.forwarding_problem() is None


def test_the_report_counts_excused_stretches_by_what_excused_them():
    from analysis.report import _pipeline_judged

    sched = {"judged": True, "wait_share_max": 0.1, "stretch_s": 2.0, "excused": [
        {"excused_by": "links", "links_ratio": 0.95},
        {"links_ratio": 0.97},  # recorded before excused_by: the links
        {"excused_by": "job", "links_ratio": 0.8, "job_ratio": 0.93},
        {"excused_by": "job", "links_ratio": None, "job_ratio": 0.91}]}
    text = _pipeline_judged({"scheduler": sched})
    assert ("; 2 such stretches excused, their job's host links sending at 95% of their rate "
            "or more in them and the next; 2 excused by their job's own result, every such job "
            "reaching 91% of what its links allow or more)") in text
    assert "excused" not in _pipeline_judged({"scheduler": sched | {"excused": []}})


# -- waits the kernel counted while the thread slept -------------------------------------------


def asleep_then_jump(jump_s: float, *, runnable_from: int | None = None) -> pd.DataFrame:
    """2 s of a thread at 20 Hz, asleep (S) but for ``runnable_from``..40, whose wait grows by
    ``jump_s`` in its last sample, as the kernel adds a wait when it ends."""
    df = thread([0.0] * 40)
    df.loc[df.index[-1], "wait_s"] = jump_s
    df["state"] = "S"
    if runnable_from is not None:
        df.loc[df.index[runnable_from:-1], "state"] = "R"
    return df


def test_a_wait_counted_while_the_thread_was_seen_asleep_is_not_a_wait_for_a_cpu():
    """As traced on 2026-11-27: asleep, moved to the other CPU, woken 1.28 s later and run at
    once, and the kernel's run_delay grew by 1.28 s."""
    df = asleep_then_jump(1.28)
    kept = sched_invariant.runnable_wait(df["time"].to_numpy(), df["wait_s"].to_numpy(),
                                         df["state"].to_numpy())
    assert kept[-1] == pytest.approx(2 / HZ)  # at most the last interval, plus one of slack
    found, _ = sched_invariant.judge(df, {"j0": [(100.0, 102.0)]})
    assert found.empty
    (r,) = sched_invariant.asleep_waits(df).itertuples()
    assert (r.counted_s, r.removed_s) == pytest.approx((1.28, 1.28 - 2 / HZ))


def test_a_wait_while_seen_runnable_counts_in_full():
    df = asleep_then_jump(0.45, runnable_from=30)  # runnable for the last 0.5 s
    kept = sched_invariant.runnable_wait(df["time"].to_numpy(), df["wait_s"].to_numpy(),
                                         df["state"].to_numpy())
    assert kept[-1] == pytest.approx(0.45)
    assert sched_invariant.asleep_waits(df).empty
    (v,) = sched_invariant.judge(df, {"j0": [(100.0, 102.0)]})[0].itertuples()
    assert v.wait_s == pytest.approx(0.45)


def test_waits_since_the_thread_was_last_asleep_share_one_budget():
    """Seen asleep at sample 19, runnable at 20: by sample 21 it can have waited at most
    0.1 s, plus one interval of slack, however the kernel's growth falls across samples."""
    df = thread([0.0] * 40)
    df["state"] = "S"
    df.loc[df.index[20], "state"] = "R"
    df.loc[df.index[20]:, "wait_s"] = 0.08
    df.loc[df.index[21]:, "wait_s"] = 0.16
    kept = sched_invariant.runnable_wait(df["time"].to_numpy(), df["wait_s"].to_numpy(),
                                         df["state"].to_numpy())
    assert kept[20] == pytest.approx(0.08)
    assert kept[21] == pytest.approx(0.1 + 1 / HZ)


def test_samples_without_states_are_taken_as_the_kernel_counted():
    df = asleep_then_jump(1.28).drop(columns="state")
    assert sched_invariant.asleep_waits(df).empty
    (v,) = sched_invariant.judge(df, {"j0": [(100.0, 102.0)]})[0].itertuples()
    assert v.wait_s == pytest.approx(1.28)


def test_the_verdict_records_what_it_did_not_count(leaf_spine):
    df = asleep_then_jump(1.28)
    rec = pipeline_record(df, {"j0": [(100.0, 102.0)]}, [], leaf_spine, "ovs",
                          lambda a, b: "")
    assert rec["reasons"] == []
    s = rec["scheduler"]
    assert s["violations"] == [] and s["asleep_wait_removed_s"] == pytest.approx(1.18)
    (row,) = s["asleep_wait_removed"]
    assert (row["process"], row["counted_s"]) == ("h0 rank0", 1.28)
    assert rec["switch"]["asleep_wait_removed"] == []


def test_time_the_thread_ran_since_it_was_asleep_is_not_time_it_waited():
    """Asleep until sample 20, then on a CPU for 0.45 s of the 0.5 s to sample 30: a wait
    growth of 0.3 s at sample 30 can hold no more than the 0.05 s left, plus the slack."""
    df = thread([0.0] * 40)
    df["state"] = ["S"] * 21 + ["R"] * 20
    df["run_s"] = np.clip((df["time"] - 101.0) * 0.9, 0.0, 0.45)
    df.loc[df.index[30]:, "wait_s"] = 0.3
    kept = sched_invariant.runnable_wait(df["time"].to_numpy(), df["wait_s"].to_numpy(),
                                         df["state"].to_numpy(), df["run_s"].to_numpy())
    assert kept[30] == pytest.approx(0.5 - 0.45 + 1 / HZ)
    assert sched_invariant.runnable_wait(df["time"].to_numpy(), df["wait_s"].to_numpy(),
                                         df["state"].to_numpy())[30] == pytest.approx(0.3)
