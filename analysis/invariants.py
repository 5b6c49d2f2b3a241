"""The link invariant: did every shaped link send at its configured rate whenever traffic waited
for it, and never above it? (The check Mininet-HiFi makes of an emulation, here on sampled
qdisc statistics.) Registered as ``link`` (:class:`LinkInvariant`).

The sampler reads each link direction's egress qdisc (HTB) many times a second: the bytes it
has sent and the bytes waiting (``qdisc_samples.parquet``). An interval between two samples is
*covered* when the backlog at its start alone would keep the link busy to its end at the
configured rate ``C``: ``backlog ≥ C·Δt``. A link that keeps its promise sends ``C·Δt`` in a
covered interval whatever arrives meanwhile; it cannot idle, since the queue cannot empty.
Consecutive covered intervals form a *loaded period*. A loaded period of at least
``min_span_s`` in which the qdisc sent less than ``(1 − tolerance)·C·span`` (less a slack of
two TSO segments for packet granularity) is a violation: the emulation, not the workload, held
the link back. :func:`violations` lists them: which link direction, when, for how long, and
how far short.

Nothing is inferred between samples: the backlog at an interval's start is a lower bound on
the work the link had, so a violation found this way is one, up to the samples' timing.
What the check cannot see is a link short of its rate while its queue stayed below ``C·Δt``
(at 50 Hz: below 125 kB at 50 Mbit/s); those intervals are not judged, and
:func:`loaded_seconds` says how much was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from analysis.invariant import MAX_SENTENCES, Evidence, Invariant, Judgement, Violation
from testbed.core.formulas import MIN_CPU_IDLE, RATE_TOLERANCE, TCP_WIRE_FACTOR

MIN_SPAN_S = 0.2
SLACK_BYTES = 2 * 65536  # packet granularity: a TSO segment in flight at each end

VIOLATION_COLUMNS = ["link", "src", "dst", "start", "end", "span_s", "capacity_mbit_s",
                     "achieved_mbit_s", "ratio", "sent_bytes", "shortfall_bytes"]


def loaded_periods(times: np.ndarray, backlog_bytes: np.ndarray,
                   capacity_bytes_s: float) -> list[tuple[int, int]]:
    """Sample index pairs ``(i, j)``, ``i < j``: every interval from sample ``i`` to ``j`` is
    covered (its starting backlog ≥ capacity × its length), and the runs are maximal."""
    t = np.asarray(times, dtype=float)
    b = np.asarray(backlog_bytes, dtype=float)
    if t.size < 2:
        return []
    covered = b[:-1] >= capacity_bytes_s * np.diff(t)
    out, start = [], None
    for k, c in enumerate(covered):
        if c and start is None:
            start = k
        elif not c and start is not None:
            out.append((start, k))
            start = None
    if start is not None:
        out.append((start, len(covered)))
    return out


def _periods(samples: pd.DataFrame, min_span_s: float):
    """(link, src, dst, capacity_mbit_s, t, sent, i, j) of every loaded period of at least
    ``min_span_s``, per link direction."""
    if samples.empty:
        return
    for (link, src, dst), g in samples.sort_values("time").groupby(["link", "src", "dst"],
                                                                     sort=True):
        t = g["time"].to_numpy(dtype=float)
        sent = np.maximum.accumulate(g["sent_bytes"].to_numpy(dtype=float))
        cap_mbit_s = float(g["capacity_mbit_s"].iloc[0])
        for i, j in loaded_periods(t, g["backlog_bytes"].to_numpy(dtype=float),
                                   cap_mbit_s * 1e6 / 8):
            if t[j] - t[i] >= min_span_s:
                yield link, src, dst, cap_mbit_s, t, sent, i, j


def judge(samples: pd.DataFrame, *, min_span_s: float = MIN_SPAN_S,
          tolerance: float = RATE_TOLERANCE, slack_bytes: float = SLACK_BYTES
          ) -> tuple[pd.DataFrame, float]:
    """One pass over the samples: every loaded period of at least ``min_span_s`` in which a
    link direction sent less than its rate allows (:data:`VIOLATION_COLUMNS`; times as
    sampled), and the total length of the loaded periods judged, over every link direction
    (how much evidence the verdict rests on)."""
    rows, loaded_s = [], 0.0
    for link, src, dst, cap_mbit_s, t, sent, i, j in _periods(samples, min_span_s):
        span = t[j] - t[i]
        loaded_s += span
        owed = cap_mbit_s * 1e6 / 8 * span
        nbytes = sent[j] - sent[i]
        if nbytes < (1 - tolerance) * owed - slack_bytes:
            rows.append({"link": link, "src": src, "dst": dst, "start": t[i], "end": t[j],
                         "span_s": span, "capacity_mbit_s": cap_mbit_s,
                         "achieved_mbit_s": nbytes * 8 / span / 1e6, "ratio": nbytes / owed,
                         "sent_bytes": nbytes, "shortfall_bytes": owed - nbytes})
    return pd.DataFrame(rows, columns=VIOLATION_COLUMNS), float(loaded_s)


def grown_over(times: np.ndarray, counter: np.ndarray,
               spans: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Per span: the seconds of it within the samples' reach, and how much the cumulative
    ``counter`` sampled at ``times`` grew in it (interpolated between samples; nothing is
    counted before the first sample or after the last)."""
    if times.size < 2:
        return np.zeros(len(spans)), np.zeros(len(spans))
    a = np.clip([s for s, _ in spans], times[0], times[-1])
    b = np.clip([e for _, e in spans], times[0], times[-1])
    return b - a, np.interp(b, times, counter) - np.interp(a, times, counter)


