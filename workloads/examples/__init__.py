"""Programs for ``command`` jobs (:mod:`testbed.emulator.commands`): real framework jobs that
follow the iteration-log convention (:mod:`workloads.iteration_log`)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from typing import Any

NO_TORCH = ("torch is not installed here: run this in the fabriclab/worker-torch image "
            "(`fabriclab images --torch`) or `pip install -e '.[peers]'`")


def parse_and_init(ap: argparse.ArgumentParser) -> tuple[argparse.Namespace, Any]:
    """``ap``'s arguments (with ``--timeout-s`` added) and :func:`init_gloo`'s ``torch``
    (None: missing)."""
    ap.add_argument("--timeout-s", type=float, default=600.0)
    args = ap.parse_args()
    return args, init_gloo(args.timeout_s)


def init_gloo(timeout_s: float) -> Any:
    """``torch`` with one thread and the Gloo process group up (``env://``: RANK,
    WORLD_SIZE, MASTER_ADDR, MASTER_PORT); None, after saying why, if torch is missing."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print(NO_TORCH, file=sys.stderr)
        return None
    torch.set_num_threads(1)  # fabriclab's workers reduce on one thread as well
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return torch


def exit_now(code: int) -> None:
    """Flush and leave without the interpreter's teardown: torch's Gloo threads can abort it
    ("terminate called without an active exception") after a run that finished fine."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def print_iteration(iteration: int, time_s: float, warmup: bool, size_bytes: int) -> None:
    """One iteration-log line on stdout (:mod:`workloads.iteration_log`)."""
    print(json.dumps({"fabriclab": "iteration", "iteration": iteration, "time_s": time_s,
                      "warmup": warmup, "bytes": size_bytes}), flush=True)


def finish(dist: Any, ok: bool, failure: str) -> int:
    """Take the process group down; the exit code: 0, or 3 after printing ``failure`` (this
    rank's sentence) when the check failed."""
    dist.destroy_process_group()
    if not ok:
        print(failure, file=sys.stderr)
        return 3
    return 0
