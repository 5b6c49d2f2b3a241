"""The run-queue waits read from perf's sched events (:mod:`analysis.runqueue_trace`, what
benchmarks/runqueue_traced.py sets beside the sampler's count)."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis import runqueue_trace as rq


def switch(t: float, prev: int, state: str, nxt: int) -> str:
    """A sched_switch line as ``perf script -F tid,cpu,time,event,trace`` prints it."""
    return (f"{prev:>5} [000] {t:.6f}:       sched:sched_switch: prev_comm=x prev_pid={prev} "
            f"prev_prio=120 prev_state={state} ==> next_comm=y next_pid={nxt} next_prio=120")


def waking(t: float, pid: int) -> str:
    return (f"   99 [001] {t:.6f}:       sched:sched_waking: comm=y pid={pid} prio=120 "
            "target_cpu=000")


# a worker (tid 7) woken and run 3 ms later; preempted (R+) and back after 10 ms; asleep (S),
# moved while asleep, then woken 1.28 s later and run at once: three waits, 13.05 ms in all
EVENTS = [
    waking(100.0, 7), switch(100.003, 0, "R", 7),
    switch(100.005, 7, "R+", 5), switch(100.015, 5, "S", 7),
    waking(100.016, 5), switch(100.020, 7, "S", 5),
    "    0 [001] 100.020600: sched:sched_migrate_task: comm=python3 pid=7 prio=120 "
    "orig_cpu=0 dest_cpu=1",
    waking(101.3, 7), switch(101.30005, 0, "R", 7),
]


def test_waits_run_from_wake_up_or_preemption_to_switch_in():
    waits = rq.traced_waits(EVENTS)
    assert [round(b - a, 6) for a, b in waits[7]] == [0.003, 0.01, 0.00005]
    assert [round(b - a, 6) for a, b in waits[5]] == [0.004]  # woken at .016, in at .020


def test_the_comparison_sets_the_kernel_count_beside_the_trace():
    waits = rq.traced_waits(EVENTS)
    t = [99.9 + k * 0.05 for k in range(30)]  # 20 Hz across the events
    counted = [0.0 if x < 100.02 else 0.013 if x < 101.3 else 1.293 for x in t]
    state = ["R" if 100.0 <= x < 100.02 else "S" for x in t]
    sched = pd.DataFrame({"time": t, "job": "j", "process": "h0 rank0", "pid": 7, "tid": 7,
                          "thread": "python3", "run_s": 0.0, "wait_s": counted,
                          "state": state})
    (row,) = rq.counted_vs_traced(sched, waits).itertuples()
    assert row.counted_s == pytest.approx(1.293)
    assert row.traced_s == pytest.approx(0.01305)
    assert row.kept_s < 0.15  # the sleep is not kept
    assert row.jump_s == pytest.approx(1.28) and row.traced_max_s == pytest.approx(0.01)
