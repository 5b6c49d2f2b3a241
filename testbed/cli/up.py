"""``fabriclab up SPEC``: bring a fabric and its controller up and keep them up, in Mininet's CLI
or (``--wait``) until Ctrl-C or SIGTERM, then tear everything down the way a run does.

While it is up, ``fabriclab jobs`` places jobs through its controller: ``up`` leaves a record
of where it is (:mod:`testbed.emulator.up_record`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.core.errors import FabricLabError, SpecError

if TYPE_CHECKING:  # imported when a command runs, not when `fabriclab --help` lists it
    from testbed.core.servers import ServersSpec
    from testbed.core.topology import FabricPlan
    from testbed.emulator.fabric import Fabric
    from testbed.emulator.up_record import UpRecord


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", description=(
        "Bring a fabric and its controller up and keep them up: in Mininet's CLI (when stdin "
        "is a terminal) or with --wait until Ctrl-C or SIGTERM; then tear everything down as "
        "a run does. `fabriclab jobs` places jobs on it meanwhile."))
    p.add_argument("spec", help="YAML file with a fabric: block (a fabric spec or an experiment)")
    p.add_argument("--policy", default=None,
                   help="the controller's routing policy, or static (no controller); default: "
                   "the file's top-level policy:, else the fabric's default")
    p.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                   help="the parent directory: up makes a new run directory "
                   "<timestamp>-up inside it; nothing already in it is touched (default "
                   "results/)")
    p.add_argument("--servers", type=Path, metavar="FILE",
                   help="spread the fabric over the servers this file names (made by "
                   "`fabriclab servers local N --out FILE`)")
    p.add_argument("--wait", action="store_true",
                   help="no CLI: keep the fabric up until Ctrl-C or SIGTERM (what happens "
                   "anyway when stdin is not a terminal)")
    p.set_defaults(func=run)


class Stop(BaseException):
    """A signal that ends ``up`` (SIGTERM, SIGHUP; Ctrl-C under ``--wait``). Not a
    KeyboardInterrupt: Mininet's CLI swallows those."""


def spec_policy(data: Any, path: str) -> str | None:
    """The top-level ``policy:`` of the file, if it has one (an experiment's, unexpanded)."""
    name = data.get("policy") if isinstance(data, dict) else None
    if name is not None and not isinstance(name, str):
        raise SpecError(f"{path}: policy: expected a policy name, got {name!r}")
    return name


def resolve_policy(plan: FabricPlan, flag: str | None, data: Any, path: str) -> str | None:
    """What the controller runs (None: static rules, no controller), checked against the
    fabric: ``--policy``, else the file's (``data``, read from ``path``), else the fabric's
    default."""
    from sdn_app.policies import controller_policy
    from testbed.core.experiment import STATIC_POLICY
    from testbed.core.registry import POLICIES

    name = flag if flag is not None else spec_policy(data, path)
    if name is not None and name != STATIC_POLICY:
        POLICIES.check(name)
    return controller_policy(plan, name)


def run(args: argparse.Namespace) -> int:
    from testbed.core.spec import load_yaml
    from testbed.core.topology import load_plan
    from testbed.emulator import preflight

    plan = load_plan(args.spec)
    data = load_yaml(args.spec)
    policy = resolve_policy(plan, args.policy, data, args.spec)
    from testbed.cli.run import servers_of
    from testbed.core.placement import place
    from testbed.core.servers import server_rundirs

    servers = servers_of(args)
    if servers is not None:
        place(plan, servers)  # refused before anything is made
    preflight.require_fabric_ready(None if servers is None else server_rundirs(servers))
    interactive = not args.wait and sys.stdin is not None and sys.stdin.isatty()
    if isinstance(data, dict) and data.get("jobs"):
        print(f"note: up places none of the jobs in {args.spec}: place jobs with "
              "`fabriclab jobs add`", flush=True)
    if not args.wait and not interactive:
        print("stdin is not a terminal: no CLI; the fabric stays up until Ctrl-C or SIGTERM",
              flush=True)
    return keep_up(plan, policy, args.spec, args.out, interactive, servers)


def keep_up(plan: FabricPlan, policy: str | None, spec: str, out: Path, interactive: bool,
            servers: ServersSpec | None = None) -> int:
    """Hold the machine's fabric, bring it up, serve it, tear it down; the exit code."""
    from testbed.core.rundir import new_run_dir
    from testbed.emulator import runlock, up_record
    from testbed.emulator.fabric import Fabric

    how = ("leave its Mininet CLI with exit" if interactive else "press Ctrl-C where it runs")
    with runlock.exclusive_run(f"fabriclab up {spec}",
                               f"{how}, or stop it with `kill {os.getpid()}`"):
        up_record.forget_stale()
        run_dir = new_run_dir(out, "up").resolve()
        print(f"bringing up {plan.kind} ({len(plan.hosts)} hosts) with policy "
              f"{policy or 'static'} in {run_dir}", flush=True)
        fab = Fabric(plan, run_dir, policy=policy, servers=servers)
        fab.start()  # tears itself down if bring-up fails or is interrupted
        try:
            return serve(fab, spec, interactive)
        finally:
            if fab.state is not None:  # interrupted before serve() reached its teardown
                fab.stop()


