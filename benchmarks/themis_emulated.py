"""Baseline vs Themis hierarchical All-Reduce on emulated multidim fabrics, next to the
model's prediction (root).

Utilisation = T_ideal / T with T_ideal = 2·S·(1−1/N)/ΣB over the configured rates. The model
is run with each dimension's rate scaled to TCP goodput (1448/1514 of the link rate), which is
the most a TCP ring step can move; 'measured ÷ model' is then the emulation's own loss.

    sudo .venv/bin/python benchmarks/themis_emulated.py [--size 8MiB] [--chunks 16]
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

from testbed.core.formulas import TCP_GOODPUT
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.core.units import parse_size
from testbed.emulator.fabric import Fabric
from testbed.emulator.sampler import read_cpu
from testbed.emulator.workers import run_on_fabric
from workloads.model import predict

GOODPUT = TCP_GOODPUT
DEFAULT_SHAPES = ["4x4:12,6", "2x2x4:4,8,8", "2x4:6,12"]


def parse_shape(text: str) -> list[tuple[int, float]]:
    """'4x4:12,6' -> [(4, 12.0), (4, 6.0)] (sizes, Mbit/s per dimension)."""
    dims, rates = text.split(":")
    return list(zip((int(n) for n in dims.split("x")), (float(r) for r in rates.split(",")),
                    strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", default="8MiB")
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES,
                    help="fabrics as SIZES:MBPS, e.g. 4x4:12,6")
    args = ap.parse_args()
    size = parse_size(args.size)
    print(f"{'fabric (Mbit/s)':18} {'algorithm':14} {'time s':>7} {'util':>6} "
          f"{'model util':>10} {'meas÷model':>10} correct  cpu idle")
    for shape in args.shapes:
        dims = parse_shape(shape)
        name = shape.replace(":", " at ").replace(",", "/")
        plan = build_plan(parse_fabric({"fabric": {"kind": "multidim", "dims": [
            {"size": n, "mbit_s": mbps, "kind": "switch"} for n, mbps in dims]}}))
        sizes = [n for n, _ in dims]
        rates = [mbps * 1e6 for _, mbps in dims]
        N = math.prod(sizes)
        ideal = 2 * size * (1 - 1 / N) / (sum(rates) / 8)
        times = {}
        with tempfile.TemporaryDirectory() as tmp, Fabric(plan, Path(tmp) / "f") as fab:
            for algo, order in (("baseline", "fifo"), ("themis", "scf")):
                idle0 = read_cpu()
                res = run_on_fabric(fab, [h.name for h in plan.hosts],
                                    out_dir=Path(tmp) / algo, algorithm=algo, order=order,
                                    sizes=[size], chunks=args.chunks, iterations=args.iters,
                                    warmup=1, timeout=120)
                idle1 = read_cpu()
                idle = (idle1[0] - idle0[0]) / (idle1[1] - idle0[1])
                row = res.rows[0]
                t = row.time_us / 1e6
                model = predict(sizes, [r * GOODPUT for r in rates], size, args.chunks,
                                policy=algo, order=order)
                times[algo] = (t, model.time_s)
                print(f"{name:18} {algo + '+' + order:14} {t:7.2f} {ideal / t:6.3f} "
                      f"{ideal / model.time_s:10.3f} {model.time_s / t:10.3f} {row.correct}  "
                      f"{idle:6.0%}")
        (tb, mb), (tt, mt) = times["baseline"], times["themis"]
        print(f"{name:18} {'speedup':14} measured {tb / tt:.2f}x, model {mb / mt:.2f}x")


if __name__ == "__main__":
    main()
