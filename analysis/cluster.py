"""Results of ``fabriclab simulate-cluster``: load them, and the metrics over time they imply.

A cluster directory holds ``summary.json`` (a run's averages and parameters), ``jobs.csv``
(one row per completed job: arrival_s, start_s, finish_s, jct_s, wait_s, run_s, slowdown, ...)
and ``utilisation.csv`` (busy GPUs over time, :func:`utilisation_timeline`). Directories
written before keys named their units are read too (:func:`read_summary`, :func:`load_cluster`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from testbed.core.errors import FabricLabError

SUMMARY_KEY = "jobs_in_trace"  # only simulate-cluster summaries have it
# Keys of older summaries and jobs.csv files, before every key named its unit.
LEGACY_SUMMARY_KEYS = {
    "link_gbps": "link_gbit_s", "avg_jct": "avg_jct_s", "p50_jct": "p50_jct_s",
    "p95_jct": "p95_jct_s", "p99_jct": "p99_jct_s", "avg_wait": "avg_wait_s",
    "avg_run": "avg_run_s", "makespan": "makespan_s",
}
LEGACY_JOB_COLUMNS = {c: f"{c}_s" for c in
                      ("arrival", "start", "finish", "jct", "wait", "run", "isolated")}


def is_cluster_dir(path: str | Path) -> bool:
    """True for a directory written by ``simulate-cluster``."""
    p = Path(path)
    try:
        summary = json.loads((p / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return (p / "jobs.csv").is_file() and isinstance(summary, dict) and SUMMARY_KEY in summary


@dataclass
class ClusterRun:
    path: Path
    label: str
    summary: dict[str, Any]
    jobs: pd.DataFrame

    @property
    def total_gpus(self) -> int:
        return int(self.summary.get("gpus") or 0)


def label_of(summary: Mapping[str, Any]) -> str:
    """The run's ``--label``, else ``policy`` plus what sets it apart: placement, rewiring,
    a queue discipline other than fifo."""
    if isinstance(summary.get("label"), str) and summary["label"].strip():
        return summary["label"].strip()
    parts = [str(summary.get("policy", "?"))]
    if summary.get("placement", "joint") not in ("joint", ""):
        parts.append(str(summary["placement"]))
    if summary.get("rewiring"):  # ocs-vclos only
        parts.append(f"{summary['rewiring']} rewiring")
    if summary.get("queue", "fifo") != "fifo":  # older summaries: fifo, the only one then
        parts.append(f"queue {summary['queue']}")
    return " ".join(parts)


def read_summary(path: str | Path) -> dict[str, Any]:
    """``summary.json`` of a simulate-cluster directory, older key names upgraded."""
    p = Path(path)
    if not is_cluster_dir(p):
        raise FabricLabError(f"{p} is not a simulate-cluster directory (summary.json and "
                             "jobs.csv from fabriclab simulate-cluster)")
    summary = json.loads((p / "summary.json").read_text())
    return {LEGACY_SUMMARY_KEYS.get(k, k): v for k, v in summary.items()}


def load_cluster(path: str | Path) -> ClusterRun:
    """Read one simulate-cluster directory, or say in one sentence why it is not one."""
    p = Path(path)
    summary = read_summary(p)
    try:
        jobs = pd.read_csv(p / "jobs.csv")
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise FabricLabError(f"{p / 'jobs.csv'} cannot be read: {exc}") from None
    jobs = jobs.rename(columns={k: v for k, v in LEGACY_JOB_COLUMNS.items() if v not in jobs})
    if "avg_isolated_s" not in summary and "isolated_s" in jobs and len(jobs):
        summary["avg_isolated_s"] = float(jobs["isolated_s"].mean())  # older summaries
    return ClusterRun(p, label_of(summary), summary, jobs)


def utilisation_timeline(rows: Iterable[Mapping[str, Any]], total_gpus: int) -> pd.DataFrame:
    """Busy GPUs over time, as a step function: one row per instant a job starts or ends.

    Columns ``time_s``, ``busy_gpus`` (held from this instant to the next row) and
    ``utilisation`` (``busy_gpus / total_gpus``). Jobs that start and end at once cancel.
    """
    events: dict[float, int] = {}
    for r in rows:
        start, finish, gpus = float(r["start_s"]), float(r["finish_s"]), int(r["gpus"])
        events[start] = events.get(start, 0) + gpus
        events[finish] = events.get(finish, 0) - gpus
    times = sorted(events)
    busy, out = 0, []
    for t in times:
        busy += events[t]
        out.append((t, busy))
    frame = pd.DataFrame(out, columns=["time_s", "busy_gpus"])
    frame["utilisation"] = frame["busy_gpus"] / total_gpus if total_gpus else 0.0
    return frame


def _g(x: Any) -> str:
    return "—" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def _synthetic(s: Mapping[str, Any]) -> bool:
    return s.get("trace", "synthetic") == "synthetic"


def _trace_name(s: Mapping[str, Any]) -> str:
    """``trace`` as given, or ``kind:/absolute/path`` of a trace file."""
    trace = str(s.get("trace", "?"))
    return f"{trace.partition(':')[0]}:{s['trace_file']}" if s.get("trace_file") else trace


def run_rows(runs: Sequence[ClusterRun]) -> list[dict[str, str]]:
    """One row per run for the report: its label, trace, jobs, seed, load and directory."""
    rows = []
    for r in runs:
        s = r.summary
        sha = s.get("trace_sha256")
        rows.append({
            "label": r.label, "path": str(r.path), "trace": _trace_name(s),
            "sha": sha[:12] if isinstance(sha, str) else "—",
            "jobs": f"{_g(s.get('jobs_completed'))} / {_g(s.get('jobs_in_trace'))}",
            "seed": _g(s.get("seed")),
            "load": _g(s.get("load")) if _synthetic(s) else "— (trace file)",
            "gpus": _g(s.get("gpus")),
            "link": f"{_g(s.get('link_gbit_s'))} Gbit/s",
        })
    return rows


def _job_set_params(s: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """What fixes a run's jobs besides the simulator: name -> (compared value, as shown)."""
    synthetic = _synthetic(s)
    sha = s.get("trace_sha256")
    trace = _trace_name(s) + (f" (sha256 {sha[:12]})" if isinstance(sha, str) else "")
    load = s.get("load") if synthetic else None  # a trace file ignores it
    gpus = s.get("gpus") if synthetic else None  # synthetic arrivals scale with them
    link = s.get("link_gbit_s")  # a trace's durations become iterations at this rate
    return {
        "trace": (sha or trace, trace),  # a file's bytes, wherever it is
        "jobs": (s.get("jobs_in_trace"), _g(s.get("jobs_in_trace"))),
        "seed": (s.get("seed"), _g(s.get("seed"))),
        "load": (load, _g(load)),
        "GPUs": (gpus, _g(gpus)),
        "link rate": (link, f"{_g(link)} Gbit/s"),
    }


