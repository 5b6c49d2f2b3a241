"""Programs for ``command`` jobs (:mod:`testbed.emulator.commands`): real framework jobs that
follow the iteration-log convention (:mod:`workloads.iteration_log`)."""

from __future__ import annotations

import os
import sys

NO_TORCH = ("torch is not installed here: run this in the fabriclab/worker-torch image "
            "(`fabriclab images --torch`) or `pip install -e '.[peers]'`")


def exit_now(code: int) -> None:
    """Flush and leave without the interpreter's teardown: torch's Gloo threads can abort it
    ("terminate called without an active exception") after a run that finished fine."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
