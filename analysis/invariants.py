"""Link invariants: did every shaped link send at its configured rate whenever traffic waited
for it? (The check Mininet-HiFi makes of an emulation, here on sampled qdisc statistics.)

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

import numpy as np
import pandas as pd

from testbed.core.formulas import RATE_TOLERANCE

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
