"""The Themis paper's six systems; BENCHMARKS.md "The Themis paper's six systems".

The Themis paper's six systems through fabriclab's model, with the paper's averages beside.

    .venv/bin/python benchmarks/themis_systems.py [--sizes 0.1GiB,0.25GiB,0.5GiB,1GiB] [--json]

Per system (testbed.core.presets: shape, GB/s per NPU, halving-doubling on switch dimensions,
ring on rings, direct on fully connected ones, 64 chunks) and All-Reduce size: the predicted
time and utilisation of the baseline schedule and of Themis, each with FIFO and SCF chunk
order within a dimension (workloads.model.predict, whatever its default semantics are).
Utilisation is T_ideal / T; the gain is baseline (FIFO) time over Themis time. The averages
are over every system and size, set beside the ISCA'22 paper's (testbed.core.presets
.PAPER_FIGURES); the paper averages its own workloads, so the gap is a comparison of
shapes, not a reproduction.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from rich.console import Console
from rich.table import Table

from testbed.core.presets import ARXIV_V1_FIGURES, PAPER_FIGURES, PRESETS
from testbed.core.units import parse_size
from workloads.model import predict

VARIANTS = (("baseline", "fifo"), ("baseline", "scf"), ("themis", "fifo"), ("themis", "scf"))
GIB = 2**30


def measure(sizes: list[int]) -> list[dict]:
    """One row per (system, size): time and utilisation of every variant."""
    rows = []
    for preset in PRESETS.values():
        args = preset.model_args()
        chunks = args.pop("chunks")
        for size in sizes:
            row = {"system": preset.name, "shape": preset.shape, "size_bytes": size}
            for policy, order in VARIANTS:
                p = predict(total_bytes=size, chunks=chunks, policy=policy, order=order, **args)
                row[f"{policy}_{order}_s"] = p.time_s
                row[f"{policy}_{order}_util"] = p.utilisation
            rows.append(row)
    return rows


def averages(rows: list[dict]) -> dict[str, float]:
    """Ours, under the keys of the paper's figures (utilisations in percent)."""
    gain = [r["baseline_fifo_s"] / r["themis_scf_s"] for r in rows]
    return {
        "mean_gain_scf": statistics.fmean(gain),
        "max_gain_scf": max(gain),
        "mean_util_baseline": 100 * statistics.fmean(r["baseline_fifo_util"] for r in rows),
        "mean_util_themis_fifo": 100 * statistics.fmean(r["themis_fifo_util"] for r in rows),
        "mean_util_themis_scf": 100 * statistics.fmean(r["themis_scf_util"] for r in rows),
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0.1GiB,0.25GiB,0.5GiB,1GiB",
                        help="All-Reduce sizes, comma-separated (GiB fractions are rounded "
                        "to whole bytes)")
    parser.add_argument("--json", action="store_true", help="print the rows and averages as JSON")
    args = parser.parse_args(argv)
    sizes = [_size(s) for s in args.sizes.split(",") if s.strip()]
    started = time.perf_counter()
    rows = measure(sizes)
    ours = averages(rows)
    wall_s = time.perf_counter() - started
    if args.json:
        print(json.dumps({"rows": rows, "ours": ours,
                          "paper": {f.key: f.value for f in PAPER_FIGURES},
                          "wall_s": wall_s}, indent=2))
        return 0
    console = Console(width=160)
    table = Table(title="predicted All-Reduce, ms (utilisation)")
    for col in ("system", "shape", "GiB", "baseline fifo", "baseline scf", "themis fifo",
                "themis scf", "gain scf"):
        table.add_column(col, justify="left" if col in ("system", "shape") else "right")
    for r in rows:
        cells = [f"{_ms(r[f'{p}_{o}_s'])} ({r[f'{p}_{o}_util']:.3f})" for p, o in VARIANTS]
        table.add_row(r["system"], r["shape"], f"{r['size_bytes'] / GIB:.2f}", *cells,
                      f"{r['baseline_fifo_s'] / r['themis_scf_s']:.2f}x")
    console.print(table)
    summary = Table(title="averages over every system and size, against the paper (ISCA'22)")
    for col in ("figure", "paper", "ours", "gap"):
        summary.add_column(col, justify="left" if col == "figure" else "right")
    for f in PAPER_FIGURES:
        value = ours[f.key]
        gap = f"{value - f.value:+.2f} pt" if f.unit == "%" else f"{value / f.value:.2f}x paper"
        summary.add_row(f.label, f"{f.value:g}{f.unit}", f"{value:.2f}{f.unit}", gap)
    console.print(summary)
    console.print(f"arXiv v1 gave {ARXIV_V1_FIGURES['mean_gain_scf']}x mean and "
                  f"{ARXIV_V1_FIGURES['max_gain_scf']}x max gain; {len(rows)} rows in "
                  f"{wall_s:.1f} s")
    return 0


def _size(text: str) -> int:
    text = text.strip()
    if text.lower().endswith("gib"):
        return round(float(text[:-3]) * GIB)
    return parse_size(text)


if __name__ == "__main__":
    raise SystemExit(main())
