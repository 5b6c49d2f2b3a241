"""`fabriclab topo SPEC`: validate a fabric spec and show (or export) the plan, no root needed."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from testbed.core.atomic import write_text
from testbed.core.spec import load_fabric
from testbed.core.topology import build_plan


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topo")
    p.add_argument("spec", help="YAML file with a fabric: block")
    p.add_argument("--json", type=Path, default=None, help="write the topology JSON here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    plan = build_plan(load_fabric(args.spec))
    roles = Counter(s.role for s in plan.switches)
    kinds = Counter(lk.kind for lk in plan.links)
    print(f"{plan.kind}: {len(plan.hosts)} hosts, {len(plan.switches)} switches "
          f"({', '.join(f'{n} {r}' for r, n in sorted(roles.items()))}), "
          f"{len(plan.links)} links ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})")
    if args.json:
        write_text(args.json, plan.to_json())
        print(f"written {args.json}")
    return 0
