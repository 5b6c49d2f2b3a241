"""What ``fidelity.json`` says of a run: did the emulation keep every promise it can judge?

On the links, two rules make a run not faithful: a link direction that ran above its shaping,
and one that sent short of its rate while its queue would have kept it busy (the link
invariant of :mod:`analysis.invariants`, from the sampled qdiscs). Before the links
(:func:`pipeline_record`): a worker that waited for a CPU too much of its job's
communication (the scheduler invariant), ovs-vswitchd doing so while jobs communicated (the
switch invariant), and a job more than 10 % from the simulator's time on the paths its flows
took (the job invariant). After them, every invariant registered in
:data:`testbed.core.registry.INVARIANTS` (:func:`analysis.invariant.judge_all`; the loss
invariant is one).
CPU headroom is recorded as a diagnosis beside them; it decides the verdict only for a run
without qdisc samples.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from testbed.core.formulas import RATE_TOLERANCE
from testbed.core.units import format_size
from testbed.emulator.calibrate import MIN_CPU_IDLE, TCP_WIRE_FACTOR

MAX_REASONS = 6  # violated link directions named one by one; the rest are counted
WINDOW = 10  # sample intervals the peak rate is taken over
SEGMENT_BYTES = 65536  # the most one TSO segment adds to a counter at once


def _overruns(samples) -> tuple[list[dict[str, Any]], list[str]]:
    """Per link direction from the byte counters: configured and peak rate (wire-equivalent,
    over 10 consecutive sample intervals), and a reason for each direction above its shaping.

    Counters tick a whole TSO segment (up to 64 KiB) at a time and HTB sends a segment on
    credit, so a window may hold one segment more than the rate allows (13 % of a second at
    4 Mbit/s, measured on the 2x2x4 fabric); only what exceeds that and the tolerance is an
    overrun."""
    links, reasons = [], []
    for (src, dst, cap), g in samples.groupby(["src", "dst", "capacity_mbit_s"]):
        g = g.sort_values("time")
        window_s = g["time"].diff(WINDOW)
        wire_bits = g["bytes"].diff(WINDOW) * 8 * TCP_WIRE_FACTOR
        rate = wire_bits / window_s / 1e6
        allowed = float(cap) * (1 + RATE_TOLERANCE) + SEGMENT_BYTES * 8 / window_s / 1e6
        peak = float(rate.max()) if len(g) > WINDOW else 0.0
        links.append({"src": src, "dst": dst, "configured_mbit_s": float(cap),
                      "peak_mbit_s": round(peak, 3)})
        if (rate > allowed).any():
            reasons.append(f"{src}->{dst} ran at {peak:.1f} Mbit/s, above its {cap:g} Mbit/s "
                           "shaping")
    return links, reasons


def _shortfalls(violations, t0: float) -> list[dict[str, Any]]:
    """Per link direction with violations of the link invariant (:func:`judge`'s rows; times
    from ``t0``), worst shortfall first."""
    found = []
    for (src, dst), g in violations.groupby(["src", "dst"], sort=False):
        worst = g.loc[g["ratio"].idxmin()]
        found.append({"src": src, "dst": dst, "periods": len(g),
                      "seconds": float(g["span_s"].sum()),
                      "worst_ratio": float(worst["ratio"]),
                      "worst_at_s": float(worst["start"] - t0),
                      "capacity_mbit_s": float(worst["capacity_mbit_s"]),
                      "shortfall_bytes": float(g["shortfall_bytes"].sum())})
    return sorted(found, key=lambda f: -f["shortfall_bytes"])


def fidelity_record(samples, queues, idle_min: float | None, busiest: str = ""
                    ) -> dict[str, Any]:
    """The link side of ``fidelity.json`` from a run's ``link_samples.parquet`` and
    ``qdisc_samples.parquet`` (DataFrames, or None): ``reasons`` (each makes the run not
    faithful), ``notes`` (the CPU diagnosis), ``links`` (configured and peak rate per
    direction) and ``invariants`` (whether qdisc samples judged the links, the loaded seconds
    judged, and every link direction found short of its rate while its queue covered it)."""
    from analysis.invariants import judge

    links, reasons = _overruns(samples) if samples is not None else ([], [])
    notes: list[str] = []
    judged = queues is not None and len(queues) > 0
    found, loaded_s = [], 0.0
    if judged:
        violations, loaded_s = judge(queues)
        found = _shortfalls(violations, float(queues["time"].min()))
    for f in found[:MAX_REASONS]:
        reasons.append(
            f"{f['src']}->{f['dst']} sent {f['worst_ratio']:.0%} of its "
            f"{f['capacity_mbit_s']:g} Mbit/s at {f['worst_at_s']:.1f} s while its queue would "
            f"have kept it busy ({f['periods']} such period(s), {f['seconds']:.1f} s in all)")
    if len(found) > MAX_REASONS:
        reasons.append(f"... and {len(found) - MAX_REASONS} more link directions short of "
                       "their rate while loaded")
    low_cpu = idle_min is not None and idle_min < MIN_CPU_IDLE
    if low_cpu and not judged:
        reasons.append(f"CPU idle fell to {idle_min:.0%} (below {MIN_CPU_IDLE:.0%}) during "
                       "measured collectives and no qdisc samples show whether the links "
                       "kept their rates" + busiest)
    elif low_cpu:
        if found:
            then = ": links short of their rate then may owe it to the CPU"
        elif loaded_s > 0:
            then = ("; every link still sent at its rate whenever its queue would have kept "
                    "it busy")
        else:
            then = ("; no link was ever loaded long enough to judge, so the machine, not the "
                    "links, may have set the pace")
        notes.append(f"CPU idle fell to {idle_min:.0%} during measured collectives{then}"
                     + busiest)
    return {"reasons": reasons, "notes": notes, "links": links,
            "invariants": {"judged": judged, "sample_hz": _rate_hz(queues) if judged else None,
                           "loaded_s": loaded_s, "violations": found}}


def _rate_hz(queues) -> float | None:
    """The qdisc samples' achieved rate: samples per second of the median link direction."""
    per = queues.groupby(["src", "dst"])["time"].agg(["count", "min", "max"])
    span = per["max"] - per["min"]
    rates = (per["count"] - 1) / span.where(span > 0)
    return float(rates.median()) if rates.notna().any() else None


