"""``fabriclab report RUN_DIR [RUN_DIR ...] [--out DIR]``: render the HTML/Markdown report."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        description="Write report.html (self-contained) and report.md with figures. One run: "
                    "into the run directory; several runs: a comparison, into "
                    "FIRST_RUN/comparison unless --out is given.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a results/<run> directory")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where to write the report (created if missing)")
    p.add_argument("--recompute", action="store_true",
                   help="summarise each run's files again instead of reading its summary.json "
                        "(the same numbers, unless the files changed or the metrics did)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # pandas and matplotlib: only when it runs
    from analysis.cluster import is_cluster_dir, read_summary, trace_warning
    from analysis.report import write_report

    html = write_report(args.runs, args.out, recompute=args.recompute)
    if all(is_cluster_dir(p) for p in args.runs):
        warning = trace_warning([read_summary(p) for p in args.runs])
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
    print(html)
    return 0
