"""CPU waits judged three ways; BENCHMARKS.md "The scheduler invariant's excuse, judged both ways".

Runs judged three ways: without the scheduler invariant's excuses; with the excuse for a
worker's wait that its job's host links did not feel (``analysis.sched_invariant.excused_by``);
and with that and the excuse for a wait whose job still reached what its links allow (the job
invariant held, ``analysis.job_invariant.held``), as ``fidelity.json`` judges now.

    .venv/bin/python benchmarks/sched_waits_vs_links.py DIR [DIR ...]

DIR is a run's output directory (one variant of ``fabriclab run``). From its
``sched_samples.parquet``, ``qdisc_samples.parquet``, ``jobs.json`` and the jobs' collective
traces, it judges the workers' waits again: every stretch of too much CPU wait, with the
slowest host link of the job over that stretch and the next (achieved ÷ shaped rate, the qdisc's
own byte counter), whether the links excuse it, and the job's worst ratio of what its links
allow where the job invariant held (``-``: not judged, or short). Per run, the verdict without
the excuses (what ``fidelity.json`` said before them), with the links' and with both; every
other reason of the run's ``fidelity.json`` counts in all three.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from testbed.core.errors import FabricLabError
from testbed.emulator.rejudge import rejudged


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run output directories")
    args = ap.parse_args()
    try:
        results = [rejudged(r) for r in args.runs]
    except FabricLabError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"{'run':<44} {'job':<12} {'worker':<10} {'wait':>5} {'links':>6} excused  job")
    for res in results:
        for v in res["stretches"].itertuples():
            links = "-" if pd.isna(v.links_ratio) else f"{v.links_ratio:.2f}"
            job = "-" if pd.isna(v.job_ratio) else f"{v.job_ratio:.2f}"
            print(f"{res['run']:<44} {v.job:<12} {v.process:<10} {v.worst_share:>5.0%} "
                  f"{links:>6} {'yes' if v.excused else 'no':<8} {job}")
    print()
    print(f"{'run':<44} {'recorded':<13} {'no excuse':<13} {'links':<13} {'both':<13} "
          "other reasons")
    for res in results:
        print(f"{res['run']:<44} {res['recorded']:<13} {res['strict']:<13} "
              f"{res['excusing']:<13} {res['both']:<13} {len(res['others'])}")
    rows = pd.concat([r["stretches"] for r in results]) if results else pd.DataFrame()

    def faithful(way: str) -> int:
        return sum(r[way] == "faithful" for r in results)

    print(f"\n{len(rows)} stretches of too much CPU wait, {int(rows['excused'].sum())} excused by "
          f"their links, {int((~rows['excused'] & rows['job_ratio'].notna()).sum())} more by "
          f"their job's result; faithful without the excuses {faithful('strict')} of "
          f"{len(results)} runs, with the links' {faithful('excusing')}, with both "
          f"{faithful('both')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