def links_kept(queues, jobs: list[dict[str, Any]]):
    """(job, spans) → the slowest of its hosts' links over the spans, achieved ÷ configured
    (:func:`analysis.invariants.slowest_host_link`), from the qdisc samples; None without
    them."""
    from analysis.invariants import slowest_host_link

    if queues is None or not len(queues):
        return None
    hosts = {j["name"]: list(j.get("hosts") or []) for j in jobs}
    return lambda job, spans: slowest_host_link(queues, hosts.get(job, []), spans)


def pipeline_record(sched, communicating: dict[str, list[tuple[float, float]]],
                    jobs: list[dict[str, Any]], plan, switches: str | None,
                    busiest: Callable[[float, float], str], queues=None,
                    predicted: dict[str, dict[str, Any]] | None = None,
                    on_links: dict[str, dict[str, int]] | None = None,
                    spans: tuple[dict[str, list[tuple[float, float]]],
                                 dict[str, list[tuple[float, float]]]] | None = None
                    ) -> dict[str, Any]:
    """The pipeline side of ``fidelity.json``: the scheduler invariant on the workers' threads
    and the switch invariant on ovs-vswitchd's (:mod:`analysis.sched_invariant`, from
    ``sched_samples.parquet``; ``communicating``: job → its measured collectives), and the job
    invariant (:mod:`analysis.job_invariant`, from jobs.json's records). ``reasons`` name the
    invariant, the place and the time (seconds from the first sample), and what was busiest
    then (``busiest(start, end)``). With the qdisc samples (``queues``), a worker's stretch of
    waiting whose job's host links kept their rate is listed under ``excused``, not a
    reason (``excused_by: links``); so is one whose job the job invariant judged and found
    within its tolerance at every size (``excused_by: job``, with that job's worst
    ``job_ratio``): the job's own measured figure bounds what the wait cost it. With
    ``predicted`` (:func:`testbed.emulator.prediction.predict`) the job invariant judges every
    job against the simulator on the paths its flows took, under any policy, and jobs sharing
    a link together (``on_links``: :func:`analysis.paths.bytes_on_links`; their spans in
    ``spans``: job → its collectives' (start, end), warm-up included, in the run and in the
    replay); a worker of a job
    it cannot judge has only its links to excuse it, and the switch is never excused."""
    from analysis import job_invariant, sched_invariant

    reasons: list[str] = []
    out: dict[str, Any] = {}
    judged = sched is not None and len(sched) > 0
    found, judged_s = (sched_invariant.judge(sched, communicating,
                                             links=links_kept(queues, jobs)) if judged
                       else (None, 0.0))
    verdicts = job_invariant.judge(
        jobs, plan, switches, predicted=predicted, on_links=on_links,
        windows=spans)
    held = job_invariant.held(verdicts)
    t0 = float(sched["time"].min()) if judged else 0.0
    asleep = sched_invariant.asleep_waits(sched) if judged else None
    for name, mine in (("scheduler", lambda df: df["job"] != sched_invariant.SWITCH_JOB),
                       ("switch", lambda df: df["job"] == sched_invariant.SWITCH_JOB)):
        has = judged and bool(mine(sched).any())
        ours = found[mine(found)] if has else None
        by_links = ours["excused"].astype(bool) if has else None
        by_job = ~by_links & ours["job"].isin(held.keys()) if has else None
        rows = list(ours[~by_links & ~by_job].itertuples()) if has else []
        out[name] = {"judged": has, "wait_share_max": sched_invariant.WAIT_SHARE_MAX,
                     "stretch_s": sched_invariant.STRETCH_S,
                     "violations": [_wait_violation(r, t0) for r in rows],
                     **_asleep_record(asleep[mine(asleep)] if has else None)}
        if name == "scheduler":
            out[name]["excused"] = (
                [_wait_violation(r, t0) | {"excused_by": "links"}
                 for r in ours[by_links].itertuples()]
                + [_wait_violation(r, t0) | {"excused_by": "job", "job_ratio": held[r.job]}
                   for r in ours[by_job].itertuples()] if has else [])
        for r, v in list(zip(rows, out[name]["violations"], strict=True))[:MAX_REASONS]:
            whose = f"job {r.job}'s worker {r.process}" if r.job else r.process
            reasons.append(
                f"{name} invariant: {whose} (pid {r.pid}, most in thread {r.thread}) waited "
                f"for a CPU {r.worst_share:.0%} of the time "
                f"{'its job' if r.job else 'jobs'} communicated at "
                f"{r.start - t0:.1f}–{r.end - t0:.1f} s (more than "
                f"{sched_invariant.WAIT_SHARE_MAX:.0%} of {sched_invariant.STRETCH_S:g} s of "
                "collectives)" + _links_then(v["links_ratio"]) + busiest(r.start, r.end))
        if len(rows) > MAX_REASONS:
            reasons.append(f"{name} invariant: ... and {len(rows) - MAX_REASONS} more "
                           "stretches of CPU wait")
    out["sched_judged_s"] = judged_s
    out["job"] = {"tolerance": job_invariant.TOLERANCE, "jobs": verdicts}
    for v in verdicts:
        if v["violated"]:
            reasons.append(job_reason(v) + _timeouts_then(v.get("tcp_timeouts")))
    return {"reasons": reasons, **out}


