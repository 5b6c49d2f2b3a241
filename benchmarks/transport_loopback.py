"""zerocopy vs rpc on loopback; BENCHMARKS.md "zerocopy vs rpc".

zerocopy vs rpc All-Reduce bandwidth on loopback (2 worker processes, flat ring).

    python benchmarks/transport_loopback.py [--size 1KiB:64MiB] [--ranks 2] [--iters 5]

Prints, per size, each transport's algbw (GB/s, S/t as nccl-tests) and the ratio.
"""

from __future__ import annotations

import argparse
import sys

from testbed.core.units import format_size, parse_size_range
from workloads.launcher import run_local


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="1KiB:64MiB")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    args = p.parse_args(argv)
    sizes = parse_size_range(args.size)
    results = {}
    for transport in ("zerocopy", "rpc"):
        res = run_local(ranks=args.ranks, sizes=sizes, algorithm="ring", transport=transport,
                        iterations=args.iters, warmup=args.warmup, timeout=120)
        results[transport] = {r.size: r for r in res.rows}
    print(f"# {args.ranks} ranks, flat ring, loopback; algbw in GB/s, time in us")
    print(f"{'size':>8} {'zc time':>10} {'zc algbw':>9} {'rpc time':>10} {'rpc algbw':>9} "
          f"{'zc/rpc':>7} {'ok':>3}")
    for s in sizes:
        z, r = results["zerocopy"][s], results["rpc"][s]
        ok = "yes" if z.correct and r.correct else "NO"
        print(f"{format_size(s):>8} {z.time_us:>10.1f} {z.algbw:>9.3f} {r.time_us:>10.1f} "
              f"{r.algbw:>9.3f} {z.algbw / r.algbw:>7.1f} {ok:>3}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
