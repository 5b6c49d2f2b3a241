"""CPU cost of one copy; BENCHMARKS.md "The transport ladder: copies, serialisation, per-call cost".

What one copy of a tensor costs into a preallocated buffer (the ``staged`` rung's) against
into fresh memory (``tobytes``, protobuf's fields and messages), and the page faults each
takes: why the ladder's serialising rungs cost more CPU than their counted copies.

    python benchmarks/copy_cost.py [--size 64MiB] [--repeats 9]

Prints the median [min, max] CPU seconds per GB copied and minor page faults per MiB.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

import numpy as np

from testbed.core.units import format_spread, parse_size


def cost(copy, nbytes: int, repeats: int) -> tuple[list[float], list[float]]:
    cpu, faults = [], []
    for _ in range(repeats):
        r0, c0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
        out = copy()
        c1, r1 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
        del out
        cpu.append((c1 - c0) / nbytes * 1e9)
        faults.append((r1.ru_minflt - r0.ru_minflt) / (nbytes / 2**20))
    return cpu, faults


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=parse_size, default="64MiB")
    p.add_argument("--repeats", type=int, default=9)
    args = p.parse_args(argv)
    src = np.ones(args.size // 4, dtype=np.float32)
    staging = np.empty_like(src)
    staging[...] = 0  # touched once, as a long-lived staging buffer is
    ways = {"into a preallocated buffer": lambda: np.copyto(staging, src),
            "into fresh memory (tobytes)": src.tobytes,
            "into fresh memory (np.copy)": src.copy}
    print(f"# {args.size} bytes, {args.repeats} repeats: CPU s/GB copied, minor faults/MiB")
    for name, fn in ways.items():
        cpu, faults = cost(fn, args.size, args.repeats)
        print(f"{name:>28}: {format_spread(cpu)} "
              f"CPU s/GB, {statistics.median(faults):.0f} faults/MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
