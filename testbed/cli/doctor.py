"""`fabriclab doctor`: one line per prerequisite, with the fix for each one that fails."""

from __future__ import annotations

import argparse

from rich.table import Table

from testbed.cli.terminal import out_console
from testbed.emulator.preflight import checks


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    table = Table(title="fabriclab doctor")
    for col in ("check", "status", "detail", "fix"):
        table.add_column(col)
    failed = 0
    for c in checks():
        status = ("ok" if c.ok else "unknown" if not c.known
                  else "FAIL" if c.required else "optional")
        failed += (not c.ok) and c.required
        table.add_row(c.name, status, c.detail, "" if c.ok else c.fix)
    out_console().print(table)
    return 1 if failed else 0
