"""``summary.json`` as CSV tables, for spreadsheets and other tools: ``csv/jobs.csv`` (one row
per job, solo baselines too), ``csv/sizes.csv`` (one per job and message size) and
``csv/links.csv`` (one per link direction). Columns are summary.json's keys, units in their
names (``docs/results.md``); lists are joined with spaces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from testbed.core.atomic import csv_text, write_text

CSV_DIR = "csv"


def _cell(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return "" if value is None else value


def _csv(rows: Iterable[Mapping[str, Any]], first: tuple[str, ...]) -> str:
    """CSV of ``rows``: the columns ``first``, then every other key in order of appearance."""
    rows = list(rows)
    columns = list(first)
    for r in rows:
        columns += [k for k in r if k not in columns]
    return csv_text(({k: _cell(r.get(k)) for k in columns} for r in rows), columns)


def tables(summary: Mapping[str, Any]) -> dict[str, str]:
    """{file name: CSV text} of a run's summary (a table without rows keeps its header)."""
    jobs = summary.get("jobs") or {}
    job_rows = [{"job": name, **{k: v for k, v in job.items() if k != "sizes"}}
                for name, job in jobs.items()]
    size_rows = [{"job": name, "size_bytes": int(size), **values}
                 for name, job in jobs.items()
                 for size, values in sorted((job.get("sizes") or {}).items(),
                                            key=lambda kv: int(kv[0]))]
    link_rows = []
    for key, values in (summary.get("links") or {}).items():
        src, _, dst = key.partition("→")
        link_rows.append({"src": src, "dst": dst, **values})
    return {"jobs.csv": _csv(job_rows, ("job",)),
            "sizes.csv": _csv(size_rows, ("job", "size_bytes")),
            "links.csv": _csv(link_rows, ("src", "dst", "mean_util", "peak_util"))}


def write_tables(run_dir: Path, summary: Mapping[str, Any]) -> list[Path]:
    """Write :func:`tables` into ``run_dir/csv/``, each file atomically; returns the paths."""
    out = Path(run_dir) / CSV_DIR
    out.mkdir(exist_ok=True)
    paths = []
    for name, text in tables(summary).items():
        write_text(out / name, text)
        paths.append(out / name)
    return paths
