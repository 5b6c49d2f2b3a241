"""`fabriclab run SPEC`: run every variant of an experiment, then write one report over them."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from testbed.experiment import load_experiments
from testbed.preflight import require_fabric_ready


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run an experiment (all its variants) and write a report")
    p.add_argument("spec", help="experiment YAML")
    p.add_argument("--out", type=Path, default=Path("results"),
                   help="where run directories go (default results/)")
    p.add_argument("--no-report", action="store_true", help="skip the report")
    p.add_argument("--backend", choices=("emulated", "sim"), default="emulated",
                   help="emulated: Mininet and real workers (needs root); sim: the flow-level "
                   "simulator, same run directories (default emulated)")
    p.add_argument("--seed", type=int, default=1,
                   help="sim backend: seed of the ECMP source ports (default 1)")
    p.add_argument("--step-latency-us", type=float, default=0.0,
                   help="sim backend: delay before every ring step, in microseconds: "
                   "per-message software and switching latency (default 0)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from testbed.runner import Runner, summary_table

    experiments = load_experiments(args.spec)
    if getattr(args, "backend", "emulated") == "sim":
        from testbed.sim.backend import SimRunner

        seed, latency = getattr(args, "seed", 1), getattr(args, "step_latency_us", 0.0) / 1e6
        runners = [SimRunner(exp, args.out, seed=seed, step_latency_s=latency)
                   for exp in experiments]  # validates and places
    else:
        runners = [Runner(exp, args.out) for exp in experiments]  # validates against the fabrics
        require_fabric_ready()
    console = Console()
    run_dirs, failed = [], 0
    for r in runners:
        r.console = console
        run_dirs.append(r.run())
        console.print(summary_table(r))
        console.print(f"run directory: {r.run_dir}")
        failed += r.status != "ok"
        if r.status == "incomplete":
            break  # Ctrl-C stops the whole experiment
    if not args.no_report:
        try:
            from analysis.report import write_report
        except ImportError:
            console.print("[yellow]analysis is not installed: no report written")
        else:
            out = run_dirs[0] if len(run_dirs) == 1 else args.out / f"{run_dirs[0].name}-report"
            path = write_report(run_dirs, out)
            console.print(f"report: {path}")
    return 1 if failed else 0
