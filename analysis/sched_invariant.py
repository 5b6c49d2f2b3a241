"""The scheduler invariant: no process of the run, and not the switch, spends much of its job's
communication waiting for a CPU. (Mininet-HiFi's CPU invariant, read directly from the
kernel's scheduler statistics instead of inferred from idle time.)

The sampler reads ``/proc/PID/task/TID/schedstat`` of every worker and of ``ovs-vswitchd``: its
second field is the time the thread has spent runnable but not running (waiting in a run queue,
or held back by a CPU quota; ns there, seconds in the samples).

What is judged is the wait's **cost to the job**, not how the scheduler shares a CPU between
collectives. A thread's wait is counted only while its job communicates (its measured
collectives; for the switch, any job's), interpolated between samples. That time is cut into
stretches holding :data:`STRETCH_S` seconds of communication each. A stretch in which a thread
of the process waited more than :data:`WAIT_SHARE_MAX` of its communicating time is a
violation: a worker that waited that share of its collectives can have held its job back by
that share, more than the 10 % a faithful job may lose to anything but its links. Consecutive
violating stretches of one process are reported as one.

Unless the links show it cost nothing: a worker's stretch is *excused* when every host link of
its job sent at least 90 % of its rate in it and in the next stretch (:func:`excused_by`). Its
links kept sending the data it had queued while it waited (measured 2026-11-27: the waiting
worker's own link had data queued in 76-100 % of the samples of such stretches). Excused
stretches are kept and shown, never silently dropped; the switch is never excused, as its wait
holds back every job's packets, not one worker's. The scheduler invariant
(:class:`SchedulerInvariant`, registered as ``scheduler``; it reads the ``job`` invariant's
judgement) also excuses a worker whose job the job invariant judged and found within its
tolerance: that job's own measured figure bounds what
the wait cost it (a wait that cost more than the tolerance shows there, as a job invariant
violation).

A thread's wait is read as the kernel counts it, less what it cannot have waited: growth since
a sample that saw the thread asleep beyond the time elapsed since (:func:`runnable_wait`). The
kernel adds a wait when it ends, and on 6.18 it was seen to count a whole sleep as a wait.

Measured on 2026-11-26 (BENCHMARKS.md, "The pipeline invariants"): on a quiet machine workers
waited 1-3 % of their communication and ovs-vswitchd 2-5 %; beside three busy loops
ovs-vswitchd waited 18-26 %, and held to 0.15 of a core 26-41 %. Judged over half-second
stretches of wall time instead, the quiet workers' waits between collectives read 12-23 %.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from analysis import job_invariant
from analysis.invariant import MAX_SENTENCES, Evidence, Invariant, Judgement, Violation, pct
from analysis.invariants import grown_over, slowest_host_link

WAIT_SHARE_MAX = 0.10  # of communicating time; the job's allowance below its links' goodput
STRETCH_S = 2.0  # seconds of communication per judged stretch
MIN_JUDGED_S = 0.5  # a process with less communication than this in all is not judged
SWITCH_JOB = ""  # the job column of the switch's threads: it serves every job
PMD_PREFIX = "pmd"  # Open vSwitch's poll-mode threads, where it has them, forward too


def forwarding(samples: pd.DataFrame) -> pd.DataFrame:
    """``samples`` less the switch's threads that do not forward packets: on the userspace
    datapath the main thread (its TID is its PID) polls every port and forwards, as do
    poll-mode (``pmd*``) threads where ports have them; handler, revalidator and RCU threads
    keep its flow tables and wait for a CPU without holding a packet back."""
    if samples.empty:
        return samples
    switch = samples["job"] == SWITCH_JOB
    fwd = (samples["tid"] == samples["pid"]) | samples["thread"].str.startswith(PMD_PREFIX)
    return samples[~switch | fwd]

VIOLATION_COLUMNS = ["job", "process", "pid", "tid", "thread", "start", "end", "span_s",
                     "comm_s", "worst_share", "wait_s", "excused", "links_ratio"]

Spans = list[tuple[float, float]]
LinksKept = Callable[[str, Spans], "float | None"]  # (job, spans) -> slowest host link ÷ rate


def merged(windows: Spans) -> Spans:
    """The union of ``windows`` as sorted, disjoint spans."""
    out: list[list[float]] = []
    for a, b in sorted(windows):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        elif b > a:
            out.append([a, b])
    return [(a, b) for a, b in out]


def runnable_wait(times: np.ndarray, wait_s: np.ndarray, state: np.ndarray | None,
                  run_s: np.ndarray | None = None) -> np.ndarray:
    """One thread's cumulative wait (``wait_s`` at ``times``) less what it cannot have waited
    for a CPU: since a sample that saw it asleep (``state`` other than ``R``, read just before
    the counters), its wait, together with the time it ran (``run_s``), can have grown by no
    more than the time elapsed since, give or take one sample interval. Without states (runs
    before 2026-11-27) it is ``wait_s``.

    Why: the kernel adds a wait to ``run_delay`` when it ends, and it once started that clock
    while the thread slept. Traced on 2026-11-27 (BENCHMARKS.md, "Waits the kernel counted
    while a worker slept"): a worker went to sleep, was moved to the idle CPU 0.6 ms later
    while still asleep, and when it was woken 1.28 s afterwards and ran within 0.06 ms,
    ``run_delay`` grew by 1.28 s."""
    if state is None or len(times) < 2:
        return wait_s
    slop_s = float(np.median(np.diff(times)))
    ran = np.zeros(len(times)) if run_s is None else run_s
    out = np.empty(len(wait_s))
    total = out[0] = wait_s[0]
    asleep_t, since = -np.inf, 0.0  # when last seen asleep; wait and run time since then
    for k in range(len(wait_s)):
        if k:
            since += ran[k] - ran[k - 1]
            grown = wait_s[k] - wait_s[k - 1]
            credit = min(grown, max(0.0, times[k] - asleep_t + slop_s - since))
            since += credit
            total += credit
            out[k] = total
        if state[k] != "R":
            asleep_t, since = times[k], 0.0
    return out


def thread_wait(h: pd.DataFrame) -> np.ndarray:
    """:func:`runnable_wait` of one thread's samples (sorted by time)."""
    state = h["state"].to_numpy() if "state" in h and h["state"].notna().all() else None
    run_s = h["run_s"].to_numpy() if "run_s" in h else None
    return runnable_wait(h["time"].to_numpy(), h["wait_s"].to_numpy(), state, run_s)


def asleep_waits(samples: pd.DataFrame) -> pd.DataFrame:
    """Per thread, what :func:`runnable_wait` took away: ``job``, ``process``, ``pid``,
    ``tid``, ``thread``, ``counted_s`` (the kernel's wait over the samples), ``removed_s``,
    largest first (only threads with something removed)."""
    rows = []
    for (job, process, pid, tid, thread), h in samples.sort_values("time").groupby(
            ["job", "process", "pid", "tid", "thread"], sort=False):
        counted = float(h["wait_s"].iloc[-1] - h["wait_s"].iloc[0])
        kept = thread_wait(h)
        removed = counted - float(kept[-1] - kept[0])
        if removed > 1e-9:
            rows.append({"job": job, "process": process, "pid": int(pid), "tid": int(tid),
                         "thread": thread, "counted_s": counted, "removed_s": removed})
    out = pd.DataFrame(rows, columns=["job", "process", "pid", "tid", "thread", "counted_s",
                                      "removed_s"])
    return out.sort_values("removed_s", ascending=False, ignore_index=True)


def waited_s(times: np.ndarray, wait_s: np.ndarray, spans: Spans) -> np.ndarray:
    """Per span, the seconds one thread waited in it: its cumulative wait interpolated between
    samples, and nothing outside the samples' reach (before the thread was first read, after
    it ended)."""
    return grown_over(times, wait_s, spans)[1]


def worst_share(samples: pd.DataFrame, spans: Spans) -> float | None:
    """The largest share of ``spans``' total length that one thread of ``samples`` waited for
    a CPU in them (None when no thread was sampled across them)."""
    total = sum(b - a for a, b in spans)
    if samples.empty or total <= 0:
        return None
    return max(float(waited_s(h["time"].to_numpy(), thread_wait(h), spans).sum())
               for _, h in samples.sort_values("time").groupby(["pid", "tid"])) / total


def cut(spans: Spans, stretch_s: float = STRETCH_S) -> Spans:
    """``spans`` with each longer than ``stretch_s`` cut into pieces of ``stretch_s`` (and a
    shorter last piece), so that one long collective is judged stretch by stretch."""
    out = []
    for a, b in spans:
        edges = [*np.arange(a, b, stretch_s), b]
        out += [(x, y) for x, y in itertools.pairwise(edges) if y > x]
    return out


def stretches(spans: Spans, stretch_s: float = STRETCH_S) -> list[list[int]]:
    """``spans`` (disjoint, sorted) grouped into consecutive stretches of at least
    ``stretch_s`` seconds each (a shorter remainder joins the last stretch), as lists of span
    indices; one stretch of everything when there is less than ``stretch_s`` in all."""
    groups: list[list[int]] = [[]]
    held = 0.0
    for k, (a, b) in enumerate(spans):
        if held >= stretch_s:
            groups.append([])
            held = 0.0
        groups[-1].append(k)
        held += b - a
    if len(groups) > 1 and held < stretch_s:
        groups[-2].extend(groups.pop())
    return [g for g in groups if g]


def excused_by(links: LinksKept | None, job: str, spans: Spans, groups: list[list[int]],
               k: int, share_max: float) -> tuple[bool, float | None]:
    """Whether stretch ``k`` of a worker's job (``groups[k]``, indices into ``spans``) is
    excused its wait, and the slowest host link ratio that decided it. Excused: every host link
    of the job sent at least ``1 - share_max`` of its rate in the stretch **and** in the next
    one. A worker that waits while the data it queued keeps its links busy costs its job
    nothing the links show; if the queue runs dry after the stretch, the cost lands in the next
    one, and that stretch is read too (a last stretch ends with the job's last collective,
    which cannot end before its bytes are sent, so its cost stays inside it)."""
    if links is None or job == SWITCH_JOB:
        return False, None
    ratios = [links(job, [spans[i] for i in groups[j]])
              for j in (k, k + 1) if j < len(groups)]
    if any(r is None for r in ratios):
        return False, None
    worst = min(ratios)
    return worst >= 1 - share_max, worst


def judge(samples: pd.DataFrame, communicating: dict[str, Spans], *,
          share_max: float = WAIT_SHARE_MAX, stretch_s: float = STRETCH_S,
          links: LinksKept | None = None) -> tuple[pd.DataFrame, float]:
    """Every stretch in which a thread of a process waited for a CPU more than ``share_max``
    of its job's communicating time (``communicating``: job name → its measured
    collectives' (start, end); the switch, job :data:`SWITCH_JOB`, counts while any job
    communicates, by its :func:`forwarding` threads only), merged per process
    (:data:`VIOLATION_COLUMNS`; ``tid``/``thread``: the thread that waited most, whose wait
    judges the process), and the process-seconds of communication judged. With ``links``
    (job, spans → its slowest host link's achieved ÷ configured rate), a worker's stretch
    whose links kept their rate is kept as ``excused`` (:func:`excused_by`), with that ratio
    in ``links_ratio``."""
    every = [w for ws in communicating.values() for w in ws]
    rows: list[dict] = []
    judged_s = 0.0
    if samples.empty:
        return pd.DataFrame(rows, columns=VIOLATION_COLUMNS), judged_s
    samples = forwarding(samples)
    for (job, process, pid), g in samples.sort_values("time").groupby(
            ["job", "process", "pid"], sort=True):
        t_min, t_max = float(g["time"].min()), float(g["time"].max())
        spans = cut([(max(a, t_min), min(b, t_max))
                     for a, b in merged(every if job == SWITCH_JOB
                                        else communicating.get(job, []))
                     if b > t_min and a < t_max], stretch_s)
        comm = np.array([b - a for a, b in spans])
        if comm.sum() < MIN_JUDGED_S:
            continue
        threads = [(int(tid), name, waited_s(h["time"].to_numpy(), thread_wait(h), spans))
                   for (tid, name), h in g.groupby(["tid", "thread"], sort=True)]
        judged_s += float(comm.sum())
        current: dict | None = None
        groups = stretches(spans, stretch_s)
        for k, idx in enumerate(groups):
            comm_s = float(comm[idx].sum())
            wait, tid, name = max((float(w[idx].sum()), tid, name) for tid, name, w in threads)
            share = wait / comm_s
            if share <= share_max:
                current = None
                continue
            excused, ratio = excused_by(links, job, spans, groups, k, share_max)
            start, end = spans[idx[0]][0], spans[idx[-1]][1]
            if current is not None and current["excused"] == excused:
                current.update(end=end, comm_s=current["comm_s"] + comm_s,
                               worst_share=max(current["worst_share"], share),
                               wait_s=current["wait_s"] + wait,
                               links_ratio=min((r for r in (ratio, current["links_ratio"])
                                                if r is not None), default=None))
                continue
            current = {"job": job, "process": process, "pid": int(pid), "tid": tid,
                       "thread": name, "start": start, "end": end, "comm_s": comm_s,
                       "worst_share": share, "wait_s": wait, "excused": excused,
                       "links_ratio": ratio}
            rows.append(current)
    out = pd.DataFrame(rows, columns=VIOLATION_COLUMNS)
    out["span_s"] = out["end"] - out["start"]
    return out, judged_s


# -- the verdict: fidelity.json's ``scheduler``, ``switch`` and ``sched_judged_s`` ---------------

def links_kept(queues: pd.DataFrame | None, jobs: list[dict[str, Any]]) -> LinksKept | None:
    """(job, spans) → the slowest of its hosts' links over the spans, achieved ÷ configured
    (:func:`analysis.invariants.slowest_host_link`), from the qdisc samples; None without
    them."""
    if queues is None or not len(queues):
        return None
    hosts = {j["name"]: list(j.get("hosts") or []) for j in jobs}
    return lambda job, spans: slowest_host_link(queues, hosts.get(job, []), spans)


def waits(evidence: Evidence) -> tuple[pd.DataFrame, pd.DataFrame, float, pd.DataFrame] | None:
    """:func:`judge` and :func:`asleep_waits` of the run's ``sched_samples.parquet`` over its
    jobs' measured collectives, with its jobs' host links (``jobs.json`` on the qdisc samples)
    to excuse a worker's wait: (samples, stretches, process-seconds judged, removed waits),
    computed once for the scheduler and the switch invariants; None without samples."""
    def compute():
        sched = evidence.table("sched_samples.parquet")
        if sched is None or not len(sched):
            return None
        found, judged_s = judge(sched, evidence.windows(), links=links_kept(
            evidence.table("qdisc_samples.parquet"), evidence.json("jobs.json") or []))
        return sched, found, judged_s, asleep_waits(sched)
    return evidence.derived("waits", compute)


class _WaitInvariant(Invariant):
    """The scheduler invariant on the workers' threads, or on ovs-vswitchd's (``switch``).
    A reason names the process, its thread, the stretch (s from the first scheduler sample)
    and what was busiest then (``evidence.extra["busiest_then"](start, end)``)."""

    more: ClassVar[str] = "stretches of CPU wait"
    switch: ClassVar[bool]

    def mine(self, df: pd.DataFrame) -> pd.Series:
        return (df["job"] == SWITCH_JOB) if self.switch else (df["job"] != SWITCH_JOB)

    def judge(self, evidence: Evidence) -> Judgement:
        found = waits(evidence)
        has = found is not None and bool(self.mine(found[0]).any())
        rec: dict[str, Any] = {"judged": has, "wait_share_max": WAIT_SHARE_MAX,
                               "stretch_s": STRETCH_S, "violations": []}
        violations: list[Violation] = []
        if not has:
            rec |= _asleep_record(None)
            if not self.switch:
                rec["excused"] = []
            return self._judgement(False, violations, rec, found)
        sched, rows, _, asleep = found
        t0 = float(sched["time"].min())
        ours = rows[self.mine(rows)]
        by_links = ours["excused"].astype(bool)
        held = {} if self.switch else job_invariant.held(
            (evidence.earlier["job"].measured.get("job") or {}).get("jobs") or []
            if "job" in evidence.earlier else [])
        by_job = ~by_links & ours["job"].isin(held.keys())
        kept = list(ours[~by_links & ~by_job].itertuples())
        rec["violations"] = [_wait_violation(r, t0) for r in kept]
        rec |= _asleep_record(asleep[self.mine(asleep)])
        if not self.switch:
            rec["excused"] = (
                [_wait_violation(r, t0) | {"excused_by": "links"}
                 for r in ours[by_links].itertuples()]
                + [_wait_violation(r, t0) | {"excused_by": "job", "job_ratio": held[r.job]}
                   for r in ours[by_job].itertuples()])
        busiest = evidence.extra.get("busiest_then")
        for k, (r, v) in enumerate(zip(kept, rec["violations"], strict=True)):
            whose = f"job {r.job}'s worker {r.process}" if r.job else r.process
            then = busiest(r.start, r.end) if busiest and k < MAX_SENTENCES else ""
            violations.append(Violation(
                whose,
                f"{whose} (pid {r.pid}, most in thread {r.thread}) waited for a CPU "
                f"{r.worst_share:.0%} of the time {'its job' if r.job else 'jobs'} "
                f"communicated at {r.start - t0:.1f}–{r.end - t0:.1f} s (more than "
                f"{WAIT_SHARE_MAX:.0%} of {STRETCH_S:g} s of collectives)"
                + _links_then(v["links_ratio"]) + then, v["start_s"], v["end_s"]))
        return self._judgement(True, violations, rec, found)

    def _judgement(self, judged: bool, violations: list[Violation], rec: dict[str, Any],
                   found) -> Judgement:
        return Judgement(judged, violations, {self.name: rec})

    def fields(self, judgement: Judgement) -> dict[str, Any]:
        return judgement.measured


class SchedulerInvariant(_WaitInvariant):
    """The workers' waits; a stretch is excused by its job's host links (:func:`excused_by`)
    or by its job's own result (the ``job`` invariant held it: :func:`job_invariant.held`).
    Its fields add ``sched_judged_s``, the process-seconds judged, the switch's included."""

    name: ClassVar[str] = "scheduler"
    checks: ClassVar[str] = (f"no worker waits for a CPU more than {WAIT_SHARE_MAX:.0%} of "
                             f"{STRETCH_S:g} s of its job's collectives")
    after: ClassVar[tuple[str, ...]] = ("job",)
    switch: ClassVar[bool] = False

    def _judgement(self, judged: bool, violations: list[Violation], rec: dict[str, Any],
                   found) -> Judgement:
        return Judgement(judged, violations, {self.name: rec,
                                              "sched_judged_s": found[2] if found else 0.0})

    def summary(self, fidelity: dict[str, Any]) -> str | None:
        sched = fidelity.get("scheduler") or {}
        if not sched.get("judged"):
            return None
        stretch = sched.get("stretch_s") or sched.get("window_s")
        return (f"the scheduler invariant (workers waiting for a CPU over "
                f"{pct(sched.get('wait_share_max'))} of {stretch} s of their collectives"
                + _excused(sched.get("excused") or []) + ")")


class SwitchInvariant(_WaitInvariant):
    """ovs-vswitchd's forwarding threads' waits, while any job communicates; never excused."""

    name: ClassVar[str] = "switch"
    checks: ClassVar[str] = (f"ovs-vswitchd's forwarding threads wait for a CPU no more than "
                             f"{WAIT_SHARE_MAX:.0%} of {STRETCH_S:g} s of collectives")
    switch: ClassVar[bool] = True

    def summary(self, fidelity: dict[str, Any]) -> str | None:
        if not (fidelity.get("switch") or {}).get("judged"):
            return None
        return "the switch invariant (ovs-vswitchd's threads, likewise)"


def _excused(excused: list[dict[str, Any]]) -> str:
    """'; N such stretches excused, ...': the scheduler invariant's excused stretches, by what
    excused them (fidelity.json from before ``excused_by`` has only the links)."""
    by_links = [e for e in excused if e.get("excused_by", "links") == "links"]
    by_job = [e for e in excused if e.get("excused_by") == "job"]
    out = ""
    if by_links:
        out += (f"; {len(by_links)} such stretches excused, their job's host links sending at "
                f"{pct(min(e['links_ratio'] for e in by_links))} of their rate or more in "
                "them and the next")
    if by_job:
        out += (f"; {len(by_job)} excused by their job's own result, every such job reaching "
                f"{pct(min(e['job_ratio'] for e in by_job))} of what its links allow or "
                "more")
    return out


def _asleep_record(removed: pd.DataFrame | None) -> dict[str, Any]:
    """What the invariant did not count as waiting for a CPU because the thread was seen
    asleep meanwhile (:func:`runnable_wait`): the seconds in all, and the threads that lost
    the most."""
    if removed is None or removed.empty:
        return {"asleep_wait_removed_s": 0.0, "asleep_wait_removed": []}
    top = removed.head(MAX_SENTENCES)
    return {"asleep_wait_removed_s": round(float(removed["removed_s"].sum()), 4),
            "asleep_wait_removed": [
                {"job": r.job, "process": r.process, "pid": r.pid, "tid": r.tid,
                 "thread": r.thread, "counted_s": round(r.counted_s, 4),
                 "removed_s": round(r.removed_s, 4)} for r in top.itertuples()]}


def _links_then(ratio: float | None) -> str:
    """'; its job's host links ran at N% of their rate then', when they were read."""
    if ratio is None:
        return ""
    return f"; its job's host links ran at {ratio:.0%} of their rate then and in the next stretch"


def _wait_violation(r: Any, t0: float) -> dict[str, Any]:
    """A scheduler or switch violation, or an excused stretch (a row of :func:`judge`) as
    fidelity.json keeps it, times in seconds from ``t0``; ``links_ratio`` where the job's host
    links were read."""
    ratio = r.links_ratio if r.links_ratio == r.links_ratio else None  # NaN: not read
    return {"job": r.job or None, "process": r.process, "pid": int(r.pid), "tid": int(r.tid),
            "thread": r.thread, "start_s": round(r.start - t0, 2),
            "end_s": round(r.end - t0, 2), "worst_wait_share": round(r.worst_share, 3),
            "wait_s": round(r.wait_s, 3), "comm_s": round(r.comm_s, 3),
            "links_ratio": None if ratio is None else round(ratio, 3)}


SCHEDULER = SchedulerInvariant()
SWITCH = SwitchInvariant()
