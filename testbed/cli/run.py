"""`fabriclab run SPEC`: run every variant of an experiment, then write one report over them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from testbed.cli.terminal import out_console
from testbed.core.backend import Backend
from testbed.core.errors import FabricLabError
from testbed.core.experiment import experiment_name, load_experiments
from testbed.core.rundir import new_run_dir
from testbed.core.scaling import UNSCALED
from testbed.core.servers import ServersSpec, load_servers
from testbed.core.units import format_decimal, format_size

BACKENDS = ("emulated", "sim")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run")
    p.add_argument("spec", help="experiment YAML")
    p.add_argument("--out", type=Path, default=Path("results"),
                   help="the parent directory: each run (and the report over several) gets a "
                   "new directory <timestamp>-<name> inside it; nothing already in it is "
                   "touched (default results/)")
    p.add_argument("--no-report", action="store_true", help="skip the report")
    p.add_argument("--backend", choices=BACKENDS, default="emulated",
                   help="emulated: Mininet and real workers (needs root); sim: the flow-level "
                   "simulator, same run directories (default emulated)")
    p.add_argument("--seed", type=int, default=1,
                   help="sim backend: seed of the ECMP source ports (default 1)")
    p.add_argument("--step-latency-us", type=float, default=0.0,
                   help="sim backend: delay before every ring step, in microseconds: "
                   "per-message software and switching latency (default 0)")
    p.add_argument("--variants", metavar="NAMES",
                   help="run only these variants, comma-separated (e.g. ecmp,vclos); "
                   "default all")
    p.add_argument("--repeats", type=int, metavar="N",
                   help="run each variant N times instead of the spec's repeats")
    p.add_argument("--servers", type=Path, metavar="FILE",
                   help="emulated backend: spread the fabric over the servers this file "
                   "names (made by `fabriclab servers local N --out FILE`); the placement "
                   "is `fabriclab topo SPEC --servers FILE`'s")
    p.set_defaults(func=run)


def backend_of(args: argparse.Namespace, repeat: int = 0) -> Backend:
    """The backend ``--backend`` names, imported only when chosen; the sim backend's seed is
    ``--seed`` plus the ``repeat`` (0, 1, ...) of an experiment with ``repeats``."""
    if getattr(args, "backend", "emulated") == "sim":
        from testbed.sim.backend import SimBackend

        return SimBackend(seed=getattr(args, "seed", 1) + repeat,
                          step_latency_s=getattr(args, "step_latency_us", 0.0) / 1e6)
    from testbed.emulator.backend import EmulatedBackend

    return EmulatedBackend(servers=servers_of(args))


def servers_of(args: argparse.Namespace) -> ServersSpec | None:
    """The servers file ``--servers`` names, read and checked, stand-ins only for now
    (None without it); refused before anything is made."""
    path = getattr(args, "servers", None)
    if path is None:
        return None
    if getattr(args, "backend", "emulated") == "sim":
        raise FabricLabError("--servers spreads an emulated fabric; the sim backend has none")
    from testbed.emulator.fabric import Fabric

    servers = load_servers(path)
    Fabric.check_servers(servers)
    return servers


def summary_table(run_dir: Path) -> tuple[Table, str]:
    """The run's jobs (not their solo baselines), one row per size, and the run's status, all
    from its ``summary.json`` (the figures the report shows); a run at a ``rate_scale`` also
    gets its times and busbw at the real rates. A busbw above what the job's hosts could send
    (their links' configured rates) is flagged."""
    from analysis.limits import host_rate_mbit_s, rate_flag

    summary = json.loads((run_dir / "summary.json").read_text())
    topology_file = run_dir / "topology.json"
    topology = json.loads(topology_file.read_text()) if topology_file.is_file() else {}
    status, scale = summary.get("status", "unknown"), summary.get("rate_scale", UNSCALED)
    scaled = scale != UNSCALED
    table = Table(title=f"{run_dir.name}: {status}"
                  + (f" (rates scaled ×{scale:g}: real figures beside)" if scaled else ""))
    real = ("real time ms", "real busbw Gbit/s") if scaled else ()
    for col in ("job", "hosts", "size", "time ms", "busbw Mbit/s", *real, "correct", "status"):
        table.add_column(col)
    for name, j in (summary.get("jobs") or {}).items():
        if j.get("solo_of"):
            continue
        limit = host_rate_mbit_s(topology, j.get("hosts") or [])
        sizes = sorted((j.get("sizes") or {}).items(), key=lambda kv: int(kv[0])) or [("", {})]
        for size, r in sizes:
            t, bus = r.get("collective_s"), r.get("busbw_gbit_s")
            cells = [format_decimal(t * 1e3) if t is not None else "",
                     (f"{bus * 1e3:.1f}" + rate_flag(bus, limit)) if bus is not None else ""]
            if scaled:  # 4 significant digits: real times are tiny, real rates large
                rt, rb = r.get("collective_real_s"), r.get("busbw_real_gbit_s")
                cells += [format_decimal(rt * 1e3) if rt is not None else "",
                          format_decimal(rb) if rb is not None else ""]
            correct = j.get("correct")
            table.add_row(name, str(j.get("world") or len(j.get("hosts") or [])),
                          format_size(int(size)) if size else "", *cells,
                          "n/a" if correct is None else str(correct), str(j.get("status")))
    return table, status


def chosen(experiments: list, name: str, args: argparse.Namespace) -> list:
    """The runs ``--variants`` names (all without it), each ``--repeats`` times if given."""
    if getattr(args, "repeats", None) is not None:
        if not 1 <= args.repeats <= 20:
            raise FabricLabError(f"--repeats {args.repeats}: give 1 to 20")
        experiments = [e.model_copy(update={"repeats": args.repeats}) for e in experiments]
    if not getattr(args, "variants", None):
        return experiments
    wanted = [v.strip() for v in args.variants.split(",") if v.strip()]
    by_variant = {e.name.removeprefix(f"{name}-"): e for e in experiments}
    unknown = [v for v in wanted if v not in by_variant]
    if unknown or not wanted:
        which = f"no variant {unknown[0]}" if unknown else "no variant named"
        raise FabricLabError(f"--variants: {args.spec} has {which} (it has "
                             f"{', '.join(by_variant)})")
    return [by_variant[v] for v in wanted]


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise FabricLabError(f"--out {args.out} is a file; name a directory for the run "
                             "directories")
    # simulated links are not shaped: the emulator's top rate does not bind them
    experiments = load_experiments(args.spec, shaped=args.backend != "sim")
    experiments = chosen(experiments, experiment_name(args.spec), args)
    backend = backend_of(args)
    for exp in experiments:  # every variant is checked before the first one runs
        try:
            backend.check(exp)
        except FabricLabError as exc:
            where = f"{args.spec}" + (f" (run {exp.name})" if len(experiments) > 1 else "")
            raise FabricLabError(f"{where}: {exc}") from None
    console = out_console()
    run_dirs, failed = [], 0
    for exp, repeat in ((e, k) for e in experiments for k in range(e.repeats)):
        run_dir = backend_of(args, repeat).run(exp, args.out, console)
        run_dirs.append(run_dir)
        table, status = summary_table(run_dir)
        console.print(table)
        console.print(f"run directory: {run_dir}"
                      + (f" (repeat {repeat + 1} of {exp.repeats})" if exp.repeats > 1 else ""))
        failed += status != "ok"
        if status == "incomplete":
            break  # Ctrl-C stops the whole experiment
    if not args.no_report:
        try:
            from analysis.report import build_report
        except ImportError:
            console.print("[yellow]analysis is not installed: no report written")
        else:
            name = experiment_name(args.spec)
            out = (run_dirs[0] if len(run_dirs) == 1
                   else new_run_dir(args.out, f"{name}-report"))
            path, headlines = build_report(run_dirs, out, name)
            console.print(f"report: {path}")
            untrusted = [h for h in headlines if any("fidelity" in c for c in h.caveats)]
            if untrusted:  # said first, so no headline below reads as a finding
                console.print(f"[bold red]not faithful:[/bold red] {len(untrusted)} of "
                              f"{len(headlines)} headlines compare runs that failed their "
                              "fidelity check (the report says which invariant tripped)",
                              highlight=False)
            for h in headlines:  # the answer, last: what the experiment found
                if h in untrusted:
                    console.print(f"[bold]{h.title}[/bold] — not a finding, "
                                  f"{'; '.join(h.caveats)} (measured: {h.sentence})",
                                  highlight=False)
                else:
                    console.print(f"[bold]{h.title}[/bold] — {h.sentence}", highlight=False)
    return 1 if failed else 0
