"""A recorded run's workers' CPU waits judged again, three ways: without the scheduler
invariant's excuses; with the excuse for a wait its job's host links did not feel
(:func:`analysis.sched_invariant.excused_by`); and with that and the excuse for a wait whose
job still reached what its links allow (:func:`analysis.job_invariant.held`), as
``fidelity.json`` judges now (the registered ``scheduler`` invariant,
:class:`analysis.sched_invariant.SchedulerInvariant`).

Reads a run's output directory: ``fidelity.json``, ``sched_samples.parquet``,
``qdisc_samples.parquet``, ``jobs.json`` and the jobs' collective traces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import job_invariant, sched_invariant
from analysis.sched_invariant import links_kept
from testbed.core.errors import FabricLabError
from testbed.core.traces import collective_windows

SCHED = "scheduler invariant: "  # how fidelity.json's reasons of that invariant begin
RUN_FILES = ("fidelity.json", "sched_samples.parquet", "qdisc_samples.parquet", "jobs.json")


def rejudged(run: Path, asleep_bound: bool = True) -> dict[str, Any]:
    """The run's workers' stretches of too much wait (``stretches``: the invariant's rows with
    ``job_ratio``, the job's worst ratio where the job invariant held), the run's other
    reasons, and its verdict recorded (``recorded``), without excuses (``strict``), with the
    links' (``excusing``) and with both (``both``). ``asleep_bound=False`` judges the wait as
    the kernel counted it, without taking away what it counted while the thread was seen
    asleep (:func:`analysis.sched_invariant.runnable_wait`). A directory without the samples
    is one sentence."""
    if not all((run / f).is_file() for f in RUN_FILES):
        raise FabricLabError(f"not a run's output directory with sched and qdisc samples: {run}")
    fidelity = json.loads((run / "fidelity.json").read_text())
    sched = pd.read_parquet(run / "sched_samples.parquet")
    if not asleep_bound:
        sched = sched.drop(columns="state", errors="ignore")
    queues = pd.read_parquet(run / "qdisc_samples.parquet")
    jobs = json.loads((run / "jobs.json").read_text())
    windows = collective_windows(run)
    found, _ = sched_invariant.judge(sched, windows, links=links_kept(queues, jobs))
    held = job_invariant.held((fidelity.get("job") or {}).get("jobs") or [])
    workers = found[found["job"] != sched_invariant.SWITCH_JOB]
    workers = workers.assign(job_ratio=workers["job"].map(held))
    others = [r for r in fidelity["reasons"] if not r.startswith(SCHED)]

    def verdict(excused: pd.Series) -> str:
        return "faithful" if not others and excused.all() else "not faithful"

    by_links = workers["excused"].astype(bool)
    by_either = by_links | workers["job_ratio"].notna()
    return {"run": run.name, "stretches": workers, "others": others,
            "strict": verdict(pd.Series(False, index=workers.index)),
            "excusing": verdict(by_links), "both": verdict(by_either),
            "recorded": fidelity["verdict"]}
