"""The switch invariant: a switch reads every packet that reaches its ports as it arrives.

The sampler reads, at the qdisc rate, how many bytes wait unread in each Open vSwitch port's
receive queue (:mod:`testbed.emulator.switch_queues`: ``held_bytes`` per link direction into
a switch, ``switch_samples.parquet``). A switch that keeps up reads each packet microseconds
after it arrives, so its queues are empty at almost every sample; one that falls behind holds
packets there, adding their wait to every hop, and drops what arrives once a queue fills its
socket buffer. What a held packet costs the job is the time it waits, so the judged figure is
the share of samples in which a port held bytes, taken while jobs communicate: the time is
cut into stretches holding :data:`~analysis.sched_invariant.STRETCH_S` seconds of
communication, as the scheduler invariant's are, and a port that held packets in more than
:data:`HELD_SHARE_MAX` of a stretch's samples is a violation. Consecutive violating stretches
of one port are reported as one.

Measured on 2026-11-26 (BENCHMARKS.md, "The switch invariant"), the worst port per stretch of
collectives: a quiet machine 2-6 % (at most one 64 KiB segment waiting); beside three busy
loops at 100 Mbit/s 15-36 %, and ovs-vswitchd held to 0.15 of a core 15-39 %, both filling
the socket buffer (about 260 KB), so the kernel dropped what arrived.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.sched_invariant import STRETCH_S, Spans, cut, merged, stretches

HELD_SHARE_MAX = 0.10  # of a stretch's samples: the job's allowance below its links' goodput
MIN_SAMPLES = 10  # a port with fewer samples than this in a stretch is not judged there

VIOLATION_COLUMNS = ["switch", "link", "src", "start", "end", "span_s", "comm_s",
                     "held_share", "max_held_bytes", "samples"]


def _stretch_of(times: np.ndarray, spans: Spans, groups: list[list[int]]) -> np.ndarray:
    """Per sample time, the index of the stretch (of ``groups`` over ``spans``) it falls in,
    or -1 outside every span."""
    if not spans:
        return np.full(len(times), -1)
    edges = np.array([x for span in spans for x in span])
    pos = np.searchsorted(edges, times, side="right")
    inside = pos % 2 == 1
    span_of = np.where(inside, (pos - 1) // 2, 0)
    group_of_span = np.empty(len(spans), dtype=int)
    for g, idx in enumerate(groups):
        group_of_span[idx] = g
    return np.where(inside, group_of_span[span_of], -1)


def held_share(samples: pd.DataFrame, spans: Spans) -> float | None:
    """The largest share of its samples within ``spans`` in which one port held bytes for the
    switch (None when no port was sampled MIN_SAMPLES times in them)."""
    spans = merged(spans)
    if samples.empty or not spans:
        return None
    shares = []
    for _, g in samples.groupby(["link", "src", "dst"], sort=False):
        where = _stretch_of(g["time"].to_numpy(), spans, [list(range(len(spans)))])
        held = g["held_bytes"].to_numpy()[where == 0]
        if held.size >= MIN_SAMPLES:
            shares.append(float((held > 0).mean()))
    return max(shares, default=None)


def judge(samples: pd.DataFrame, communicating: Spans, *, share_max: float = HELD_SHARE_MAX,
          stretch_s: float = STRETCH_S) -> tuple[pd.DataFrame, float]:
    """Every stretch of ``communicating`` (any job's measured collectives) in which a switch
    port held bytes in more than ``share_max`` of its samples, merged per port
    (:data:`VIOLATION_COLUMNS`; ``switch``: the switch the port belongs to, ``src``: where its
    packets came from), and the seconds of communication judged."""
    if samples.empty:
        return pd.DataFrame([], columns=VIOLATION_COLUMNS), 0.0
    t_min, t_max = float(samples["time"].min()), float(samples["time"].max())
    spans = cut([(max(a, t_min), min(b, t_max)) for a, b in merged(communicating)
                 if b > t_min and a < t_max], stretch_s)
    groups = stretches(spans, stretch_s)
    comm = np.array([b - a for a, b in spans])
    rows: list[dict] = []
    for (link, src, dst), g in samples.sort_values("time").groupby(["link", "src", "dst"],
                                                                    sort=True):
        where = _stretch_of(g["time"].to_numpy(), spans, groups)
        held = g["held_bytes"].to_numpy()
        current: dict | None = None
        for k, idx in enumerate(groups):
            h = held[where == k]
            share = float((h > 0).mean()) if h.size >= MIN_SAMPLES else 0.0
            if share <= share_max:
                current = None
                continue
            start, end, comm_s = spans[idx[0]][0], spans[idx[-1]][1], float(comm[idx].sum())
            if current is not None:
                current.update(end=end, comm_s=current["comm_s"] + comm_s,
                               held_share=max(current["held_share"], share),
                               max_held_bytes=max(current["max_held_bytes"], int(h.max())),
                               samples=current["samples"] + int(h.size))
                continue
            current = {"switch": dst, "link": link, "src": src, "start": start, "end": end,
                       "comm_s": comm_s, "held_share": share, "max_held_bytes": int(h.max()),
                       "samples": int(h.size)}
            rows.append(current)
    out = pd.DataFrame(rows, columns=VIOLATION_COLUMNS)
    out["span_s"] = out["end"] - out["start"]
    return out, float(comm.sum())
