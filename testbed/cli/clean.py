"""``fabriclab clean``: remove what crashed runs left, and only what they can be proven to have
made (see :mod:`testbed.emulator.cleanup`), and the records of ``fabriclab up`` sessions that
were killed (:mod:`testbed.emulator.up_record`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("clean")
    p.add_argument("--servers", type=Path, metavar="FILE",
                   help="also the servers this file names: what crashed runs left on them "
                   "(stand-in servers keep their records on this machine)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from testbed.emulator import up_record
    from testbed.emulator.cleanup import clean_stale
    from testbed.emulator.preflight import require_root

    require_root("clean up after a run")
    if args.servers is not None:
        from testbed.cli.run import servers_of

        servers_of(args)  # a bad file, or one naming real machines, is refused
    report = clean_stale() + up_record.forget_stale()
    for line in report:
        print(line)
    if not report:
        print("nothing to clean: no crashed fabriclab run left anything behind")
    return 1 if any("could not" in ln or "not running" in ln or "does not answer" in ln
                    for ln in report) else 0
