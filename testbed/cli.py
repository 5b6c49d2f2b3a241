"""The `fabriclab` command line: one subcommand per module in COMMAND_MODULES.

Each module defines ``register(subparsers)``, which adds its parser and sets
``func`` to a callable taking the parsed args and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from testbed.errors import FabricLabError

COMMAND_MODULES = [
    "testbed.doctor",
    "testbed.cleanup",
    "testbed.calibrate",
    "testbed.topo_cli",
    "testbed.run_cli",
    "workloads.allreduce_cli",
    "workloads.plan_cli",
    "testbed.sim.cli",
    "analysis.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fabriclab",
        description="Emulated testbed for the network side of distributed training.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except FabricLabError as exc:
        print(f"fabriclab {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fabriclab {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
