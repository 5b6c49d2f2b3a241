"""`fabriclab examples`: write the example inputs the docs' `simulate-astra` and `file:` lines
use (the built-in Themis workloads as ASTRA-sim 1.0 text, Chakra traces with the network and
system they replay on; :mod:`workloads.training.examples`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from testbed.core.out_dir import FORCE_HELP, check_out_dir, clear_out_dir
from workloads.training.examples import write_examples


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "examples",
        description="Write example inputs: themis-*.txt (each built-in Themis workload as "
        "ASTRA-sim 1.0 workload text), chakra/allreduce-8npus-1MiB/trace.{0..7}.et "
        "(astra-sim's All-Reduce microbenchmark), chakra/training/trace.{0..7}.et (a "
        "multi-layer training trace) and chakra/network.yml, chakra/system.txt (the 8-NPU "
        "ring they replay on).")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="the directory to write into (created; an existing non-empty one is "
                   "refused unless --force)")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = clear_out_dir(check_out_dir(args.out, args.force))
    written = write_examples(out)
    print(f"written {len(written)} files into {out}")
    return 0
