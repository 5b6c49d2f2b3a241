"""A sweep's results: one table of every run, and means with 95% confidence intervals over
seeds (runs that differ in nothing but the seed are one group)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from testbed.core.atomic import write_bytes, write_text

# Where each point's jobs went, beside every average: the averages are over the jobs that ran.
COUNTS = ("jobs_in_trace", "jobs_completed", "refused_unshapeable", "dropped_too_large")
# The same averages over only the jobs every point simulating the same jobs completed.
COMMON = ("jobs_common", "avg_jct_common_s", "avg_slowdown_common")
METRICS = ("avg_jct_s", "p99_jct_s", "avg_wait_s", "avg_slowdown", "makespan_s",
           "gpu_utilisation")
# How a run went on the machine that ran it, not what it simulated: these differ from one
# run of the same point to the next (summary.json's wall_s, rss_start_bytes, peak_rss_bytes).
MEASURED = ("wall_s", "rss_start_bytes", "peak_rss_bytes")
# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z95 = 1.959964


def t95(dof: int) -> float:
    """Student's t two-sided 95% quantile (a table to 30, a Cornish-Fisher expansion above)."""
    if dof <= len(T95):
        return T95[dof - 1]
    z = Z95
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def results_frame(runs: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]]
                  ) -> pd.DataFrame:
    """One row per run from (key, parameters, summary): ``point``, the parameters, then the
    summary's keys that are not parameters (units in their names, as summary.json has them)."""
    rows = []
    for key, params, summary in runs:
        rows.append({"point": key, **params,
                     **{k: v for k, v in summary.items() if k not in params}})
    return pd.DataFrame(rows)


def with_common_jobs(df: pd.DataFrame, jobs: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """``df`` with :data:`COMMON` columns: per point, the mean JCT and slowdown over the job
    ids that every point of the same job set (``job_set_sha256``) completed, and how many
    those are; left out where a job set has one point or a point's ``jobs`` are missing."""
    if "job_set_sha256" not in df.columns:
        return df
    out = df.copy()
    for _, group in df.groupby("job_set_sha256", sort=False):
        keys = list(group["point"])
        if len(keys) < 2 or any(k not in jobs or "job_id" not in jobs[k] for k in keys):
            continue
        common = set.intersection(*(set(jobs[k]["job_id"].astype(str)) for k in keys))
        for index, key in zip(group.index, keys, strict=True):
            done = jobs[key][jobs[key]["job_id"].astype(str).isin(common)]
            out.loc[index, "jobs_common"] = len(common)
            out.loc[index, "avg_jct_common_s"] = done["jct_s"].mean() if len(done) else math.nan
            out.loc[index, "avg_slowdown_common"] = (done["slowdown"].mean() if len(done)
                                                     else math.nan)
    return out


def simulated_results(df: pd.DataFrame) -> pd.DataFrame:
    """The table without its :data:`MEASURED` columns, in ``point`` order: two sweeps of the
    same points give equal tables, whatever ran them and however many workers."""
    kept = df.drop(columns=[c for c in MEASURED if c in df.columns])
    return kept.sort_values("point").reset_index(drop=True)


def seed_intervals(df: pd.DataFrame, by: Sequence[str],
                   metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """Per group of ``by``: ``seeds`` (runs), and each metric's ``_mean`` and ``_ci95`` (half
    width of the t interval; NaN with one seed)."""
    def stats(group: pd.DataFrame) -> pd.Series:
        out: dict[str, float] = {"seeds": float(len(group))}
        for m in metrics:
            values = pd.to_numeric(group[m], errors="coerce").dropna()
            n = len(values)
            out[f"{m}_mean"] = values.mean() if n else math.nan
            out[f"{m}_ci95"] = (t95(n - 1) * values.std(ddof=1) / math.sqrt(n)
                                if n > 1 else math.nan)
        return pd.Series(out)

    keys = list(by)
    if not keys:
        return stats(df).to_frame().T.astype({"seeds": int})
    table = df.groupby(keys, dropna=False, sort=False)[list(df.columns)].apply(stats)
    return table.reset_index().astype({"seeds": int})


def _cell(mean: float, half: float) -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.4g}" if math.isnan(half) else f"{mean:.4g} ± {half:.2g}"


def report_markdown(title: str, intervals: pd.DataFrame, by: Sequence[str], runs: int,
                    metrics: Sequence[str] = METRICS) -> str:
    """report.md: the intervals as one table, mean ± 95% CI half-width per metric."""
    header = [*by, "seeds", *metrics]
    lines = [f"# Sweep {title}", "",
             f"{runs} runs. Each row groups the runs that differ only in their seed: the mean "
             "± the half-width of its 95% confidence interval (Student's t over seeds; a "
             "mean alone where there is one seed). jobs_completed of jobs_in_trace ran; the rest "
             "were refused as unshapeable or dropped as larger than the cluster, and every "
             "average is over the jobs that ran; the *_common columns average over only the jobs "
             "every point with the same job set completed (jobs_common of them).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in intervals.iterrows():
        cells = [str(row[k]) for k in by] + [str(row["seeds"])]
        cells += [_cell(row[f"{m}_mean"], row[f"{m}_ci95"]) for m in metrics]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_results(out: Path, title: str, df: pd.DataFrame, by: Sequence[str]) -> None:
    """results.parquet, results.csv and report.md in ``out``, each written atomically."""
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    write_bytes(out / "results.parquet", buf.getvalue())
    write_text(out / "results.csv", df.to_csv(index=False))
    metrics = [m for m in (*COUNTS, *METRICS, *COMMON) if m in df.columns]
    intervals = seed_intervals(df, by, metrics)
    write_text(out / "report.md", report_markdown(title, intervals, by, len(df), metrics))
