"""`fabriclab topo SPEC`: validate a fabric spec and show (or export) the plan, no root needed."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from testbed.core.atomic import write_text
from testbed.core.topology import load_plan


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topo", description="Validate a fabric spec (or an experiment file's "
                       "fabric: block) and print its hosts, switches and links; no root needed.")
    p.add_argument("spec", help="YAML file with a fabric: block")
    p.add_argument("--json", action="store_true",
                   help="print the topology as JSON (what runs save as topology.json)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="write DIR/topology.json (DIR is created if missing)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    plan = load_plan(args.spec)
    if args.json:
        print(plan.to_json())
        return 0
    roles = Counter(s.role for s in plan.switches)
    kinds = Counter(lk.kind for lk in plan.links)
    print(f"{plan.kind}: {len(plan.hosts)} hosts, {len(plan.switches)} switches "
          f"({', '.join(f'{n} {r}' for r, n in sorted(roles.items()))}), "
          f"{len(plan.links)} links ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})")
    if plan.rate_scale != 1:
        print(f"rates scaled ×{plan.rate_scale:g} (rate_scale): the links are emulated at "
              f"{_rates(plan)} Mbit/s")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        write_text(args.out / "topology.json", plan.to_json())
        print(f"written {args.out / 'topology.json'}")
    return 0


def _rates(plan) -> str:
    return ", ".join(f"{r:g}" for r in sorted({lk.mbit_s for lk in plan.links}))
