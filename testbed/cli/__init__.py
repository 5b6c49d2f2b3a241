"""The `fabriclab` command line: one module per command, imported only when that command runs
(so ``fabriclab topo`` loads neither pandas nor the simulator).

Each module defines ``register(subparsers)``, which adds its parser(s) and sets ``func`` to a
callable taking the parsed args and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from testbed.core.errors import FabricLabError

COMMANDS = {  # command -> the module that registers it
    "doctor": "testbed.cli.doctor",
    "clean": "testbed.cli.clean",
    "calibrate": "testbed.cli.calibrate",
    "topo": "testbed.cli.topo",
    "run": "testbed.cli.run",
    "allreduce": "testbed.cli.allreduce",
    "plan": "testbed.cli.plan",
    "model": "testbed.cli.plan",
    "simulate-cluster": "testbed.cli.simulate_cluster",
    "report": "testbed.cli.report",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with a known ``command``, only that command's module is imported."""
    parser = argparse.ArgumentParser(
        prog="fabriclab",
        description="Emulated testbed for the network side of distributed training.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(command).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except FabricLabError as exc:
        print(f"fabriclab {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:  # a spec or trace file that is not text
        print(f"fabriclab {args.command}: error: an input file is not UTF-8 text (byte "
              f"{exc.start}: {exc.object[exc.start:exc.start + 1]!r})", file=sys.stderr)
        return 2
    except OSError as exc:  # a path the user gave: missing, a directory, not a directory ...
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"fabriclab {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fabriclab {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
