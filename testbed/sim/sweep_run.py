"""Run a sweep's points on a Dask cluster; the client alone writes their directories.

A worker simulates a point in memory and returns its files' texts (:func:`simulate_run`), so
a remote cluster needs no shared filesystem and no point is ever written twice: the client
writes each finished point into ``OUT/.partial/KEY`` and renames that to ``OUT/KEY``. A point
whose directory holds its summary.json and the same parameters is done, and is skipped when a
sweep runs again with the same output directory.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.core.atomic import write_json
from testbed.core.errors import FabricLabError
from testbed.core.out_dir import MARKER
from testbed.sim.cluster_run import RunFiles, simulate_run, write_run
from testbed.sim.sweep_spec import Point, keyed_params, varying

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

RETRIES = 2  # a point whose simulation raises is tried this many more times
PARTIAL = ".partial"
SWEEP_FILES = {PARTIAL, "results.parquet", "results.csv", "report.md", MARKER}


@dataclass
class Outcome:
    """What became of a sweep's points: keys run now, found done, failed (with why)."""

    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def is_done(out: Path, point: Point) -> bool:
    """Whether ``OUT/KEY`` holds this point's finished run."""
    d = out / point.key
    try:
        meta = json.loads((d / "point.json").read_text())
    except (OSError, ValueError):
        return False
    params = meta.get("params")
    return (isinstance(params, dict) and keyed_params(params) == keyed_params(point.params)
            and (d / "summary.json").is_file())


def foreign_entry(out: Path) -> str | None:
    """The first entry of ``out`` that no sweep writes (None: ``out`` is missing or a
    sweep's): a sweep holds only its tables, its staging directory and point directories
    with a point.json (:func:`write_point`)."""
    if not out.is_dir():
        return None
    for entry in sorted(out.iterdir()):
        interrupted = entry.name.startswith(".") and entry.name.endswith(".partial")
        if entry.name in SWEEP_FILES or interrupted:  # interrupted: an atomic write's temp
            continue
        if not (entry.is_dir() and not entry.is_symlink() and (entry / "point.json").is_file()):
            return entry.name
    return None


def write_point(out: Path, point: Point, files: RunFiles) -> None:
    """Write a finished point: its files and point.json into a staging directory, then one
    rename to ``OUT/KEY`` (an old, unfinished ``OUT/KEY`` is removed first)."""
    stage = out / PARTIAL / point.key
    shutil.rmtree(stage, ignore_errors=True)
    write_run(files, stage)
    write_json(stage / "point.json", {"key": point.key, "label": point.label,
                                      "params": point.params})
    final = out / point.key
    if final.exists():
        shutil.rmtree(final)
    try:
        stage.rename(final)
    except OSError as exc:
        raise FabricLabError(f"cannot write results to {final}: {exc.strerror}") from None


def _run_task(params: dict[str, Any], label: str) -> RunFiles:
    """The task a worker runs (module-level, so workers import it by name)."""
    return simulate_run(params, label)


def run_points(client: Client, points: list[Point], out: Path,
               on_update: Callable[[Outcome], None] = lambda _o: None) -> Outcome:
    """Run every point not done yet on ``client``'s cluster and write each as it finishes.
    A point that raises is retried :data:`RETRIES` times; one whose worker dies is handed
    to another worker by the scheduler. Failures are collected, not raised."""
    from distributed import as_completed

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FabricLabError(f"cannot write results to {out}: {exc.strerror}") from None
    done = {p.key for p in points if is_done(out, p)}
    outcome = Outcome(skipped=[p.key for p in points if p.key in done])
    todo = [p for p in points if p.key not in done]
    on_update(outcome)
    by_key = {f"sweep-point-{p.key}": p for p in todo}
    futures = [client.submit(_run_task, p.params, p.label, key=key, retries=RETRIES,
                             pure=False)
               for key, p in by_key.items()]
    with _cancelled_on_exit(client, futures):
        for future in as_completed(futures):
            point = by_key[future.key]
            if future.status == "finished":
                write_point(out, point, future.result())
                outcome.ran.append(point.key)
            else:
                outcome.failed[point.key] = _reason(future.exception())
            future.release()
            on_update(outcome)
    shutil.rmtree(out / PARTIAL, ignore_errors=True)
    return outcome


def sweep_results(out: Path, points: list[Point], title: str, by: list[str]
                  ) -> pd.DataFrame | None:
    """Write results.parquet, results.csv and report.md (grouped by ``by``) from the points
    done in ``out``, and return that table; None if no point is done."""
    import pandas as pd

    from analysis.sweep import results_frame, with_common_jobs, write_results

    done = [p for p in points if is_done(out, p)]
    runs = [(p.key, p.params, json.loads((out / p.key / "summary.json").read_text()))
            for p in done]
    if not runs:
        return None
    jobs = {p.key: pd.read_csv(out / p.key / "jobs.csv") for p in done
            if (out / p.key / "jobs.csv").is_file()}
    df = with_common_jobs(results_frame(runs), jobs)
    write_results(out, title, df, by)
    return df


def run_sweep(client: Client, points: list[Point], out: Path, title: str,
              on_update: Callable[[Outcome], None] = lambda _o: None) -> pd.DataFrame:
    """Run every point not yet in ``out`` and return the results table (its report grouped
    by the parameters that vary); a failed point is an error naming each that failed."""
    outcome = run_points(client, points, out, on_update)
    if outcome.failed:
        labels = {p.key: p.label for p in points}
        raise FabricLabError(f"{len(outcome.failed)} of {len(points)} runs failed: " + "; ".join(
            f"{key} ({labels[key]}): {why}" for key, why in outcome.failed.items()))
    df = sweep_results(out, points, title, varying(points))
    if df is None:
        raise FabricLabError("the sweep has no runs")
    return df


def _reason(exc: BaseException | None) -> str:
    text = str(exc) if exc is not None else "cancelled"
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, FabricLabError) else text


@contextmanager
def _cancelled_on_exit(client: Client, futures: list[Any]) -> Iterator[None]:
    """Cancel what is still queued when the loop ends early (Ctrl-C, a write error)."""
    try:
        yield
    finally:
        pending = [f for f in futures if not f.done()]
        if pending:
            client.cancel(pending)
