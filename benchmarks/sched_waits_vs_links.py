"""What the scheduler invariant's violations cost their jobs: for every stretch in which a
worker waited for a CPU too long (``fidelity.json``'s ``scheduler`` violations), the rate its
job's host links ran at over that stretch, from ``qdisc_samples.parquet``.

    .venv/bin/python benchmarks/sched_waits_vs_links.py DIR [DIR ...]

DIR is a run's output directory (one variant of ``fabriclab run``). A host link carries one
host's traffic only, so its rate is the job's own even where uplinks are shared. Rates are
wire-equivalent (``TCP_WIRE_FACTOR``) and relative to the link's shaping; ``busy`` is the
share of qdisc samples with a backlog (the link had data waiting to go).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from testbed.emulator.calibrate import TCP_WIRE_FACTOR

KEPT_RATE = 0.90  # a link at this share of its rate or more lost no more than the allowance


def link_ratio(qdisc: pd.DataFrame, side: str, host: str, start: float,
               end: float) -> tuple[float, float] | None:
    """(achieved ÷ shaped rate, share of samples with a backlog) of ``host``'s link in one
    direction (``side`` "src": host to leaf; "dst": leaf to host) over [start, end]."""
    g = qdisc[(qdisc[side] == host) & qdisc["time"].between(start, end)].sort_values("time")
    if len(g) < 2 or g["time"].iloc[-1] <= g["time"].iloc[0]:
        return None
    bits = (g["sent_bytes"].iloc[-1] - g["sent_bytes"].iloc[0]) * 8 * TCP_WIRE_FACTOR
    rate_mbit_s = bits / (g["time"].iloc[-1] - g["time"].iloc[0]) / 1e6
    return rate_mbit_s / float(g["capacity_mbit_s"].iloc[0]), float((g["backlog_bytes"] > 0).mean())


def stretches(run: Path) -> list[dict]:
    """One row per scheduler violation of the run (see the module doc)."""
    fidelity = json.loads((run / "fidelity.json").read_text())
    violations = fidelity.get("scheduler", {}).get("violations", [])
    if not violations:
        return []
    sched = pd.read_parquet(run / "sched_samples.parquet")
    qdisc = pd.read_parquet(run / "qdisc_samples.parquet")
    t0 = float(sched["time"].min())  # fidelity.json's times count from the first sample
    rows = []
    for v in violations:
        start, end = t0 + v["start_s"], t0 + v["end_s"]
        workers = sched.loc[sched["job"] == v["job"], "process"].unique()
        hosts = sorted({p.split()[0] for p in workers})
        own = v["process"].split()[0]
        ratios = {(h, side): link_ratio(qdisc, side, h, start, end)
                  for h in hosts for side in ("src", "dst")}
        known = [r[0] for r in ratios.values() if r is not None]
        rows.append({"run": run.name, "job": v["job"], "process": v["process"],
                     "wait_share": v["worst_wait_share"],
                     "own_out": ratios.get((own, "src")), "own_in": ratios.get((own, "dst")),
                     "job_slowest": min(known) if known else None})
    return rows


def cell(pair: tuple[float, float] | None) -> str:
    return "-" if pair is None else f"{pair[0]:.2f} (busy {pair[1]:.0%})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run output directories")
    args = ap.parse_args()
    missing = [str(r) for r in args.runs if not (r / "fidelity.json").is_file()]
    if missing:
        print(f"not a run's output directory (no fidelity.json): {missing[0]}", file=sys.stderr)
        return 2
    rows = [row for run in args.runs for row in stretches(run)]
    print(f"{'run':<44} {'job':<12} {'worker':<10} {'wait':>5}  {'own link out':<17} "
          f"{'own link in':<17} {'job slowest':>11}")
    for r in rows:
        slowest = "-" if r["job_slowest"] is None else f"{r['job_slowest']:.2f}"
        print(f"{r['run']:<44} {r['job']:<12} {r['process']:<10} {r['wait_share']:>5.0%}  "
              f"{cell(r['own_out']):<17} {cell(r['own_in']):<17} {slowest:>11}")
    kept = sum(r["job_slowest"] is not None and r["job_slowest"] >= KEPT_RATE for r in rows)
    print(f"{len(rows)} stretches of too much CPU wait; in {kept} every host link of the job "
          f"ran at {KEPT_RATE:.0%} of its rate or more")
    return 0


if __name__ == "__main__":
    sys.exit(main())
