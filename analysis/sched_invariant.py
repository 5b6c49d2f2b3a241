"""The scheduler invariant: no process of the run, and no thread of the switch, waits for a CPU
for long while its job communicates. (Mininet-HiFi's CPU invariant, read directly from the
kernel's scheduler statistics instead of inferred from idle time.)

The sampler reads ``/proc/PID/task/TID/schedstat`` of every worker and of ``ovs-vswitchd``: its
second field is the time the thread has spent runnable but not running (waiting in a run queue,
or held back by a CPU quota; ns there, seconds in the samples). Over a stretch of ``window_s``
the *wait share* is that time's growth ÷ the stretch's length. A stretch whose wait share
exceeds :data:`WAIT_SHARE_MAX` while the thread's job communicates (the measured collectives;
for the switch, any job's) is a violation: a thread that waits for a CPU that share of the time
can hold its job back by that share, more than the 10 % a faithful job may lose to anything but
its links.
Consecutive such stretches of one thread are reported as one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

WAIT_SHARE_MAX = 0.10  # of wall time; the job's allowance below its links' goodput
WINDOW_S = 0.5  # the stretch a wait share is taken over
SWITCH_JOB = ""  # the job column of the switch's threads: it serves every job

VIOLATION_COLUMNS = ["job", "process", "pid", "tid", "thread", "start", "end", "span_s",
                     "worst_share", "wait_s"]


def stretches(times: np.ndarray, wait_s: np.ndarray,
              window_s: float = WINDOW_S) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, wait share) of consecutive stretches of at least ``window_s``, cut at the
    samples (each stretch runs from one sample to the first at least ``window_s`` later)."""
    t = np.asarray(times, dtype=float)
    w = np.asarray(wait_s, dtype=float)
    cuts = [0]
    for k in range(1, t.size):
        if t[k] - t[cuts[-1]] >= window_s:
            cuts.append(k)
    idx = np.asarray(cuts)
    start, end = t[idx[:-1]], t[idx[1:]]
    share = np.diff(w[idx]) / (end - start) if idx.size > 1 else np.empty(0)
    return start, end, share


def overlap_s(start: float, end: float, windows: list[tuple[float, float]]) -> float:
    """Seconds of [start, end] inside the union of ``windows`` (which may overlap)."""
    spans = sorted((max(a, start), min(b, end)) for a, b in windows if b > start and a < end)
    total, reach = 0.0, start
    for a, b in spans:
        a = max(a, reach)
        if b > a:
            total += b - a
            reach = b
    return total


def judge(samples: pd.DataFrame, communicating: dict[str, list[tuple[float, float]]], *,
          share_max: float = WAIT_SHARE_MAX, window_s: float = WINDOW_S
          ) -> tuple[pd.DataFrame, float]:
    """Every stretch in which a thread waited for a CPU more than ``share_max`` of the time
    while its job communicated for at least half the stretch (``communicating``: job name →
    its measured collectives' (start, end); the switch's threads, job :data:`SWITCH_JOB`,
    count while any job communicates), merged per thread (:data:`VIOLATION_COLUMNS`), and the
    thread-seconds judged."""
    every = [w for ws in communicating.values() for w in ws]
    rows, judged_s = [], 0.0
    if samples.empty:
        return pd.DataFrame(rows, columns=VIOLATION_COLUMNS), judged_s
    keys = ["job", "process", "pid", "tid", "thread"]
    for (job, process, pid, tid, thread), g in samples.sort_values("time").groupby(
            keys, sort=True):
        windows = every if job == SWITCH_JOB else communicating.get(job, [])
        start, end, share = stretches(g["time"].to_numpy(), g["wait_s"].to_numpy(), window_s)
        current: dict | None = None
        for a, b, s in zip(start, end, share, strict=True):
            inside = overlap_s(a, b, windows) >= (b - a) / 2
            judged_s += (b - a) if inside else 0.0
            if inside and s > share_max:
                if current is not None and current["end"] == a:
                    current.update(end=b, worst_share=max(current["worst_share"], s),
                                   wait_s=current["wait_s"] + s * (b - a))
                    continue
                current = {"job": job, "process": process, "pid": int(pid), "tid": int(tid),
                           "thread": thread, "start": a, "end": b, "worst_share": s,
                           "wait_s": s * (b - a)}
                rows.append(current)
            else:
                current = None
    out = pd.DataFrame(rows, columns=VIOLATION_COLUMNS)
    out["span_s"] = out["end"] - out["start"]
    return out, judged_s
