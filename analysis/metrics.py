"""Metrics of one run: pure functions on the DataFrames of :class:`analysis.load.Run`.

Definitions (units: bytes, seconds, bit/s; the traces' ``algbw``/``busbw`` columns and
:func:`collective_table` are in GB/s = 1e9 bytes/s as nccl-tests reports them, the summaries
in Gbit/s, named ``*_gbit_s``):

- **Collective time** ``t`` is the *slowest* rank's time for that collective (nccl-tests);
  ``algbw = S/t``, ``busbw = algbw·2(n−1)/n`` for an All-Reduce and ``algbw·(n−1)/n`` for an
  all-to-all, whose ``S`` is each rank's buffer (:func:`collective_table`,
  :func:`testbed.core.formulas.busbw_factor`).
- **Headline size**: a job that ran several sizes is summarised at its largest one;
  every size is kept under ``sizes``.
- **Iteration time**: for an All-Reduce job, one iteration is one measured collective; for a
  DNN job it is the ``iteration time`` of its ``iterations-rank*.parquet`` (mean over ranks).
  Warm-up rows never count.
- **Slowdown** of job J: ``mean_s(J) / mean_s(S)`` where S is J's solo baseline (the job whose
  ``solo_of`` is J); JCT ratio when an iteration time is missing.
- **Link utilisation**: the rate between consecutive cumulative counter samples divided by the
  configured rate; a link direction's mean is over the run window (first job start to last job
  end), its peak the highest over any 0.5 s stretch in that window.
- **Dimension utilisation** (per rank, over the time the rank spent in measured collectives):
  ``active_fraction`` = fraction of that time the dimension had at least one phase in flight;
  ``bytes_util`` = bytes the rank sent on the dimension ÷ (B_d · t), the bytes as the trace
  recorded them (each phase's ``sent_bytes``: the collective's own count, so a collective
  that is not bandwidth-optimal is measured by what it sent), and ``B_d`` the dimension's
  configured per-host rate; ``link_util`` = mean
  utilisation of the fabric links of that dimension (kinds ``dim``/``ring``) over the run.
- **Fairness**: Jain's index ``(Σx)²/(n·Σx²)`` over the jobs that are not solo baselines, on
  ``x = 1/slowdown`` over those with a solo baseline when at least two have one (normalised
  progress, comparable across job sizes), else on ``x = busbw`` of the jobs that overlapped in
  time (jobs that ran one after another are not compared).
- **Speedup**: baseline ÷ Themis iteration time for each pair of jobs running the same
  workload on the same number of hosts.
- **Real-rate figures** (``*_real_s``, ``*_real_gbit_s``) of a run emulated at ``rate_scale``
  (:mod:`testbed.core.scaling`): collective times × rate_scale, bandwidths ÷ rate_scale, beside
  the emulated figure; the same numbers when the run was not scaled. A DNN iteration includes
  compute, which the scale does not stretch: its iteration times have none (None).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.load import Run, load_run
from testbed.core.algorithms import is_reference_schedule, is_schedule
from testbed.core.formulas import ALLREDUCE, ALLTOALL, busbw_factor
from testbed.core.scaling import with_real
from testbed.core.topology import FabricPlan, impairment_record

LEAF_SPINE_KINDS = ("uplink", "ocs-leaf", "ocs-spine")
DIM_LINK_KINDS = ("dim", "ring", "fc")
# A job's and a message size's figures that have a real-rate counterpart (testbed.core.scaling);
# a DNN job's iteration times (the first three) include compute, so theirs are None.
REAL_JOB_FIGURES = ("mean_s", "p50_s", "p99_s", "collective_s", "algbw_gbit_s", "busbw_gbit_s")
ITERATION_FIGURES = REAL_JOB_FIGURES[:3]
REAL_SIZE_FIGURES = ("collective_s", "algbw_gbit_s", "busbw_gbit_s")
COLLECTIVE_COLUMNS = ["job", "coll", "size", "world", "iteration", "warmup", "collective",
                      "algorithm",
                      "transport", "chunks", "ranks", "start", "end", "t", "algbw", "busbw",
                      "rank_algbw", "rank_busbw", "correct"]


# ---------------------------------------------------------------- collectives and jobs

def collective_table(collectives: pd.DataFrame) -> pd.DataFrame:
    """One row per measured ``(job, coll)``: every all-to-all (always out of place) and every
    in-place All-Reduce (the out-of-place pass `fabriclab allreduce` adds for its nccl-tests
    columns is left out). ``collective`` is its kind (``allreduce`` in traces older than the
    column); ``t`` = the slowest rank's time, ``algbw = size/t`` and ``busbw`` = algbw ×
    :func:`~testbed.core.formulas.busbw_factor` of the kind (2(n−1)/n, all-to-all (n−1)/n)
    in GB/s; ``rank_algbw``/``rank_busbw`` are the per-rank values averaged over ranks;
    ``start``/``end`` span every rank; ``correct`` = all ranks correct."""
    kinds = [k if isinstance(k, str) else ALLREDUCE
             for k in collectives.get("collective", pd.Series([None] * len(collectives)))]
    collectives = collectives.assign(collective=kinds)
    if "in_place" in collectives:  # out of place: only `fabriclab allreduce`'s second pass
        keep = collectives["in_place"].astype(object).fillna(True).astype(bool)
        collectives = collectives[keep | (collectives["collective"] == ALLTOALL)]
    if collectives.empty:
        return pd.DataFrame(columns=COLLECTIVE_COLUMNS)
    c = collectives.assign(end=collectives["start"] + collectives["time"])
    g = c.groupby(["job", "coll"], sort=True)
    out = g.agg(
        size=("size", "max"), world=("world", "max"), iteration=("iteration", "first"),
        warmup=("warmup", "any"), collective=("collective", "first"),
        algorithm=("algorithm", "first"),
        transport=("transport", "first"), chunks=("chunks", "first"),
        ranks=("rank", "nunique"), start=("start", "min"), end=("end", "max"),
        t=("time", "max"), rank_algbw=("algbw", "mean"), rank_busbw=("busbw", "mean"),
        correct=("correct", "all"),
    ).reset_index()
    t = out["t"].where(out["t"] > 0)
    out["algbw"] = out["size"] / t / 1e9
    out["busbw"] = out["algbw"] * [busbw_factor(float(n), k)
                                   for n, k in zip(out["world"], out["collective"], strict=True)]
    return out[COLLECTIVE_COLUMNS]


def _bandwidths(colls: pd.DataFrame) -> tuple[float | None, float | None]:
    """(algbw, busbw) in Gbit/s: bytes over the mean time, i.e. total bytes ÷ total time of
    these collectives (not the mean of per-collective rates), as nccl-tests averages."""
    t = float(colls["t"].sum()) if len(colls) else 0.0
    if t <= 0:
        return None, None
    algbw_gbit_s = float(colls["size"].sum()) * 8 / t / 1e9
    n = float(colls["world"].max())
    kind = str(colls["collective"].iloc[0]) if "collective" in colls else ALLREDUCE
    return _num(algbw_gbit_s), _num(algbw_gbit_s * busbw_factor(n, kind))


def _stats(values: Iterable[float]) -> dict[str, float | None]:
    x = np.asarray([v for v in values if v == v], dtype=float)
    if not x.size:
        return {"mean": None, "p50": None, "p99": None}
    return {"mean": float(x.mean()), "p50": float(np.percentile(x, 50)),
            "p99": float(np.percentile(x, 99))}


def _num(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def mean_of(values: Iterable[Any]) -> float | None:
    """Arithmetic mean of the values that are numbers (None, NaN and text skipped)."""
    v = [x for x in (_num(x) for x in values) if x is not None]
    return sum(v) / len(v) if v else None


def geomean(values: Iterable[Any]) -> float | None:
    """Geometric mean of the positive numbers among ``values`` (the mean of ratios)."""
    v = [x for x in (_num(x) for x in values) if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


# Workloads measured by training iterations (their iteration traces) rather than collectives.
ITERATION_KINDS = ("dnn", "training", "command")


def _workload_kind(job: dict[str, Any]) -> str:
    w = job.get("workload")
    return str(w.get("kind", "allreduce")) if isinstance(w, dict) else "allreduce"


def exposed_per_dim(iterations: pd.DataFrame) -> list[float] | None:
    """Mean exposed communication per logical dimension over ``iterations`` (and ranks), or
    None when the rows do not break it down (not a training workload)."""
    if "exposed_dim_s" not in iterations:
        return None
    lists = [list(v) for v in iterations["exposed_dim_s"] if v is not None and len(v)]
    if not lists or len({len(v) for v in lists}) != 1:
        return None
    return [float(x) for x in np.mean(np.asarray(lists, dtype=float), axis=0)]


def _workload_model(job: dict[str, Any]) -> str | None:
    """The model a DNN or training job runs (a training job's workload file, if no model)."""
    w = job.get("workload")
    if not isinstance(w, dict):
        return None
    return w.get("model") or w.get("file")


def fabric_label(fabric: Any) -> str | None:
    """A short description of a spec's ``fabric`` block: its kind and shape (a multidim
    fabric's sizes, kinds and rates), which tells runs of different systems apart."""
    if not isinstance(fabric, dict):
        return None
    if fabric.get("kind") == "multidim":
        dims = fabric.get("dims") or []
        return "multidim " + " x ".join(
            f"{d.get('size')} {d.get('kind', 'switch')} {float(d.get('mbit_s', 0)) / 1e3:.4g} "
            "Gbit/s"
            for d in dims)
    keys = ("leaves", "spines", "hosts_per_leaf", "host_link_mbit_s", "uplink_mbit_s")
    return f"{fabric.get('kind')} " + ", ".join(f"{k} {fabric[k]}" for k in keys if k in fabric)


def job_metrics(run: Run) -> pd.DataFrame:
    """One row per job (index = job name) with the per-job keys of :func:`summarise`."""
    colls = collective_table(run.collectives)
    rows = []
    for job in run.jobs:
        name = str(job["name"])
        jc = colls[(colls["job"] == name) & ~colls["warmup"].astype(bool)]
        kind = _workload_kind(job)
        row: dict[str, Any] = {
            "job": name,
            "hosts": list(job.get("hosts") or []),
            "policy": job.get("policy"),
            "spines": list(job.get("spines") or []),
            "circuits": list(job.get("circuits") or []),
            "algorithm": job.get("algorithm") or (jc["algorithm"].iloc[0] if len(jc) else None),
            "order": job.get("order"),
            "transport": job.get("transport") or (jc["transport"].iloc[0] if len(jc) else None),
            "workload": kind,
            "model": _workload_model(job),
            "status": job.get("status"),
            "solo_of": job.get("solo_of"),
            "world": int(jc["world"].max()) if len(jc) else len(job.get("hosts") or []) or None,
            "correct": bool(jc["correct"].all()) if len(jc) else None,
        }
        sizes = {}
        for size, grp in jc.groupby("size", sort=True):
            algbw, busbw = _bandwidths(grp)
            sizes[int(size)] = with_real(
                {"iterations": len(grp), "collective_s": _stats(grp["t"])["mean"],
                 "algbw_gbit_s": algbw, "busbw_gbit_s": busbw}, REAL_SIZE_FIGURES, run.rate_scale)
        row["sizes"] = sizes
        head = jc[jc["size"] == jc["size"].max()] if len(jc) else jc
        row["size_bytes"] = int(head["size"].iloc[0]) if len(head) else None
        by_iteration = kind in ITERATION_KINDS
        row["collective_s"] = _stats((jc if by_iteration else head)["t"])["mean"]
        row["algbw_gbit_s"], row["busbw_gbit_s"] = _bandwidths(jc if by_iteration else head)
        row["exposed_comm_s"] = row["compute_share"] = row["exposed_dim_s"] = None
        if by_iteration:
            it = run.iterations[(run.iterations["job"] == name)
                                & ~run.iterations["warmup"].astype(bool)]
            per_iter = it.groupby("iteration")[["iteration_s", "exposed_comm_s",
                                                "compute_share"]].mean()
            st = _stats(per_iter["iteration_s"]) if len(per_iter) else _stats([])
            row["iterations"] = len(per_iter)
            row["exposed_comm_s"] = _num(per_iter["exposed_comm_s"].mean()) if len(it) else None
            row["compute_share"] = _num(per_iter["compute_share"].mean()) if len(it) else None
            row["exposed_dim_s"] = exposed_per_dim(it)
            if kind == "command" and len(per_iter):
                _command_bandwidths(row, it, per_iter["iteration_s"])
        else:
            st = _stats(head["t"])
            row["iterations"] = len(head)
        row["mean_s"], row["p50_s"], row["p99_s"] = st["mean"], st["p50"], st["p99"]
        start, end = _num(job.get("start")), _num(job.get("end"))
        row["jct_s"] = end - start if start is not None and end is not None else None
        row["start"], row["end"] = start, end
        rows.append(with_real(row, REAL_JOB_FIGURES, run.rate_scale,
                              none=ITERATION_FIGURES if by_iteration else ()))
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df = df.set_index("job", drop=False)
    df["slowdown"] = [slowdown(df, name) for name in df.index]
    return df


def jobs_frame(summary: dict[str, Any]) -> pd.DataFrame:
    """A summary's jobs (:data:`JOB_KEYS`) as a DataFrame indexed by job name, the shape of
    :func:`job_metrics`, for reading a run's numbers back from its ``summary.json``."""
    jobs = summary.get("jobs") or {}
    df = pd.DataFrame([{"job": name, **{k: job.get(k) for k in JOB_KEYS}}
                       for name, job in jobs.items()], columns=["job", *JOB_KEYS])
    return df.set_index("job", drop=False) if len(df) else df


def run_jobs(run: Run) -> pd.DataFrame:
    """The run's per-job figures: its summary's (:func:`jobs_frame`), else computed."""
    return jobs_frame(run.summary) if run.summary is not None else job_metrics(run)


def _command_bandwidths(row: dict[str, Any], it: pd.DataFrame, times: pd.Series) -> None:
    """A command job whose iterations report ``bytes``: nccl-tests All-Reduce bandwidths, as
    if each iteration were one All-Reduce of those bytes (what a peer such as
    ``workloads/examples/gloo_allreduce.py`` does; for a training step it is a lower bound)."""
    sizes = pd.to_numeric(it.get("bytes"), errors="coerce").dropna() if "bytes" in it else []
    if not len(sizes) or not row.get("world"):
        return
    size, t = float(sizes.max()), float(times.sum())
    if t <= 0:
        return
    algbw = size * len(times) * 8 / t / 1e9
    row["size_bytes"] = int(size)
    row["algbw_gbit_s"] = _num(algbw)
    row["busbw_gbit_s"] = _num(algbw * busbw_factor(float(row["world"])))


def slowdown(jobs: pd.DataFrame, name: str) -> float | None:
    """``name``'s iteration time over its solo baseline's (the job whose ``solo_of`` is
    ``name``); the JCT ratio if either iteration time is missing; None without a baseline."""
    solo = jobs[jobs["solo_of"] == name]
    if solo.empty:
        return None
    me, base = jobs.loc[name], solo.iloc[0]
    for key in ("mean_s", "jct_s"):
        a, b = _num(me[key]), _num(base[key])
        if a is not None and b:
            return a / b
    return None


def jain(values: Iterable[float]) -> float | None:
    """Jain's fairness index ``(Σx)²/(n·Σx²)``: 1 when all equal, 1/n when one has all."""
    x = np.asarray([v for v in values if v is not None and v == v], dtype=float)
    if not x.size or not np.any(x):
        return None
    return float(x.sum() ** 2 / (x.size * np.square(x).sum()))


def fairness(jobs: pd.DataFrame) -> tuple[float | None, str | None]:
    """Jain's index across the tenant jobs (those that are not solo baselines) and its basis:
    on ``1/slowdown`` over the tenants that have a solo baseline when at least two do (their
    normalised progress, comparable across job sizes), else on ``busbw`` over the tenants that
    overlapped in time;
    (None, None) when neither gives two values."""
    if jobs.empty:
        return None, None
    tenants = jobs[[not isinstance(v, str) for v in jobs["solo_of"]]]
    sd = [v for v in (_num(x) for x in tenants["slowdown"]) if v]
    if len(sd) >= 2:
        return jain(1 / v for v in sd), "1/slowdown"
    together = _concurrent(tenants)
    bw = [v for v in (_num(x) for x in together["busbw_gbit_s"]) if v is not None]
    if len(bw) >= 2:
        return jain(bw), "busbw"
    return None, None


def _concurrent(jobs: pd.DataFrame) -> pd.DataFrame:
    """The jobs whose [start, end] overlaps another job's (all of them if times are missing):
    fairness compares jobs that shared the fabric, not ones that ran one after another."""
    spans = {n: (_num(r["start"]), _num(r["end"])) for n, r in jobs.iterrows()}
    if any(s is None or e is None for s, e in spans.values()):
        return jobs
    keep = [n for n, (s, e) in spans.items()
            if any(m != n and s < e2 and s2 < e for m, (s2, e2) in spans.items())]
    return jobs.loc[keep]


def _workload_key(job: dict[str, Any]) -> str:
    w = {k: v for k, v in (job.get("workload") or {}).items()}
    return json.dumps([w, len(job.get("hosts") or [])], sort_keys=True, default=str)


def speedups(run: Run, jobs: pd.DataFrame) -> dict[str, Any] | None:
    """Chunk-schedule speedup (baseline ÷ the other's iteration time) for every job under a
    schedule other than the reference (Themis, or any registered one) that has a job under
    the reference schedule (the baseline) with the same workload and host count (solo
    baselines excluded when other jobs exist); a pair's ``baseline`` and ``themis`` name the
    two jobs; ``mean`` is the geometric mean; None when no pair exists."""
    if jobs.empty:
        return None
    by = {str(j["name"]): j for j in run.jobs}
    cand = [n for n in jobs.index if not isinstance(jobs.loc[n, "solo_of"], str)]
    cand = cand or list(jobs.index)
    algorithm = {n: jobs.loc[n, "algorithm"] for n in cand}
    base = [n for n in cand if is_reference_schedule(algorithm[n])]
    pairs, used = [], set()
    for t in (n for n in cand if is_schedule(algorithm[n])
              and not is_reference_schedule(algorithm[n])):
        key = _workload_key(by[t])
        match = next((b for b in base if b not in used and _workload_key(by[b]) == key), None)
        if match is None:
            match = next((b for b in base if _workload_key(by[b]) == key), None)
        bt, tt = _num(jobs.loc[match, "mean_s"]) if match else None, _num(jobs.loc[t, "mean_s"])
        if match and bt and tt:
            used.add(match)
            pairs.append({"baseline": match, "themis": t, "baseline_s": bt,
                          "baseline_real_s": _num(jobs.loc[match, "mean_real_s"]),
                          "themis_s": tt, "themis_real_s": _num(jobs.loc[t, "mean_real_s"]),
                          "speedup": bt / tt})
    if not pairs:
        return None
    return {"pairs": pairs, "mean": geomean(p["speedup"] for p in pairs)}


# ---------------------------------------------------------------- links

def _directions(samples: pd.DataFrame) -> Iterable[tuple[tuple, pd.DataFrame]]:
    yield from samples.sort_values("time").groupby(["link", "src", "dst"], sort=True)


def _counter(g: pd.DataFrame) -> np.ndarray:
    """The cumulative counter with dips (a probe that read 0 once) flattened out."""
    return np.maximum.accumulate(g["bytes"].to_numpy(dtype=float))


def link_rates(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per link direction and sample interval: ``t0``, ``t1``, ``bps`` (achieved bit/s)
    and ``util`` = bps ÷ configured rate."""
    parts = []
    for (link, src, dst), g in _directions(samples):
        t = g["time"].to_numpy(dtype=float)
        if t.size < 2:
            continue
        b = _counter(g)
        dt = np.diff(t)
        bps = np.where(dt > 0, np.diff(b) * 8 / np.where(dt > 0, dt, 1), np.nan)
        cap = float(g["capacity_mbit_s"].iloc[0]) * 1e6
        parts.append(pd.DataFrame({"link": link, "src": src, "dst": dst, "t0": t[:-1],
                                   "t1": t[1:], "bps": bps, "util": bps / cap if cap else np.nan}))
    cols = ["link", "src", "dst", "t0", "t1", "bps", "util"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def _peak_rate(t: np.ndarray, b: np.ndarray, span: float) -> float:
    """Highest rate (bit/s) over any stretch of at least ``span`` seconds between samples
    (the whole series if it is shorter)."""
    if t[-1] - t[0] <= span:
        return float((b[-1] - b[0]) * 8 / (t[-1] - t[0]))
    j = np.searchsorted(t, t + span - 1e-9)
    ok = j < t.size
    i, j = np.nonzero(ok)[0], j[ok]
    return float(((b[j] - b[i]) * 8 / (t[j] - t[i])).max())


def link_utilisation(samples: pd.DataFrame, window: tuple[float, float] | None = None,
                     peak_window: float = 0.5) -> pd.DataFrame:
    """Per link direction (``src→dst``): configured ``capacity_mbit_s``, ``mean_util``
    over ``window`` (counter difference between the first and last sample in it) and
    ``peak_util``, the highest utilisation over any ``peak_window`` seconds inside it
    (single 0.1 s sample intervals are dominated by bursts and sampling jitter and can
    exceed 1)."""
    rows = []
    for (link, src, dst), g in _directions(samples):
        t, b = g["time"].to_numpy(dtype=float), _counter(g)
        inside = (t >= window[0]) & (t <= window[1]) if window else np.ones(t.size, bool)
        ti, bi = t[inside], b[inside]
        cap = float(g["capacity_mbit_s"].iloc[0]) * 1e6
        mean = peak = None
        if ti.size >= 2 and cap and ti[-1] > ti[0]:
            mean = (bi[-1] - bi[0]) * 8 / (ti[-1] - ti[0]) / cap
            peak = _peak_rate(ti, bi, peak_window) / cap
        rows.append({"key": f"{src}→{dst}", "link": link, "src": src, "dst": dst,
                     "capacity_mbit_s": cap / 1e6, "mean_util": mean, "peak_util": peak})
    cols = ["key", "link", "src", "dst", "capacity_mbit_s", "mean_util", "peak_util"]
    return pd.DataFrame(rows, columns=cols)


def link_util_bins(samples: pd.DataFrame, edges: np.ndarray) -> pd.DataFrame:
    """Utilisation of every link direction in each time bin (rows ``src→dst``, one column per
    bin), from the cumulative counters interpolated at the bin edges."""
    rows, index = [], []
    for (_link, src, dst), g in _directions(samples):
        cap = float(g["capacity_mbit_s"].iloc[0]) * 1e6
        t = g["time"].to_numpy(dtype=float)
        cum = np.interp(edges, t, _counter(g))
        rows.append(np.diff(cum) * 8 / np.diff(edges) / cap if cap else np.full(len(edges) - 1,
                                                                                np.nan))
        index.append(f"{src}→{dst}")
    return pd.DataFrame(rows, index=index, columns=(edges[:-1] + edges[1:]) / 2)


def _link_kinds(topology: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{link name: topology link dict}, the name as the fabric plan spells it."""
    out = {}
    for lk in topology.get("links", []):
        out[f"{lk['a']}:{lk['a_port']}-{lk['b']}:{lk['b_port']}"] = lk
    return out


def leaf_spine_samples(samples: pd.DataFrame, topology: dict[str, Any]) -> pd.DataFrame:
    """The samples of the leaf↔spine (and leaf↔OCS↔spine) link directions."""
    kinds = _link_kinds(topology)
    names = [n for n, lk in kinds.items() if lk.get("kind") in LEAF_SPINE_KINDS]
    return samples[samples["link"].isin(names)]


def dimension_link_samples(samples: pd.DataFrame, topology: dict[str, Any]
                           ) -> dict[int, pd.DataFrame]:
    """{dimension: samples of its links} for links of kind ``dim``/``ring``."""
    by_dim: dict[int, list[str]] = {}
    for name, lk in _link_kinds(topology).items():
        if lk.get("kind") in DIM_LINK_KINDS and lk.get("dim") is not None:
            by_dim.setdefault(int(lk["dim"]), []).append(name)
    return {d: samples[samples["link"].isin(names)] for d, names in sorted(by_dim.items())}


# ---------------------------------------------------------------- dimensions

def dim_bandwidths(run: Run) -> dict[int, float]:
    """A host's configured rate (bit/s) in every logical dimension of the run's jobs, as each
    job's contract records it (``dim_host_rates_bps``; on a fully connected dimension the
    host's total over its links); the slowest where jobs differ. A run without a fabric (a
    loopback job) has none: its rates only weigh its dimensions against each other."""
    out: dict[int, float] = {}
    if not run.topology:
        return out
    for job in run.resolved.values():
        for d, rate_bps in enumerate(job.dim_host_rates_bps):
            out[d] = min(out.get(d, math.inf), rate_bps)
    return out


def phase_sent(phases: pd.DataFrame) -> np.ndarray:
    """Bytes each phase row's rank sent, as its worker or the simulator recorded it
    (``sent_bytes``: the collective's own count); NaN where a trace older than that column
    does not say."""
    if "sent_bytes" not in phases:
        return np.full(len(phases), np.nan)
    return pd.to_numeric(phases["sent_bytes"], errors="coerce").to_numpy(dtype=float)


def _merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as disjoint sorted intervals."""
    if not len(starts):
        return np.empty(0), np.empty(0)
    order = np.argsort(starts)
    s, e = np.asarray(starts, float)[order], np.asarray(ends, float)[order]
    out_s, out_e = [s[0]], [e[0]]
    for a, b in zip(s[1:], e[1:], strict=True):
        if a <= out_e[-1]:
            out_e[-1] = max(out_e[-1], b)
        else:
            out_s.append(a)
            out_e.append(b)
    return np.array(out_s), np.array(out_e)


def _covered(edges: np.ndarray, s: np.ndarray, e: np.ndarray,
             weight: np.ndarray | None = None) -> np.ndarray:
    """Per bin: the length of [s, e) intervals inside it, or with ``weight`` the weight spread
    uniformly over each interval."""
    if not len(s):
        return np.zeros(len(edges) - 1)
    dur = np.maximum(e - s, 1e-12)
    cum = np.clip(edges[:, None] - s[None, :], 0, dur[None, :])
    cum = (cum / dur[None, :]) * weight[None, :] if weight is not None else cum
    return np.diff(cum.sum(axis=1))


def _measured(run: Run) -> pd.DataFrame:
    """The measured (not warm-up) phase rows, each with the bytes its rank sent (``sent``)."""
    ph = run.phases[~run.phases["warmup"].astype(bool)]
    return ph.assign(sent=phase_sent(ph))


def dimension_activity(run: Run) -> pd.DataFrame:
    """One row per ``(job, rank, dim)`` over the rank's measured collectives: ``window_s``
    (time in collectives), ``active_fraction``, ``sent`` bytes and ``bytes_util``."""
    ph = _measured(run)
    cols = ["job", "rank", "dim", "window_s", "active_fraction", "sent", "bytes_util"]
    if ph.empty:
        return pd.DataFrame(columns=cols)
    bw = dim_bandwidths(run)
    co = run.collectives[~run.collectives["warmup"].astype(bool)]
    rows = []
    for (job, rank), g in ph.groupby(["job", "rank"], sort=True):
        c = co[(co["job"] == job) & (co["rank"] == rank)]
        if len(c):
            ws, we = _merge(c["start"].to_numpy(), (c["start"] + c["time"]).to_numpy())
        else:
            ws, we = _merge(g["start"].to_numpy(), g["end"].to_numpy())
        window = float((we - ws).sum())
        for dim, gd in g.groupby("dim", sort=True):
            s, e = _merge(gd["start"].to_numpy(), gd["end"].to_numpy())
            active = float((e - s).sum())
            sent = float(gd["sent"].sum(min_count=1))
            b = bw.get(int(dim))
            rows.append({"job": job, "rank": int(rank), "dim": int(dim), "window_s": window,
                         "active_fraction": active / window if window else None,
                         "sent": sent,
                         "bytes_util": sent * 8 / (b * window) if b and window else None})
    return pd.DataFrame(rows, columns=cols)


def _hosts_of(run: Run) -> dict[tuple[str, int], str]:
    return {(name, r): h for name, job in run.resolved.items() for r, h in enumerate(job.hosts)}


def dimension_timeline(run: Run, edges: np.ndarray) -> pd.DataFrame:
    """Per time bin (index = bin centre, monotonic seconds) and dimension: ``active`` = mean
    over the hosts that use the dimension of the fraction of the bin it had a phase in flight,
    ``bytes`` = bytes sent on it ÷ (hosts · B_d · bin); columns are ``(metric, dim)``."""
    ph = _measured(run)
    centres = (edges[:-1] + edges[1:]) / 2
    if ph.empty:
        return pd.DataFrame(index=centres)
    hosts = _hosts_of(run)
    ph = ph.assign(host=[hosts.get((j, int(r)), f"{j}#{r}")
                         for j, r in zip(ph["job"], ph["rank"], strict=True)])
    bw = dim_bandwidths(run)
    width = np.diff(edges)
    data = {}
    for dim, g in ph.groupby("dim", sort=True):
        active = np.zeros(len(centres))
        nbytes = np.zeros(len(centres))
        units = g["host"].unique()
        for _, gh in g.groupby("host"):
            s, e = _merge(gh["start"].to_numpy(), gh["end"].to_numpy())
            active += _covered(edges, s, e)
            nbytes += _covered(edges, gh["start"].to_numpy(dtype=float),
                               gh["end"].to_numpy(dtype=float), gh["sent"].to_numpy(dtype=float))
        data[("active", int(dim))] = active / width / len(units)
        b = bw.get(int(dim))
        data[("bytes", int(dim))] = (nbytes * 8 / (b * width * len(units)) if b
                                     else np.full(len(centres), np.nan))
    return pd.DataFrame(data, index=centres)


def dimension_link_timeline(run: Run, edges: np.ndarray) -> pd.DataFrame:
    """Per time bin, the mean utilisation of each dimension's links (columns = dims)."""
    out = {}
    for d, s in dimension_link_samples(run.links, run.topology).items():
        if len(s):
            out[d] = link_util_bins(s, edges).mean(axis=0).to_numpy()
    return pd.DataFrame(out, index=(edges[:-1] + edges[1:]) / 2)


def dimension_summary(run: Run) -> dict[str, dict[str, float | None]]:
    """Per dimension: mean ``active_fraction`` and ``bytes_util`` over every (job, rank) that
    used it, and ``link_util`` of its links over the run window."""
    act = dimension_activity(run)
    out: dict[str, dict[str, float | None]] = {}
    for dim, g in act.groupby("dim", sort=True):
        out[str(int(dim))] = {"active_fraction": _num(g["active_fraction"].astype(float).mean()),
                              "bytes_util": _num(g["bytes_util"].astype(float).mean()),
                              "link_util": None}
    window = run.window()
    for d, s in dimension_link_samples(run.links, run.topology).items():
        if s.empty:
            continue
        u = link_utilisation(s, window)["mean_util"].astype(float)
        entry = out.setdefault(str(d), {"active_fraction": None, "bytes_util": None})
        entry["link_util"] = _num(u.mean())
    return out


# ---------------------------------------------------------------- the summary

def run_status(run: Run) -> str:
    """``failed`` if any job failed, ``incomplete`` if any did not finish, ``empty`` without
    jobs, else ``ok``."""
    states = [j.get("status") for j in run.jobs]
    if not states:
        return "empty"
    if "failed" in states:
        return "failed"
    if any(s != "ok" for s in states):
        return "incomplete"
    return "ok"


def _clean(x: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, np.bool_ | bool):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        return float(x) if math.isfinite(x) else None
    if x is pd.NA or x is pd.NaT:
        return None
    return x


JOB_KEYS = ("hosts", "policy", "spines", "circuits", "algorithm", "order", "transport",
            "workload", "model",
            "status", "solo_of", "world", "size_bytes", "iterations", "mean_s", "mean_real_s",
            "p50_s", "p50_real_s", "p99_s", "p99_real_s", "collective_s", "collective_real_s",
            "algbw_gbit_s", "algbw_real_gbit_s", "busbw_gbit_s", "busbw_real_gbit_s", "jct_s",
            "slowdown", "exposed_comm_s", "exposed_dim_s", "compute_share", "correct", "sizes")


def summarise(run: Run | str | Path) -> dict[str, Any]:
    """The stable machine-readable result of a run (what ``summary.json`` holds)::

        {"run", "label", "rate_scale", "status", "jobs": {name: {JOB_KEYS...}},
         "dimensions": {d: {active_fraction, bytes_util, link_util}},
         "links": {"src→dst": {mean_util, peak_util}}, "fairness", "fairness_basis",
         "speedup": {"pairs": [...], "mean"} | None, "fidelity": {verdict, reasons} | None}

    Every key with a unit names it (``_s``, ``_bytes``, ``_gbit_s``); utilisations and
    ratios are fractions; missing values are None. Figures are emulated; the ``*_real_*``
    keys beside them are at the real rates, ``rate_scale`` the factor between the two.
    ``docs/results.md`` lists every key.
    """
    if not isinstance(run, Run):
        run = load_run(run)
    jobs = job_metrics(run)
    record = run.record or {}
    not_modelled = list(record.get("not_modelled") or [])
    fair, basis = fairness(jobs)
    links = link_utilisation(run.links, run.window())
    fid = run.fidelity
    out = {
        "run": run.name,
        "label": run.label,
        "rate_scale": run.rate_scale,
        # the links' configured delay, jitter and loss, in both units, where any has some
        **({"link_impairments": imp} if (imp := link_impairments(run.topology)) else {}),
        "preset": run.spec.get("preset"),
        "fabric": fabric_label(run.spec.get("fabric")),
        # as the runner recorded it (run.json); derived from the jobs for older runs
        "status": record.get("status") or run_status(run),
        "error": record.get("error"),
        "jobs": {name: _as_recorded({k: row[k] for k in JOB_KEYS}, not_modelled)
                 for name, row in jobs.iterrows()},
        "dimensions": dimension_summary(run),
        "links": {r.key: {"mean_util": r.mean_util, "peak_util": r.peak_util}
                  for r in links.itertuples()},
        "fairness": fair,
        "fairness_basis": basis,
        "speedup": speedups(run, jobs),
        "fidelity": ({"verdict": fid.get("verdict"), "reasons": list(fid.get("reasons") or [])}
                     if fid else None),
        # what the backend recorded of itself: the emulator's controller restarts and
        # teardown leftovers, what the simulator does not model
        **{k: record[k] for k in RUN_FACTS if k in record},
    }
    return _clean(out)


RUN_FACTS = ("controller_restarts", "leftovers", "not_modelled", "servers")


def link_impairments(topology: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The delay, jitter and loss a run's links were configured with, per link class and
    per overridden link (:func:`testbed.core.topology.impairment_record`); empty when every
    link of its ``topology.json`` is a perfect wire (every run before links had them)."""
    links = topology.get("links") or []
    if not any(lk.get(f) for lk in links for f in ("delay_us", "jitter_us", "loss")):
        return {}
    return impairment_record(FabricPlan.from_dict(topology))


def _as_recorded(job: dict[str, Any], not_modelled: list[str]) -> dict[str, Any]:
    """A job's summary as far as the backend measured it: what it does not model is not a
    result (a simulation moves no data, so nothing is checked; every transport takes the
    same time)."""
    if "correctness" in not_modelled:
        job["correct"] = None
    if "transport" in not_modelled and job.get("transport"):
        job["transport"] = f"{job['transport']} (not simulated)"
    return job
