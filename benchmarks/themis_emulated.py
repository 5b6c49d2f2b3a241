"""Emulated Themis against the model; BENCHMARKS.md "Baseline vs Themis against the model".

Baseline vs Themis hierarchical All-Reduce on emulated multidim fabrics, next to the
model's prediction (root).

Utilisation = T_ideal / T with T_ideal = 2·S·(1−1/N)/ΣB over the configured rates. The model
is run with each dimension's rate scaled to TCP goodput (1448/1514 of the link rate), which is
the most a TCP ring step can move; 'measured ÷ model' is then the emulation's own loss.

Each shape runs on kernel bridges and on Open vSwitch (``--switches``), ``--repeats`` times,
baseline and Themis alternated; every run is judged by the link invariant as `fabriclab run`
judges it.

    .venv/bin/python benchmarks/themis_emulated.py [--size 8MiB] [--chunks 16] [--repeats 5]
        [--switches kernel,ovs] [--shapes 4x4:12,6 2x2x4:4,8,8]   (as root)
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
from pathlib import Path

from testbed.core.formulas import TCP_GOODPUT
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.core.units import format_spread, parse_size
from testbed.emulator.fabric import Fabric
from testbed.emulator.fidelity import fidelity_record
from testbed.emulator.sampler import LinkSampler, read_cpu
from testbed.emulator.workers import run_on_fabric
from workloads.model import predict

GOODPUT = TCP_GOODPUT
DEFAULT_SHAPES = ["4x4:12,6", "2x2x4:4,8,8", "2x4:6,12"]


def parse_shape(text: str) -> list[tuple[int, float]]:
    """'4x4:12,6' -> [(4, 12.0), (4, 6.0)] (sizes, Mbit/s per dimension)."""
    dims, rates = text.split(":")
    return list(zip((int(n) for n in dims.split("x")), (float(r) for r in rates.split(",")),
                    strict=True))


def run_once(fab: Fabric, plan, out: Path, algo: str, order: str, size: int, chunks: int,
             iters: int) -> tuple[float, bool, float, dict]:
    """One measured run: (seconds per All-Reduce, correct, CPU idle, fidelity record)."""
    idle0 = read_cpu()
    with LinkSampler(plan, fab.namespace_pids()) as sampler:
        res = run_on_fabric(fab, [h.name for h in plan.hosts], out_dir=out, algorithm=algo,
                            order=order, sizes=[size], chunks=chunks, iterations=iters,
                            warmup=1, timeout=120)
    idle1 = read_cpu()
    row = res.rows[0]
    record = fidelity_record(sampler.counters(), sampler.queues(), None)
    return (row.time_us / 1e6, row.correct, (idle1[0] - idle0[0]) / (idle1[1] - idle0[1]),
            record)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", default="8MiB")
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--switches", default="kernel,ovs",
                    help="switch kinds to compare (kernel bridges, Open vSwitch)")
    ap.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES,
                    help="fabrics as SIZES:MBPS, e.g. 4x4:12,6")
    args = ap.parse_args()
    size = parse_size(args.size)
    print(f"medians [min, max] of {args.repeats} runs; 'faithful': runs the link invariant "
          "passed; 'loaded s': its evidence (median)")
    print(f"{'fabric (Mbit/s)':18} {'switches':8} {'algorithm':14} {'time s':>22} "
          f"{'meas÷model':>22} {'faithful':>8} {'loaded s':>8} {'cpu idle':>8} correct")
    for shape, kind in itertools.product(args.shapes, args.switches.split(",")):
        dims = parse_shape(shape)
        name = shape.replace(":", " at ").replace(",", "/")
        plan = build_plan(parse_fabric({"fabric": {"kind": "multidim", "dims": [
            {"size": n, "mbit_s": mbps, "kind": "switch"} for n, mbps in dims]}}))
        sizes = [n for n, _ in dims]
        rates = [mbps * 1e6 for _, mbps in dims]
        runs: dict[str, list] = {"baseline": [], "themis": []}
        models = {}
        with tempfile.TemporaryDirectory() as tmp, \
                Fabric(plan, Path(tmp) / "f", switches=kind) as fab:
            for rep in range(args.repeats):
                for algo, order in (("baseline", "fifo"), ("themis", "scf")):
                    runs[algo].append(run_once(fab, plan, Path(tmp) / f"{algo}{rep}", algo,
                                               order, size, args.chunks, args.iters))
        for algo, order in (("baseline", "fifo"), ("themis", "scf")):
            models[algo] = predict(sizes, [r * GOODPUT for r in rates], size, args.chunks,
                                   policy=algo, order=order).time_s
            rs = runs[algo]
            print(f"{name:18} {kind:8} {algo + '+' + order:14} "
                  f"{format_spread([r[0] for r in rs], '.2f'):>22} "
                  f"{format_spread([models[algo] / r[0] for r in rs], '.3f'):>22} "
                  f"{sum(not r[3]['reasons'] for r in rs):>4}/{len(rs):<3} "
                  f"{statistics.median(r[3]['invariants']['loaded_s'] for r in rs):8.1f} "
                  f"{statistics.median(r[2] for r in rs):8.0%} "
                  f"{all(r[1] for r in rs)}", flush=True)
        speedups = [b[0] / t[0] for b, t in zip(runs["baseline"], runs["themis"], strict=True)]
        print(f"{name:18} {kind:8} {'speedup':14} measured {format_spread(speedups, '.2f')}, "
              f"model {models['baseline'] / models['themis']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
