"""The workers' own cost per collective on loopback; BENCHMARKS.md "Sends on the caller's
thread".

At small sizes a worker's CPU, not the wire, sets a collective's time on a small machine: on
8 ranks of 2 cores, every step of every rank waits for a core. This runs All-Reduces of small
sizes on local worker processes (no fabric) and prints, per algorithm and size, each rank's
CPU seconds per collective and the collective's time, as median [min, max] over repeats.

    python benchmarks/worker_step_cost.py [--ranks 8] [--sizes 1KiB,4KiB,64KiB]
        [--algorithms ring,halving-doubling,themis] [--iterations 32] [--repeats 5]

Compare two commits by running it from a work tree of each, alternating.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from testbed.core.traces import read_table
from testbed.core.units import format_size, format_spread, parse_size
from workloads.launcher import run_local


def cpu_per_collective_s(out_dir: Path) -> dict[int, float]:
    """Each size's median CPU seconds per collective per rank, over ranks and iterations."""
    rows = read_table(out_dir, "collectives").to_pandas()
    rows = rows[~rows["warmup"]]
    return rows.groupby("size")["cpu"].median().to_dict()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--sizes", default="1KiB,4KiB,64KiB")
    p.add_argument("--algorithms", default="ring,halving-doubling,themis")
    p.add_argument("--iterations", type=int, default=32)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    algorithms = args.algorithms.split(",")
    cpu: dict[tuple[str, int], list[float]] = {}
    wall: dict[tuple[str, int], list[float]] = {}
    for repeat in range(args.repeats):
        for algorithm in algorithms:
            with tempfile.TemporaryDirectory(prefix="fabriclab-step-cost-") as tmp:
                res = run_local(ranks=args.ranks, sizes=sizes, algorithm=algorithm,
                                iterations=args.iterations, warmup=2, timeout=60,
                                out_dir=tmp)
                for size, s in cpu_per_collective_s(Path(tmp)).items():
                    cpu.setdefault((algorithm, size), []).append(s * 1e3)
                for row in res.rows:
                    wall.setdefault((algorithm, row.size), []).append(row.time_us / 1e3)
        print(f"# repeat {repeat + 1}/{args.repeats} done", file=sys.stderr, flush=True)
    print(f"# {args.ranks} ranks on loopback, {args.iterations} iterations, "
          f"{args.repeats} repeats: median [min, max]")
    print(f"{'algorithm':<18} {'size':>7} {'CPU ms / collective / rank':>28} "
          f"{'time ms':>22} {'CPU x ranks / time':>19}")
    for algorithm in algorithms:
        for size in sizes:
            c, w = cpu[(algorithm, size)], wall[(algorithm, size)]
            busy = args.ranks * statistics.median(c) / statistics.median(w)
            print(f"{algorithm:<18} {format_size(size):>7} {format_spread(c, '.3f'):>28} "
                  f"{format_spread(w, '.3f'):>22} {busy:>19.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
