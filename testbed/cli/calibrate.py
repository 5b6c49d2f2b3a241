"""``fabriclab calibrate``: saturate every link of a fabric and compare achieved with configured
rates (exit 1 if the fabric is not faithful)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from testbed.core.errors import FabricLabError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate")
    p.add_argument("spec", help="YAML file with a fabric: block")
    p.add_argument("--out", type=Path, default=None,
                   help="run directory, which must not exist yet unless --force "
                        "(default results/<timestamp>-calibrate)")
    p.add_argument("--force", action="store_true",
                   help="with --out: take an existing directory of yours that no other user "
                   "can write, and empty it first (symlinks in it are removed, never followed)")
    p.add_argument("--seconds", type=float, default=4.0, help="length of each round")
    p.add_argument("--budget", type=float, default=800.0,
                   help="offered load per round in link-Mbit/s (sum of rate x links crossed)")
    p.add_argument("--max-flows", type=int, default=4, help="concurrent flows per round")
    p.add_argument("--switches", choices=("auto", "ovs", "kernel"), default="auto",
                   help="the switches to calibrate: kernel bridges where the fabric's default "
                        "routing allows (auto), Open vSwitch, or kernel bridges")
    p.add_argument("--servers", type=Path, metavar="FILE",
                   help="spread the fabric over the servers this file names (made by "
                   "`fabriclab servers local N --out FILE`); Open vSwitch only")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sdn_app.policies import controller_policy
    from testbed.cli.terminal import out_console
    from testbed.core.atomic import write_json
    from testbed.core.out_dir import check_out_dir, clear_out_dir, mark_out_dir
    from testbed.core.rundir import new_run_dir
    from testbed.core.safe_paths import make_dir, require_own_dir
    from testbed.core.topology import load_plan
    from testbed.emulator import switch_kinds
    from testbed.emulator.calibrate import calibrate, print_calibration

    if args.seconds < 2:
        raise FabricLabError("--seconds must be at least 2 (one second is warm-up)")
    plan = load_plan(args.spec)
    # a directory this run makes itself: never one that exists (another user may own it)
    if args.out:
        check_out_dir(args.out, args.force)
    if args.out and args.force and os.path.lexists(args.out):
        out = clear_out_dir(require_own_dir(args.out))
    elif args.out:
        out = mark_out_dir(make_dir(args.out))
    else:
        out = new_run_dir(Path("results"), "calibrate")
    console = out_console()
    from testbed.cli.run import servers_of
    from testbed.core.placement import place

    servers = servers_of(args)
    if servers is not None:
        place(plan, servers)  # refused before anything is made
    switches = switch_kinds.resolve("ovs" if servers else args.switches, plan,
                                    controller_policy(plan, None))

    def progress(done: int, total: int) -> None:
        console.print(f"  round {done}/{total} done", highlight=False)

    cal = calibrate(plan, out, seconds=args.seconds, budget=args.budget,
                    max_flows=args.max_flows, progress=progress, switches=switches,
                    servers=servers)
    path = out / "calibration.json"
    write_json(path, cal.to_dict())
    print_calibration(cal, console)
    for warning in spec_warnings(args.spec, plan, cal.faithful_load_link_mbit_s):
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    console.print(f"written {path}")
    return 0 if not cal.failures else 1


def spec_warnings(spec: str, plan, limit_link_mbit_s: float | None) -> list[str]:
    """A sentence for each run of ``spec`` (an experiment, if it has jobs) on the calibrated
    fabric that offers more load than the calibration showed faithful."""
    from testbed.core.experiment import load_experiments
    from testbed.core.load_limit import load_warning, offered_load_link_mbit_s
    from testbed.core.spec import load_yaml
    from testbed.core.topology import build_plan

    data = load_yaml(spec)
    if not isinstance(data, dict) or not data.get("jobs"):
        return []
    out = []
    for exp in load_experiments(spec):
        if build_plan(exp.fabric, exp.rate_scale) != plan:
            continue  # a variant on another fabric: this calibration does not speak for it
        if w := load_warning(f"run {exp.name}", offered_load_link_mbit_s(exp, plan),
                             limit_link_mbit_s):
            out.append(w)
    return out
