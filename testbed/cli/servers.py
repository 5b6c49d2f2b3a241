"""``fabriclab servers``: stand-in servers on this machine for trying a fabric spread over
several servers (issue #43): ``servers local N --out FILE`` starts N and writes their servers
file, ``servers stop`` removes them and everything they made, ``servers status`` says how
each is (:mod:`testbed.emulator.standins`). Root."""

from __future__ import annotations

import argparse
from pathlib import Path

from testbed.core.errors import FabricLabError


def _count(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (1 to 8)") from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("servers")
    cmds = p.add_subparsers(dest="servers_command", required=True,
                            metavar="{local,stop,status}")
    local = cmds.add_parser("local", help="start N stand-in servers (namespaces with their own "
                            "Open vSwitch and sshd, on a LAN bridge) and write their servers file")
    local.add_argument("n", type=_count, metavar="N", help="how many stand-ins: 1 to 8")
    local.add_argument("--out", type=Path, required=True,
                       help="the servers file to write (for --servers)")
    cmds.add_parser("stop", help="remove the stand-ins and everything they made")
    cmds.add_parser("status", help="one line per stand-in: alive, reachable over ssh")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from testbed.emulator import standins
    from testbed.emulator.preflight import require_root

    if args.servers_command == "local":
        standins.check_count(args.n)
        require_root("start stand-in servers")
        print(standins.start(args.n, args.out, standins.progress_to_stderr))
        return 0
    if args.servers_command == "stop":
        require_root("stop stand-in servers")
        lines = standins.stop()
        for line in lines:
            print(line)
        return 1 if lines[-1].startswith("could not") else 0
    require_root("check stand-in servers")
    state = standins.StandinsState.load()
    if state is None:
        print("no stand-in servers: start them with `fabriclab servers local N --out FILE`")
        return 0
    if not state.ready:
        raise FabricLabError("the stand-in servers were left half-made: run `fabriclab "
                             "servers stop`")
    report = standins.health(state)
    for h in report:
        print(h.line())
    return 0 if all(h.alive and h.ssh_error is None for h in report) else 1
