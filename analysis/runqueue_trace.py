"""Run-queue waits from the kernel's scheduler events, set beside what the scheduler sampler
counted: the check of :mod:`analysis.sched_invariant` against ``perf sched record``.

The events give the true run-queue wait of every thread: from its wake-up (or from being
switched out still runnable) to being switched in. Pure: ``perf script -F
tid,cpu,time,event,trace`` lines and ``sched_samples.parquet`` in, waits and a table out.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

import pandas as pd

from analysis import sched_invariant

SWITCH = re.compile(r"^\s*\d+\s+\[\d+\]\s+([\d.]+):\s+sched:sched_switch: .*prev_pid=(\d+) "
                    r".*prev_state=(\S+) ==> .*next_pid=(\d+)")
WAKE = re.compile(r"^\s*\d+\s+\[\d+\]\s+([\d.]+):\s+sched:sched_(?:waking|wakeup|wakeup_new):"
                  r" .*\bpid=(\d+) ")


def traced_waits(lines: Iterable[str]) -> dict[int, list[tuple[float, float]]]:
    """Per thread, its run-queue waits as (ready, switched in) times, from ``perf script -F
    tid,cpu,time,event,trace`` lines of sched_switch and wake-up events in time order."""
    ready: dict[int, float] = {}
    running: set[int] = set()
    waits: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for line in lines:
        if m := SWITCH.match(line):
            t, prev, state, nxt = float(m[1]), int(m[2]), m[3], int(m[4])
            running.discard(prev)
            if state.startswith("R"):  # preempted (R+) or yielded: still runnable
                ready[prev] = t
            else:
                ready.pop(prev, None)
            if nxt in ready:
                waits[nxt].append((ready.pop(nxt), t))
            running.add(nxt)
        elif (m := WAKE.match(line)) and (tid := int(m[2])) not in running | ready.keys():
            ready[tid] = float(m[1])
    return waits


def counted_vs_traced(sched: pd.DataFrame, waits: dict[int, list[tuple[float, float]]]
                      ) -> pd.DataFrame:
    """Per sampled thread: ``counted_s`` (the kernel's run_delay over its samples), ``kept_s``
    (what the invariant keeps), ``traced_s`` (the events' waits that ended in that span), and
    the largest single wait: ``jump_s`` (run_delay's largest growth in one sample) and
    ``traced_max_s``."""
    rows = []
    for (process, tid, thread), h in sched.sort_values("time").groupby(
            ["process", "tid", "thread"], sort=False):
        t0, t1 = float(h["time"].iloc[0]), float(h["time"].iloc[-1])
        kept = sched_invariant.thread_wait(h)
        mine = [b - a for a, b in waits.get(int(tid), []) if t0 < b <= t1]
        rows.append({"process": process, "thread": thread, "tid": int(tid),
                     "span_s": t1 - t0,
                     "counted_s": float(h["wait_s"].iloc[-1] - h["wait_s"].iloc[0]),
                     "kept_s": float(kept[-1] - kept[0]), "traced_s": sum(mine),
                     "jump_s": float(h["wait_s"].diff().max()),
                     "traced_max_s": max(mine, default=0.0)})
    return pd.DataFrame(rows)