def accounting(s: Mapping[str, Any]) -> str:
    """Where every job of a run's trace went: ``185 of 200 ran; 15 refused as unshapeable``."""
    ran, total = s.get("jobs_completed"), s.get("jobs_in_trace")
    parts = [f"{_g(ran)} of {_g(total)} ran"]
    for key, why in (("refused_unshapeable", "refused as unshapeable"),
                     ("dropped_too_large", "dropped as larger than the cluster")):
        if s.get(key):
            parts.append(f"{_g(s[key])} {why}")
    return "; ".join(parts)


def jobs_warning(runs: Sequence[ClusterRun]) -> str | None:
    """One sentence when a run did not run every job of its trace (refused or dropped ones):
    its averages are over fewer jobs than its peers'. None when every run ran all."""
    short = [r for r in runs if r.summary.get("jobs_completed") != r.summary.get("jobs_in_trace")]
    if not short:
        return None
    return ("not every job ran: " + "; ".join(f"{r.label}: {accounting(r.summary)}"
                                               for r in short)
            + " — its averages leave those jobs out" + (
                "; the rows “over jobs every run completed” compare the same jobs"
                if len(runs) > 1 and trace_warning([r.summary for r in runs]) is None else ""))


def common_jobs(runs: Sequence[ClusterRun]) -> set[str] | None:
    """The job ids every run completed, when the runs simulated the same jobs and at least
    one of them left some out; None otherwise (then every average is already over them)."""
    if len(runs) < 2 or trace_warning([r.summary for r in runs]) is not None:
        return None
    if not all("job_id" in r.jobs for r in runs):
        return None
    sets = [set(map(str, r.jobs["job_id"])) for r in runs]
    common = set.intersection(*sets)
    return common if any(len(s) != len(common) for s in sets) else None


