"""Runs judged both ways: without and with the scheduler invariant's excuse for a worker's wait
that its job's host links did not feel (``analysis.sched_invariant.excused_by``).

    .venv/bin/python benchmarks/sched_waits_vs_links.py DIR [DIR ...]

DIR is a run's output directory (one variant of ``fabriclab run``). From its
``sched_samples.parquet``, ``qdisc_samples.parquet``, ``jobs.json`` and the jobs' collective
traces, it judges the workers' waits again: every stretch of too much CPU wait, with the
slowest host link of the job over that stretch and the next (achieved ÷ shaped rate, the qdisc's
own byte counter), and whether the excuse holds. Per run, the verdict without the excuse
(what ``fidelity.json`` said before it existed) and with it; every other reason of the run's
``fidelity.json`` counts in both.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from analysis import sched_invariant
from testbed.emulator.fidelity import links_kept
from testbed.emulator.runner import collective_windows

SCHED = "scheduler invariant: "


def judged(run: Path) -> dict:
    """The run's workers' stretches of too much wait, judged with the excuse, and its verdict
    both ways."""
    fidelity = json.loads((run / "fidelity.json").read_text())
    sched = pd.read_parquet(run / "sched_samples.parquet")
    queues = pd.read_parquet(run / "qdisc_samples.parquet")
    jobs = json.loads((run / "jobs.json").read_text())
    windows = collective_windows(run)
    found, _ = sched_invariant.judge(sched, windows, links=links_kept(queues, jobs))
    workers = found[found["job"] != sched_invariant.SWITCH_JOB]
    others = [r for r in fidelity["reasons"] if not r.startswith(SCHED)]
    strict = "faithful" if not others and workers.empty else "not faithful"
    excusing = ("faithful" if not others and workers["excused"].all() else "not faithful")
    return {"run": run.name, "stretches": workers, "others": others,
            "strict": strict, "excusing": excusing, "recorded": fidelity["verdict"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run output directories")
    args = ap.parse_args()
    missing = [str(r) for r in args.runs
               if not all((r / f).is_file() for f in ("fidelity.json", "sched_samples.parquet",
                                                      "qdisc_samples.parquet", "jobs.json"))]
    if missing:
        print(f"not a run's output directory with sched and qdisc samples: {missing[0]}",
              file=sys.stderr)
        return 2
    results = [judged(r) for r in args.runs]
    print(f"{'run':<44} {'job':<12} {'worker':<10} {'wait':>5} {'links':>6}  excused")
    for res in results:
        for v in res["stretches"].itertuples():
            links = "-" if pd.isna(v.links_ratio) else f"{v.links_ratio:.2f}"
            print(f"{res['run']:<44} {v.job:<12} {v.process:<10} {v.worst_share:>5.0%} "
                  f"{links:>6}  {'yes' if v.excused else 'no'}")
    print()
    print(f"{'run':<44} {'recorded':<13} {'without excuse':<15} {'with excuse':<13} "
          "other reasons")
    for res in results:
        print(f"{res['run']:<44} {res['recorded']:<13} {res['strict']:<15} "
              f"{res['excusing']:<13} {len(res['others'])}")
    rows = pd.concat([r["stretches"] for r in results]) if results else pd.DataFrame()
    print(f"\n{len(rows)} stretches of too much CPU wait, {int(rows['excused'].sum())} excused; "
          f"faithful without the excuse {sum(r['strict'] == 'faithful' for r in results)}"
          f" of {len(results)} runs, with it "
          f"{sum(r['excusing'] == 'faithful' for r in results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
