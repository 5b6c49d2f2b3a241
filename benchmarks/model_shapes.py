"""Predicted utilisation per shape; BENCHMARKS.md "The Themis planner and model".

Predicted All-Reduce utilisation, baseline vs Themis, for the reference network shapes.

    .venv/bin/python benchmarks/model_shapes.py [--size 256MiB] [--chunks 64]

The first three shapes are the ones of ASTRA-sim's Themis paper (targets: 4x4x4 baseline
0.75 / Themis+SCF 0.99; 16x16 0.53 / 1.0; 8x16 no gain). The Mbit/s ones are what the
emulator runs: 2x2x4 at 40/20/10 has its slow last dimension as the bottleneck, so Themis
cannot gain there, while 4x2x2 at 40/20/10 and 4x4 at 40/20 can. Utilisation is
T_ideal / T (see workloads.model); speedup is baseline time (fifo) over Themis time.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from testbed.core.units import format_size, parse_size
from workloads.model import predict

# (dims, bit/s per host per dimension)
SHAPES: list[tuple[tuple[int, ...], tuple[float, ...]]] = [
    ((4, 4, 4), (200e9, 100e9, 50e9)),
    ((16, 16), (100e9, 100e9)),
    ((8, 16), (300e9, 25e9)),
    ((4, 4, 4), (400e9, 200e9, 10e9)),
    ((2, 2, 4), (40e6, 20e6, 10e6)),
    ((4, 4), (40e6, 20e6)),
    ((4, 2, 2), (40e6, 20e6, 10e6)),
    ((2, 2, 4), (40e6, 40e6, 40e6)),
    ((2, 4), (40e6, 10e6)),
]


def _rate(bps: float) -> str:
    if bps >= 1e9:
        return f"{bps / 1e9:g}G"
    return f"{bps / 1e6:g}M"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="256MiB", help="bytes to all-reduce (default 256MiB)")
    parser.add_argument("--chunks", type=int, default=64, help="chunks (default 64)")
    args = parser.parse_args(argv)
    size = parse_size(args.size)

    table = Table(title=f"All-Reduce {format_size(size)} in {args.chunks} chunks "
                  "(predicted utilisation)")
    for name in ("shape", "bit/s per host", "baseline", "base scf", "themis fifo",
                 "themis scf", "speedup fifo", "speedup scf"):
        table.add_column(name, justify="left" if name in ("shape", "bit/s per host") else "right")
    started = time.perf_counter()
    for dims, bw in SHAPES:
        base = predict(dims, bw, size, args.chunks, policy="baseline", order="fifo")
        base_scf = predict(dims, bw, size, args.chunks, policy="baseline", order="scf")
        fifo = predict(dims, bw, size, args.chunks, policy="themis", order="fifo")
        scf = predict(dims, bw, size, args.chunks, policy="themis", order="scf")
        table.add_row(
            "x".join(map(str, dims)),
            "/".join(_rate(b) for b in bw),
            f"{base.utilisation:.3f}",
            f"{base_scf.utilisation:.3f}",
            f"{fifo.utilisation:.3f}",
            f"{scf.utilisation:.3f}",
            f"{base.time_s / fifo.time_s:.3f}x",
            f"{base.time_s / scf.time_s:.3f}x",
        )
    console = Console(width=max(Console().width, 110))
    console.print(table)
    console.print(f"modelled in {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
