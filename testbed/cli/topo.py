"""`fabriclab topo SPEC [--servers FILE]`: validate a fabric spec and show (or export) the plan,
and with a servers file where each host and switch would run; no root needed."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from testbed.core.atomic import write_text
from testbed.core.out_dir import FORCE_HELP, check_out_dir, clear_out_dir
from testbed.core.placement import Placement, place
from testbed.core.servers import ServersSpec, load_servers
from testbed.core.topology import FabricPlan, load_plan


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topo", description="Validate a fabric spec (or an experiment file's "
                       "fabric: block) and print its hosts, switches and links; no root needed.")
    p.add_argument("spec", help="YAML file with a fabric: block")
    p.add_argument("--json", action="store_true",
                   help="print the topology as JSON (what runs save as topology.json)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="write DIR/topology.json (DIR: new or empty; an existing non-empty "
                   "one is refused unless --force)")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--servers", type=Path, default=None, metavar="FILE",
                   help="a servers file (README, \"Several servers\"): also print which "
                   "server each host and switch would run on and the links that cross "
                   "between servers (with --json: under \"placement\")")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_out_dir(args.out, args.force)
    plan = load_plan(args.spec)
    servers = load_servers(args.servers) if args.servers is not None else None
    placement = place(plan, servers) if servers is not None else None
    if args.json:
        print(plan.to_json() if placement is None else
              json.dumps(plan.to_dict() | {"placement": placement.to_json()}, indent=1))
        return 0
    roles = Counter(s.role for s in plan.switches)
    kinds = Counter(lk.kind for lk in plan.links)
    print(f"{plan.kind}: {len(plan.hosts)} hosts, {len(plan.switches)} switches "
          f"({', '.join(f'{n} {r}' for r, n in sorted(roles.items()))}), "
          f"{len(plan.links)} links ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})")
    print("hosts:    " + _listing([h.name for h in plan.hosts]))
    for role in sorted(roles):
        print(f"{role + ':':<9} " + _listing([sw.name for sw in plan.switches
                                               if sw.role == role]))
    groups: dict[tuple[str, float], list[str]] = {}
    for lk in plan.links:
        groups.setdefault((lk.kind, lk.mbit_s), []).append(f"{lk.a}–{lk.b}")
    for (kind, mbit_s), names in sorted(groups.items()):
        print(f"{len(names)} {kind} links at {mbit_s:g} Mbit/s: " + _listing(names))
    if plan.rate_scale != 1:
        print(f"rates scaled ×{plan.rate_scale:g} (rate_scale): the links are emulated at "
              f"{_rates(plan)} Mbit/s")
    if placement is not None and servers is not None:
        _print_placement(plan, servers, placement)
    if args.out is not None:
        clear_out_dir(args.out)
        write_text(args.out / "topology.json", plan.to_json())
        print(f"written {args.out / 'topology.json'}")
    return 0


def _print_placement(plan: FabricPlan, servers: ServersSpec, placement: Placement) -> None:
    """Each server's hosts and switches, then the links between servers and their tunnels."""
    print(f"on {len(placement.servers)} servers ({placement.rule}):")
    for name in placement.servers:
        nodes = placement.nodes_on(name)
        hosts = [n for n in nodes if plan.is_host(n)]
        switches = [n for n in nodes if not plan.is_host(n)]
        server = servers.by_name(name)
        print(f"  {name} ({server.ssh}, tunnels from {server.lan_ip}): {len(hosts)} hosts: "
              f"{_listing(hosts) or '-'}; {len(switches)} switches: {_listing(switches) or '-'}")
    crossing = placement.crossing
    if not crossing:
        print("no link crosses between servers")
        return
    kinds = Counter(c.link.kind if c.link.dim is None else f"of dimension {c.link.dim}"
                    for c in crossing)
    print(f"{len(crossing)} links cross between servers "
          f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), each a "
          f"{placement.tunnel} tunnel (VNI {crossing[0].vni} to {crossing[-1].vni}), the "
          f"emulated interfaces at MTU {placement.mtu}: "
          + _listing([f"{c.link.a}–{c.link.b}" for c in crossing]))


def _rates(plan) -> str:
    return ", ".join(f"{r:g}" for r in sorted({lk.mbit_s for lk in plan.links}))


def _listing(names: list[str], shown: int = 12) -> str:
    """``a, b, c`` — the first ``shown`` and how many more, so a 192-link fabric is a line."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f", … and {more} more" if more > 0 else "")