def serve(fab: Fabric, spec: str, interactive: bool) -> int:
    """Record where the fabric is, say so, keep it up; then tear it down and report."""
    from testbed.emulator import up_record

    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        if not stopping:  # one is enough: the teardown holds any later ones
            stopping = True
            raise Stop

    record: UpRecord | None = None
    problem: str | None = None
    # SIGHUP: its terminal closed (unless ignored, as under nohup). Ctrl-C is the CLI's own
    # (it interrupts a command there). SIGTERM is restored by Fabric.stop(), the others below.
    ended_by = (signal.SIGHUP,) if interactive else (signal.SIGHUP, signal.SIGINT)
    old = {sig: signal.signal(sig, on_signal) for sig in ended_by
           if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        signal.signal(signal.SIGTERM, on_signal)
        assert fab.state is not None
        ctl = fab.controller
        record = up_record.UpRecord.of(
            fab.state.run_id, fab.run_dir, spec, fab.plan, fab.policy,
            ctl.api_socket if ctl else None, ctl.of_port if ctl else None)
        record.save()
        print("\n".join(where(record, fab.plan, interactive)), flush=True)
        if interactive:
            from testbed.emulator.mn_cli import FabricCLI

            FabricCLI(fab)
        else:
            problem = watch(fab)
    except (KeyboardInterrupt, Stop):
        pass
    finally:  # nothing here may raise before the teardown (the terminal may be gone)
        with contextlib.suppress(OSError):
            if record is not None:
                record.forget()
            print("tearing the fabric down", flush=True)
        try:
            left = fab.stop()
        except KeyboardInterrupt:  # held back until the teardown was done
            left = fab.leftovers
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if left:
        print(f"fabriclab up: teardown left {', '.join(left)}: run `fabriclab clean` (as root, "
              "once Open vSwitch runs)", file=sys.stderr)
    if problem:
        print(f"fabriclab up: error: {problem}", file=sys.stderr)
    if not left:
        print("fabric down: nothing left", flush=True)
    return 1 if left or problem else 0


def watch(fab: Fabric) -> str | None:
    """Keep the fabric up until Ctrl-C or SIGTERM, checking it once a second as a run does (a
    controller that died is restarted). Returns the sentence that ends it early: Open vSwitch
    stopped, or a restarted controller that never came up."""
    from testbed.emulator.preflight import ovs_running

    shown: str | None = None
    restarts = 0
    while True:
        time.sleep(1.0)
        try:
            problem = fab.health()
        except FabricLabError as exc:
            return str(exc)
        if len(fab.restarts) > restarts:
            restarts = len(fab.restarts)
            print("the controller had exited; restarted it (running jobs reinstalled)",
                  flush=True)
        if problem and not ovs_running():
            return problem
        if problem and problem != shown:
            print(f"warning: {problem}", flush=True)
        shown = problem


def where(record: UpRecord, plan: FabricPlan, interactive: bool) -> list[str]:
    """What ``up`` prints once the fabric is up: where everything is and how to use it."""
    lines = [f"fabric up: {plan.kind}, {len(plan.hosts)} hosts, {len(plan.switches)} switches, "
             f"policy {record.policy or 'static (no controller)'}",
             f"  run directory   {record.run_dir}",
             "  hosts"]
    for h in plan.hosts:
        place = f"leaf{h.leaf}" if h.leaf is not None else f"coords {list(h.coords)}"
        lines.append(f"    {h.name:<6}{', '.join(record.hosts[h.name]):<24}{place}")
    if record.api_socket is not None:
        from sdn_app.listeners import API_HOST

        lines.insert(2, f"  controller API  the Unix socket {record.api_socket}, root only (GET "
                        f"/health /jobs /topology with Host: {API_HOST}; OpenFlow on "
                        f"127.0.0.1:{record.openflow_port})")
        lines.append("  place jobs from another shell (as root):")
        first, last = plan.hosts[0].name, plan.hosts[-1].name
        lines.append(f"    fabriclab jobs add pinned --hosts {first},{last}"
                     if first != last else f"    fabriclab jobs add pinned --hosts {first}")
        if len(plan.hosts) >= 4:
            lines.append("    fabriclab jobs add train --size 2")
        lines += ["    fabriclab jobs list", "    fabriclab jobs remove pinned"]
    else:
        lines.append("  no controller (policy static): jobs cannot be placed")
    if len(plan.hosts) >= 2:
        src = plan.hosts[0]
        dst = plan.hosts[1] if plan.kind == "multidim" else plan.hosts[-1]  # a reachable pair
        lines.append(f"  a command in a host from another shell: nsenter "
                     f"--net={record.netns(src.name)} ping -c1 {record.hosts[dst.name][0]}")
        if interactive:
            lines.append(f"  below: Mininet's CLI (`{src.name} ping -c1 {dst.name}`, `pingall`)")
    if interactive:
        lines.append("  `exit` or Ctrl-D in the CLI tears it all down")
    else:
        lines.append(f"  Ctrl-C here, or `kill {record.pid}`, tears it all down")
    return lines