def trace_warning(summaries: Sequence[Mapping[str, Any]]) -> str | None:
    """One sentence when the runs did not simulate the same jobs, naming what differs (what
    was swept, e.g. the load); None when they did (equal ``job_set_sha256``; older
    summaries: equal trace parameters)."""
    if len(summaries) < 2:
        return None
    params = [_job_set_params(s) for s in summaries]
    differ = [k for k in params[0] if len({repr(p[k][0]) for p in params}) > 1]
    digests = [s.get("job_set_sha256") for s in summaries]
    same = len(set(digests)) == 1 if all(digests) else not differ
    if same:
        return None
    why = "; ".join(f"{k} " + " vs ".join(p[k][1] for p in params) for k in differ)
    return (f"these runs did not simulate the same jobs ({why or 'their job sets differ'}): "
            "their JCT, waiting time and slowdown compare different job sets, not only "
            "policies")


def comparison_rows(runs: list[ClusterRun]) -> list[tuple[str, list[Any], str]]:
    """(metric, one value per run, kind) for the report's table; kind says how to format."""
    summaries = [r.summary for r in runs]

    def each(fn: Any) -> list[Any]:
        return [fn(s) for s in summaries]

    def col(key: str) -> list[Any]:
        return each(lambda s: s.get(key))

    def refusals(s: Mapping[str, Any]) -> tuple[Any, Any]:
        total, links = s.get("refused_fragmented"), s.get("refused_fragmented_links")
        return (None if total is None else total - (links or 0), links)

    common = common_jobs(runs)

    def over_common(col: str) -> list[Any]:
        return [float(r.jobs[r.jobs["job_id"].astype(str).isin(common)][col].mean())
                if common else None for r in runs]

    rows = [
        ("GPUs (leaves × hosts, spines)", each(
            lambda s: f"{s.get('gpus')} ({s.get('leaves')} × {s.get('hosts_per_leaf')}, "
                      f"{s.get('spines')})"), "text"),
        ("Policy", col("policy"), "text"),
        ("Placement", each(
            lambda s: (s.get("placement") if s.get("policy") != "ecmp"
                      or s.get("placement") == "trace" else "") or "—"), "text"),
        ("OCSes (spine ports each)", each(
            lambda s: f"{s.get('ocs_count')} ({s.get('spine_ports_per_ocs')})"
            if s.get("ocs_count") else "—"), "text"),
        ("Jobs", each(accounting), "text"),
        ("Average JCT", col("avg_jct_s"), "time"),
        ("p50 / p95 / p99 JCT", each(
            lambda s: (s.get("p50_jct_s"), s.get("p95_jct_s"), s.get("p99_jct_s"))), "times"),
        ("Average wait", col("avg_wait_s"), "time"),
        ("Average run time", col("avg_run_s"), "time"),
        ("Mean slowdown (max)", each(
            lambda s: (s.get("avg_slowdown"), s.get("max_slowdown"))), "slowdown"),
        ("GPU utilisation", col("gpu_utilisation"), "pct"),
        ("Flows collided", col("collided_flow_fraction"), "pct"),
        ("Refusals: host shape / links", each(refusals), "pair"),
        ("Simulator wall time", col("wall_s"), "time"),
    ]
    if common:
        at = next(i for i, row in enumerate(rows) if row[0] == "Average run time") + 1
        rows[at:at] = [
            (f"Average JCT over the {len(common)} jobs every run completed",
             over_common("jct_s"), "time"),
            (f"Mean slowdown over the {len(common)} jobs every run completed",
             over_common("slowdown"), "x")]
    return rows