def sent_ratio(samples: pd.DataFrame, spans: list[tuple[float, float]]) -> float | None:
    """What one link direction (its qdisc samples) sent in ``spans`` ÷ what its configured rate
    allows in them (:func:`grown_over` of its byte counter, over capacity × the spans' length
    within the samples' reach); None when less than :data:`MIN_SPAN_S` of the spans was
    sampled. The qdisc counts every segment's headers, as the shaping does, so a link kept
    busy reads 1.0."""
    g = samples.sort_values("time")
    sampled_s, sent = grown_over(g["time"].to_numpy(dtype=float),
                                 np.maximum.accumulate(g["sent_bytes"].to_numpy(dtype=float)),
                                 spans)
    span_s = float(sampled_s.sum())
    if span_s < MIN_SPAN_S:
        return None
    return float(sent.sum()) * 8 / (float(g["capacity_mbit_s"].iloc[0]) * 1e6 * span_s)


def slowest_host_link(samples: pd.DataFrame, hosts: list[str],
                      spans: list[tuple[float, float]]) -> float | None:
    """The lowest :func:`sent_ratio` over ``spans`` of every link direction from or to one of
    ``hosts`` (a host's link carries that host's traffic only); None when one of them was not
    sampled across the spans, or none was found."""
    mine = samples[samples["src"].isin(hosts) | samples["dst"].isin(hosts)]
    ratios = [sent_ratio(g, spans)
              for _, g in mine.groupby(["link", "src", "dst"], sort=True)]
    if not ratios or any(r is None for r in ratios):
        return None
    return min(ratios)


def violations(samples: pd.DataFrame, **limits: float) -> pd.DataFrame:
    """The violations of :func:`judge`."""
    return judge(samples, **limits)[0]


def loaded_seconds(samples: pd.DataFrame, min_span_s: float = MIN_SPAN_S) -> float:
    """The loaded seconds of :func:`judge`."""
    return judge(samples, min_span_s=min_span_s)[1]


# -- the verdict: fidelity.json's ``links`` and ``invariants`` -----------------------------------

WINDOW = 10  # sample intervals the peak rate is taken over
SEGMENT_BYTES = 65536  # the most one TSO segment adds to a counter at once


@dataclass(frozen=True)
class Overrun(Violation):
    """A link direction above its shaping (from the interface byte counters)."""


@dataclass(frozen=True)
class Shortfall(Violation):
    """A link direction short of its rate while its queue would have kept it busy."""


@dataclass(frozen=True)
class CpuBound(Violation):
    """CPU idle too low, with no qdisc samples to show whether the links kept their rates."""


def overruns(samples: pd.DataFrame) -> tuple[list[dict[str, Any]], list[Overrun]]:
    """Per link direction from the byte counters: configured and peak rate (wire-equivalent,
    over 10 consecutive sample intervals), and an :class:`Overrun` for each direction above
    its shaping.

    Counters tick a whole TSO segment (up to 64 KiB) at a time and HTB sends a segment on
    credit, so a window may hold one segment more than the rate allows (13 % of a second at
    4 Mbit/s, measured on the 2x2x4 fabric); only what exceeds that and the tolerance is an
    overrun."""
    links, found = [], []
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
            found.append(Overrun(f"{src}->{dst}", f"{src}->{dst} ran at {peak:.1f} Mbit/s, "
                                 f"above its {cap:g} Mbit/s shaping"))
    return links, found


def shortfalls(found: pd.DataFrame, t0: float) -> list[dict[str, Any]]:
    """Per link direction with violations of the link invariant (:func:`judge`'s rows; times
    from ``t0``), worst shortfall first."""
    out = []
    for (src, dst), g in found.groupby(["src", "dst"], sort=False):
        worst = g.loc[g["ratio"].idxmin()]
        out.append({"src": src, "dst": dst, "periods": len(g),
                    "seconds": float(g["span_s"].sum()),
                    "worst_ratio": float(worst["ratio"]),
                    "worst_at_s": float(worst["start"] - t0),
                    "capacity_mbit_s": float(worst["capacity_mbit_s"]),
                    "shortfall_bytes": float(g["shortfall_bytes"].sum())})
    return sorted(out, key=lambda f: -f["shortfall_bytes"])


