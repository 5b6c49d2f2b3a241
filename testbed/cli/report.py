"""``fabriclab report RUN_DIR [RUN_DIR ...] [--out DIR]``: render the HTML/Markdown report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from testbed.core.errors import FabricLabError
from testbed.core.out_dir import FORCE_HELP, check_out_dir, clear_out_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        description="Write report.html (self-contained) and report.md with figures. One run: "
                    "into the run directory; several runs: a comparison, into "
                    "FIRST_RUN/comparison unless --out is given.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a results/<run> directory")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where to write the report: new or empty; an existing non-empty one "
                   "is refused unless --force (without --out the report replaces the one in "
                   "the run directory, or in FIRST_RUN/comparison)")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--recompute", action="store_true",
                   help="summarise each run's files again instead of reading its summary.json "
                        "(the same numbers, unless the files changed or the metrics did)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # pandas and matplotlib: only when it runs
    from analysis.cluster import is_cluster_dir, jobs_warning, load_cluster, trace_warning
    from analysis.report import write_report

    runs = [p for p in args.runs if not _is_report_dir(p)] if len(args.runs) > 1 else args.runs
    skipped = sorted(set(args.runs) - set(runs))
    if skipped:  # a glob such as results/*themis* also matches the reports of earlier runs
        print(f"skipping {len(skipped)} report director{'y' if len(skipped) == 1 else 'ies'}: "
              + ", ".join(skipped), file=sys.stderr)
    if not runs:
        raise FabricLabError("every directory given is a report (…-report); give run "
                             "directories")
    args.runs = runs
    if args.out is not None:
        out = Path(args.out).resolve()
        inside = next((r for r in runs if out in (p := Path(r).resolve(), *p.parents)), None)
        if inside is not None:
            raise FabricLabError(f"--out {args.out} holds the run {inside}; write the report "
                                 "somewhere else")
        check_out_dir(args.out, args.force)
        clear_out_dir(args.out)
    html = write_report(args.runs, args.out, recompute=args.recompute)
    if all(is_cluster_dir(p) for p in args.runs):
        runs = [load_cluster(p) for p in args.runs]
        for word, text in (("warning", jobs_warning(runs)),
                           ("note", trace_warning([r.summary for r in runs]))):
            if text:
                print(f"{word}: {text}", file=sys.stderr)
    print(html)
    return 0


def _is_report_dir(path: str) -> bool:
    """A directory ``fabriclab run`` wrote a report into (``…-report``), not a run."""
    p = Path(path)
    return p.name.endswith("-report") and not (p / "summary.json").is_file()
