"""`fabriclab topo SPEC`: validate a fabric spec and show (or export) the plan, no root needed."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from testbed.core.atomic import write_text
from testbed.core.out_dir import FORCE_HELP, check_out_dir, clear_out_dir
from testbed.core.topology import load_plan


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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_out_dir(args.out, args.force)
    plan = load_plan(args.spec)
    if args.json:
        print(plan.to_json())
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
    if args.out is not None:
        clear_out_dir(args.out)
        write_text(args.out / "topology.json", plan.to_json())
        print(f"written {args.out / 'topology.json'}")
    return 0


def _rates(plan) -> str:
    return ", ".join(f"{r:g}" for r in sorted({lk.mbit_s for lk in plan.links}))


def _listing(names: list[str], shown: int = 12) -> str:
    """``a, b, c`` — the first ``shown`` and how many more, so a 192-link fabric is a line."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f", … and {more} more" if more > 0 else "")