def sample_rate_hz(queues: pd.DataFrame) -> float | None:
    """The qdisc samples' achieved rate: samples per second of the median link direction."""
    per = queues.groupby(["src", "dst"])["time"].agg(["count", "min", "max"])
    span = per["max"] - per["min"]
    rates = (per["count"] - 1) / span.where(span > 0)
    return float(rates.median()) if rates.notna().any() else None


def link_judgement(samples: pd.DataFrame | None, queues: pd.DataFrame | None,
                   idle_min: float | None, busiest: str = "") -> Judgement:
    """The link invariant on a run's ``link_samples.parquet`` and ``qdisc_samples.parquet``
    (or None): its violations (:class:`Overrun`, :class:`Shortfall`, :class:`CpuBound`), the
    CPU diagnosis as a note, and fidelity.json's ``links`` (configured and peak rate per
    direction) and ``invariants`` (whether qdisc samples judged the links, the loaded seconds
    judged, and every link direction found short of its rate while its queue covered it) as
    ``measured``. ``idle_min``: the lowest CPU idle during measured collectives; ``busiest``:
    '; busiest then: ...' over them."""
    links, found = overruns(samples) if samples is not None else ([], [])
    violations: list[Violation] = list(found)
    notes: list[str] = []
    judged = queues is not None and len(queues) > 0
    short, loaded_s = [], 0.0
    if judged:
        rows, loaded_s = judge(queues)
        short = shortfalls(rows, float(queues["time"].min()))
    violations += [Shortfall(
        f"{f['src']}->{f['dst']}",
        f"{f['src']}->{f['dst']} sent {f['worst_ratio']:.0%} of its "
        f"{f['capacity_mbit_s']:g} Mbit/s at {f['worst_at_s']:.1f} s while its queue would "
        f"have kept it busy ({f['periods']} such period(s), {f['seconds']:.1f} s in all)",
        f["worst_at_s"]) for f in short]
    low_cpu = idle_min is not None and idle_min < MIN_CPU_IDLE
    if low_cpu and not judged:
        violations.append(CpuBound(
            "machine", f"CPU idle fell to {idle_min:.0%} (below {MIN_CPU_IDLE:.0%}) during "
            "measured collectives and no qdisc samples show whether the links kept their "
            "rates" + busiest))
    elif low_cpu:
        if short:
            then = ": links short of their rate then may owe it to the CPU"
        elif loaded_s > 0:
            then = ("; every link still sent at its rate whenever its queue would have kept "
                    "it busy")
        else:
            then = ("; no link was ever loaded long enough to judge, so the machine, not the "
                    "links, may have set the pace")
        notes.append(f"CPU idle fell to {idle_min:.0%} during measured collectives{then}"
                     + busiest)
    return Judgement(judged or samples is not None or idle_min is not None, violations,
                     {"links": links,
                      "invariants": {"judged": judged,
                                     "sample_hz": sample_rate_hz(queues) if judged else None,
                                     "loaded_s": loaded_s, "violations": short}},
                     notes=notes)


class LinkInvariant(Invariant):
    """The link invariant (the module docstring), as fidelity.json has kept it since before
    the registry: its fields ``links`` and ``invariants``, its reasons unprefixed, every
    overrun named and the shortfalls after :data:`MAX_SENTENCES` counted."""

    name: ClassVar[str] = "link"
    checks: ClassVar[str] = ("every shaped link direction at its rate whenever its queue would "
                             "have kept it busy, and never above it; without qdisc samples, "
                             f"CPU idle at {MIN_CPU_IDLE:.0%} or more")

    def judge(self, evidence: Evidence) -> Judgement:
        return link_judgement(evidence.table("link_samples.parquet"),
                              evidence.table("qdisc_samples.parquet"),
                              evidence.extra.get("cpu_idle_min"),
                              evidence.extra.get("busiest", ""))

    def reasons(self, judgement: Judgement) -> list[str]:
        over = [v.sentence for v in judgement.violations if isinstance(v, Overrun)]
        short = [v.sentence for v in judgement.violations if isinstance(v, Shortfall)]
        cpu = [v.sentence for v in judgement.violations if isinstance(v, CpuBound)]
        more = ([f"... and {len(short) - MAX_SENTENCES} more link directions short of their "
                 "rate while loaded"] if len(short) > MAX_SENTENCES else [])
        return over + short[:MAX_SENTENCES] + more + cpu

    def notes(self, judgement: Judgement) -> list[str]:
        return list(judgement.notes)

    def fields(self, judgement: Judgement) -> dict[str, Any]:
        return judgement.measured

    def summary(self, fidelity: dict[str, Any]) -> str | None:
        return None  # the report's own first words (its evidence line) say what this judged


INVARIANT = LinkInvariant()
