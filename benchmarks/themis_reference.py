"""The Themis model against ASTRA-sim; BENCHMARKS.md "Themis against ASTRA-sim 1.0 (two semantics)".

fabriclab's Themis model against ASTRA-sim 1.0 (analytical backend), both semantics.

    PYTHONPATH=. .venv/bin/python benchmarks/themis_reference.py [--systems]

Part 1, the 4x4 reference case: switch on both dimensions, 40 and 20 GB/s per NPU
(ASTRA-sim's GB/s is 2**30 bytes/s), a 256 MiB All-Reduce in 64 chunks, halving-doubling in
each dimension, bandwidth only. The reference times were measured with ASTRA-sim 1.0 outside
this repository. Part 2 (``--systems``): the paper's 1024-NPU systems whose dimensions are
all switches, both semantics, speedup of Themis (FIFO and SCF) over the baseline; no reference
numbers are stored here for them.
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from workloads.model import predict

ASTRA_GB_S_TO_BIT_S = 2**30 * 8  # ASTRA-sim: 1 GB/s = 2**30 bytes/s
SIZE_BYTES = 256 << 20
CHUNKS = 64
REFERENCE_NS = {("baseline", "fifo"): 9_376_261, ("themis", "fifo"): 7_838_081,
                ("themis", "scf"): 9_632_524}
SYSTEMS = [  # dims, GB/s per NPU per dimension (all switch dimensions)
    ((16, 64), (150, 100)),
    ((16, 8, 8), (100, 100, 100)),
    ((16, 8, 8), (200, 100, 50)),
    ((4, 4, 8, 8), (250, 200, 100, 50)),
]


def time_ns(dims: tuple[int, ...], gb_s: tuple[float, ...], policy: str, order: str,
            semantics: str) -> float:
    """Modelled All-Reduce time in ns (bandwidths in ASTRA-sim GB/s)."""
    bw_bit_s = [g * ASTRA_GB_S_TO_BIT_S for g in gb_s]
    return predict(dims, bw_bit_s, SIZE_BYTES, CHUNKS, policy=policy, order=order,
                   dim_algorithm="halving-doubling", semantics=semantics).time_s * 1e9


def four_by_four(console: Console) -> None:
    table = Table(title="4x4, 40/20 GB/s, 256 MiB, 64 chunks, halving-doubling (ns)")
    for col in ("case", "ASTRA-sim 1.0", "astra-sim-1.0", "ratio", "fabriclab", "ratio"):
        table.add_column(col, justify="right")
    for (policy, order), ref in REFERENCE_NS.items():
        a = time_ns((4, 4), (40, 20), policy, order, "astra-sim-1.0")
        f = time_ns((4, 4), (40, 20), policy, order, "fabriclab")
        table.add_row(f"{policy}+{order}", f"{ref:,}", f"{a:,.0f}", f"{a / ref:.4f}",
                      f"{f:,.0f}", f"{f / ref:.4f}")
    console.print(table)
    base = REFERENCE_NS[("baseline", "fifo")]
    console.print("speedups over baseline (reference / astra-sim-1.0 / fabriclab): " + ", ".join(
        f"{order} {base / REFERENCE_NS[('themis', order)]:.3f} / "
        f"{time_ns((4, 4), (40, 20), 'baseline', 'fifo', 'astra-sim-1.0') / time_ns((4, 4), (40, 20), 'themis', order, 'astra-sim-1.0'):.3f} / "  # noqa: E501
        f"{time_ns((4, 4), (40, 20), 'baseline', 'fifo', 'fabriclab') / time_ns((4, 4), (40, 20), 'themis', order, 'fabriclab'):.3f}"  # noqa: E501
        for order in ("fifo", "scf")))


def systems(console: Console) -> None:
    table = Table(title="1024-NPU switch systems, 256 MiB, 64 chunks: Themis speedup over "
                  "baseline (FIFO)")
    for col in ("system", "GB/s", "astra FIFO", "astra SCF", "fabriclab FIFO",
                "fabriclab SCF"):
        table.add_column(col, justify="right")
    for dims, gb_s in SYSTEMS:
        row = []
        for semantics in ("astra-sim-1.0", "fabriclab"):
            base = time_ns(dims, gb_s, "baseline", "fifo", semantics)
            row += [f"{base / time_ns(dims, gb_s, 'themis', order, semantics):.3f}"
                    for order in ("fifo", "scf")]
        table.add_row("x".join(map(str, dims)), "/".join(map(str, gb_s)), *row)
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", action="store_true",
                        help="also model the paper's 1024-NPU switch systems")
    args = parser.parse_args()
    console = Console()
    four_by_four(console)
    if args.systems:
        systems(console)


if __name__ == "__main__":
    main()
