"""The `fabriclab` command line: one module per command, imported only when that command runs
(so ``fabriclab topo`` loads neither pandas nor the simulator).

Each module defines ``register(subparsers)``, which adds its parser(s) and sets ``func`` to a
callable taking the parsed args and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from testbed.core.errors import FabricLabError

COMMANDS = {  # command -> (the module that registers it, its line in `fabriclab --help`)
    "doctor": ("testbed.cli.doctor", "check what the testbed needs on this machine (root for "
               "a full check)"),
    "clean": ("testbed.cli.clean", "remove bridges, interfaces and processes of crashed runs "
              "(root)"),
    "images": ("testbed.cli.images", "build the Docker images of container hosts, from a "
               "local Debian 12 (root)"),
    "calibrate": ("testbed.cli.calibrate", "saturate every link and check achieved vs "
                  "configured rates (root)"),
    "up": ("testbed.cli.up", "bring a fabric and its controller up and keep them up, in "
           "Mininet's CLI or until Ctrl-C (root)"),
    "jobs": ("testbed.cli.jobs", "list, place and remove jobs on the fabric `fabriclab up` "
             "keeps up (root)"),
    "topo": ("testbed.cli.topo", "validate a fabric spec and print or export its topology"),
    "run": ("testbed.cli.run", "run an experiment (all its variants) and write a report "
            "(root, or --backend sim)"),
    "allreduce": ("testbed.cli.allreduce", "run All-Reduce across local worker processes "
                  "(loopback)"),
    "plan": ("testbed.cli.plan", "show the chunk plan (dimension order per chunk) of a "
             "hierarchical All-Reduce"),
    "model": ("testbed.cli.plan", "predict the time and bandwidth utilisation of a "
              "hierarchical All-Reduce"),
    "simulate-cluster": ("testbed.cli.simulate_cluster", "run a job trace on a simulated "
                         "leaf-spine cluster"),
    "sweep": ("testbed.cli.sweep", "run a grid of simulate-cluster runs on Dask (local "
              "processes or a scheduler) and tabulate them"),
    "import-astra": ("testbed.cli.astra", "make a fabric or experiment spec from ASTRA-sim "
                     "network and system files"),
    "export-astra": ("testbed.cli.astra", "write ASTRA-sim network and system files from a "
                     "multidim spec or a preset"),
    "simulate-astra": ("testbed.cli.simulate_astra", "replay an ASTRA-sim 1.0 workload on "
                       "its network and system files, as AnalyticalAstra does"),
    "report": ("testbed.cli.report", "turn run directories into report.html and report.md"),
    "vm": ("testbed.cli.vm", "build and boot the stock-kernel Debian 12 VM: run a command in "
           "it, run the fresh-machine check, build the Vagrant box (root)"),
    "servers": ("testbed.cli.servers", "start or stop stand-in servers on this machine (for "
                "--servers), or say how they are (root)"),
    "examples": ("testbed.cli.examples", "write example inputs: the built-in Themis workloads "
                 "as ASTRA-sim text, Chakra traces and the network they replay on"),
}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default, unless it has none or its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


class _Commands:
    """The subparsers, giving every command its line from :data:`COMMANDS` (also its
    description unless the module gives one) and the defaults-showing help formatter."""

    def __init__(self, sub: argparse._SubParsersAction) -> None:
        self.sub = sub

    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser:
        line = COMMANDS[name][1]
        kwargs.setdefault("description", line[0].upper() + line[1:] + ".")
        kwargs.setdefault("formatter_class", HelpFormatter)
        return self.sub.add_parser(name, help=line, **kwargs)


def version() -> str:
    """The installed fabriclab's version, and the checkout's commit when it runs from one."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        text = installed("fabriclab")
    except PackageNotFoundError:
        text = "(not installed)"
    checkout = Path(__file__).resolve().parents[2]
    try:
        ref = _git_head(checkout / ".git")
        text += f" (commit {ref[:12]}, checkout {checkout})"
    except OSError:
        text += f" (from {checkout})"
    return f"fabriclab {text}"


def _git_head(git: Path) -> str:
    """The commit ``HEAD`` names in the ``.git`` of a checkout or a worktree (a ``.git`` file
    pointing at its own git directory, refs shared with the main one)."""
    if git.is_file():  # a worktree: "gitdir: /repo/.git/worktrees/NAME"
        git = Path(git.read_text().strip().removeprefix("gitdir: "))
    ref = (git / "HEAD").read_text().strip()
    if not ref.startswith("ref: "):
        return ref
    for root in (git, git / ".." / ".."):  # a worktree's refs live in the main .git
        loose = root / ref[5:]
        if loose.is_file():
            return loose.read_text().strip()
        packed = root / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref[5:]):
                    return line.split()[0]
    raise OSError(f"{ref[5:]} not found")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser. With a known ``command`` only that command's module is imported; without
    one (``fabriclab --help``) none is: the listing comes from :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="fabriclab",
        description="Emulated testbed for the network side of distributed training. Commands "
        "marked (root) need root; the rest run as any user.",
    )
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if command in COMMANDS:
        importlib.import_module(COMMANDS[command][0]).register(_Commands(sub))
    else:
        for name, (_module, line) in COMMANDS.items():
            sub.add_parser(name, help=line)
    return parser


CHECKOUT = Path(__file__).resolve().parents[2]


def require_safe_checkout(checkout: Path | None = None) -> None:
    """As root, refuse to run code from a checkout another user could change (one sentence
    naming the fix); an installed package (no pyproject.toml beside it) is not checked."""
    from testbed.core.safe_paths import checkout_problem

    checkout = checkout or CHECKOUT
    if os.geteuid() == 0 and (checkout / "pyproject.toml").is_file() \
            and (problem := checkout_problem(checkout)):
        raise FabricLabError(problem)


def dash_values_joined(parser: argparse.ArgumentParser, command: str | None,
                       argv: list[str]) -> list[str]:
    """``argv`` with ``--flag VALUE`` written ``--flag=VALUE`` where the flag takes one value
    and the value starts with ``-`` but is no option of the command (``--bw -100,50``), so
    argparse hands the value to the flag, whose check names what is wrong with it, instead of
    saying "expected one argument"."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if sub is None or command not in sub.choices:
        return argv
    options = sub.choices[command]._option_string_actions
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg, nxt = argv[i], argv[i + 1] if i + 1 < len(argv) else None
        action = options.get(arg)
        takes_one = action is not None and action.nargs is None and not isinstance(
            action, (argparse._StoreConstAction, argparse._StoreTrueAction,
                     argparse._CountAction, argparse._HelpAction, argparse._VersionAction))
        if takes_one and nxt is not None and nxt.startswith("-") and nxt != "--" and not any(
                o.startswith(nxt.split("=")[0]) for o in options):
            out.append(f"{arg}={nxt}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
    args = parser.parse_args(dash_values_joined(parser, command, argv))
    try:
        require_safe_checkout()
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