def job_reason(v: dict[str, Any]) -> str:
    """The job invariant's sentence for a violated job verdict: its worst size."""
    from analysis.job_invariant import TOLERANCE as tol
    from analysis.job_invariant import worst_size
    worst = worst_size(v)
    size = format_size(worst["size"])
    if worst["unit"] == "time_s" and "measured" in worst:
        how = ("slower than" if worst["ratio"] < 1 else "faster than")
        return (f"job invariant: job {v['job']} took {worst['measured']:.3g} s for its "
                f"All-Reduce of {size} where the simulator predicts {worst['expected']:.3g} s "
                f"on the paths its flows took ({how} it by more than {tol:.0%}): "
                + ("something besides its links set its pace" if worst["ratio"] < 1 else
                   "the model or the paths recorded do not hold"))
    return (f"job invariant: job {v['job']} reached {worst['ratio']:.0%} of what its "
            f"isolated links allow (All-Reduce of {size}), below {1 - tol:.0%}: something "
            "besides its links set its pace")


def _asleep_record(removed) -> dict[str, Any]:
    """What the invariant did not count as waiting for a CPU because the thread was seen
    asleep meanwhile (:func:`analysis.sched_invariant.runnable_wait`): the seconds in all, and
    the threads that lost the most."""
    if removed is None or removed.empty:
        return {"asleep_wait_removed_s": 0.0, "asleep_wait_removed": []}
    top = removed.head(MAX_REASONS)
    return {"asleep_wait_removed_s": round(float(removed["removed_s"].sum()), 4),
            "asleep_wait_removed": [
                {"job": r.job, "process": r.process, "pid": r.pid, "tid": r.tid,
                 "thread": r.thread, "counted_s": round(r.counted_s, 4),
                 "removed_s": round(r.removed_s, 4)} for r in top.itertuples()]}


def _timeouts_then(count: int | None) -> str:
    """'; its hosts' TCP counted N retransmission timeouts meanwhile', where they were read."""
    if count is None:
        return ""
    return (f"; its hosts' TCP counted {count} retransmission timeout"
            f"{'' if count == 1 else 's'} while it ran (each stalls a flow 200 ms or more)")


def _links_then(ratio: float | None) -> str:
    """'; its job's host links ran at N% of their rate then', when they were read."""
    if ratio is None:
        return ""
    return f"; its job's host links ran at {ratio:.0%} of their rate then and in the next stretch"


def _wait_violation(r, t0: float) -> dict[str, Any]:
    """A scheduler or switch violation, or an excused stretch (a row of
    :func:`analysis.sched_invariant.judge`) as fidelity.json keeps it, times in seconds from
    ``t0``; ``links_ratio`` where the job's host links were read."""
    ratio = r.links_ratio if r.links_ratio == r.links_ratio else None  # NaN: not read
    return {"job": r.job or None, "process": r.process, "pid": int(r.pid), "tid": int(r.tid),
            "thread": r.thread, "start_s": round(r.start - t0, 2),
            "end_s": round(r.end - t0, 2), "worst_wait_share": round(r.worst_share, 3),
            "wait_s": round(r.wait_s, 3), "comm_s": round(r.comm_s, 3),
            "links_ratio": None if ratio is None else round(ratio, 3)}
