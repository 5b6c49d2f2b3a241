"""The iteration-time convention for any program a ``command`` job runs.

A program that wants its iteration times in the report prints one JSON object per training
iteration on its standard output, on a line of its own::

    {"fabriclab": "iteration", "iteration": 3, "time_s": 0.412}

``iteration`` (an integer) and ``time_s`` (seconds, > 0) are required; ``warmup`` (true for
iterations to leave out of the figures) and ``bytes`` (what the iteration communicated) are
optional. Every other line is the program's own and is kept, untouched, in its log. The
runner turns the lines of rank r into ``iterations-rank{r}.parquet`` (the DNN workload's
schema, :data:`testbed.core.traces.ITERATION_SCHEMA`), so slowdowns against solo baselines and
the iteration-time figures work for any program as they do for fabriclab's own workers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from testbed.core.traces import ITERATION_SCHEMA
from workloads.traces import write_rows

TAG = "iteration"


def parse(text: str) -> list[dict[str, Any]]:
    """The iteration records in a program's stdout, in order (malformed ones are skipped:
    the convention is opt-in, and a program's own output may look like JSON)."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not (line.startswith("{") and f'"{TAG}"' in line):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or rec.get("fabriclab") != TAG:
            continue
        it, t = rec.get("iteration"), rec.get("time_s")
        if isinstance(it, bool) or not isinstance(it, int):
            continue
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) \
                or t <= 0:
            continue
        size = rec.get("bytes")
        rows.append({"iteration": it, "time_s": float(t), "warmup": rec.get("warmup") is True,
                     "bytes": size if isinstance(size, int) and size >= 0 else None})
    return rows


def trace_rows(rows: list[dict[str, Any]], *, run_id: str, job_id: str, rank: int,
               world: int, label: str) -> list[dict[str, Any]]:
    """``rows`` (from :func:`parse`) as iteration trace rows; what a command cannot know
    (compute, buckets, start and end) is null."""
    empty = dict.fromkeys(ITERATION_SCHEMA.names)
    return [empty | {"run_id": run_id, "job_id": job_id, "rank": rank,
                     "iteration": r["iteration"], "warmup": r["warmup"], "model": label,
                     "algorithm": "command", "world": world, "bytes": r["bytes"],
                     "time": r["time_s"]} for r in rows]


def write_iterations(stdout_log: Path, out_dir: Path, *, run_id: str, job_id: str,
                     rank: int, world: int, label: str) -> int:
    """Parse rank ``rank``'s stdout log and write its iteration trace; return the count."""
    try:
        text = stdout_log.read_text(errors="replace")
    except OSError:
        return 0
    rows = parse(text)
    if rows:
        write_rows(out_dir / f"iterations-rank{rank}.parquet",
                   trace_rows(rows, run_id=run_id, job_id=job_id, rank=rank, world=world,
                              label=label), ITERATION_SCHEMA)
    return len(rows)
