"""Sim jobs vs ASTRA-sim; BENCHMARKS.md "Training jobs through fabriclab run on the sim backend".

`fabriclab run experiments/themis-e2e.yaml --backend sim` against ASTRA-sim 1.0's own finish
times on the same inputs (benchmarks/data/astra_e2e_reference.csv, AnalyticalAstra built as
benchmarks/astra_e2e.py says), and the mean Themis end-to-end gains beside the paper's:

    .venv/bin/python benchmarks/themis_e2e.py [--runs DIR]

Without ``--runs`` the experiment is run now (as the command above, into a temporary folder);
with it, the run directories already in DIR are read. Printed per case (system, workload,
schedule): ASTRA-sim's time, fabriclab's iteration time and their ratio; then per workload the
mean gains over the six systems (fabriclab's, ASTRA-sim's, the paper's) and the ceiling: the
baseline's iteration time over its compute time, the gain were every exposed communication
hidden, which no schedule can exceed.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from analysis.astra_reference import ASTRA_WORKLOADS as WORKLOADS
from testbed.core.presets import E2E_GAINS

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "benchmarks" / "data" / "astra_e2e_reference.csv"
SYSTEMS = {"2d-sw": "2d_switch", "3d-homo": "3d_switch_homo", "3d-het": "3d_switch_hetero",
           "3d-frs": "3d_fc_ring_switch", "4d-rfrs": "4d_ring_fc_ring_switch",
           "4d-rsss": "4d_ring_switch_switch_switch"}
SCHEDULES = {("baseline", "fifo"): "baseline", ("themis", "fifo"): "themis_fifo",
             ("themis", "scf"): "themis_scf"}


def ours(runs: Path) -> tuple[dict[tuple[str, str, str], float], dict[str, list[float]]]:
    """(system, workload, schedule) -> iteration time (ns), from the run directories; and per
    workload the baseline's ceilings (its time over its compute, one per system)."""
    out, ceilings = {}, {}
    for summary in sorted(runs.glob("*/summary.json")):
        s = json.loads(summary.read_text())
        label = s["label"].removeprefix("themis-e2e-")
        system = next(v for k, v in SYSTEMS.items() if label.startswith(k + "-"))
        job = s["jobs"]["train"]
        schedule = SCHEDULES[(job["algorithm"], job["order"])]
        out[(system, WORKLOADS[job["model"]], schedule)] = job["mean_s"] * 1e9
        if schedule == "baseline":
            ceilings.setdefault(WORKLOADS[job["model"]], []).append(
                job["mean_s"] / (job["mean_s"] - job["exposed_comm_s"]))
    return out, ceilings


def reference() -> dict[tuple[str, str, str], float]:
    with REFERENCE.open() as f:
        return {(r["network"], r["workload"], r["scheduler"]): float(r["finish_time_ns"])
                for r in csv.DictReader(f)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, help="run directories of the experiment")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = args.runs
        if runs is None:
            runs = Path(tmp)
            subprocess.run([sys.executable, "-m", "testbed.cli", "run",
                            str(ROOT / "experiments" / "themis-e2e.yaml"), "--backend", "sim",
                            "--out", str(runs), "--no-report"], check=True,
                           stdout=subprocess.DEVNULL)
        (mine, ceilings), ref = ours(runs), reference()
    print(f"{'system':30} {'workload':28} {'schedule':12} {'ASTRA-sim ns':>14} "
          f"{'fabriclab ns':>14} {'ratio':>7}")
    ratios = []
    for key in sorted(ref):
        if key not in mine:
            continue
        ratio = mine[key] / ref[key]
        ratios.append(ratio)
        print(f"{key[0]:30} {key[1]:28} {key[2]:12} {ref[key]:14.0f} {mine[key]:14.0f} "
              f"{ratio:7.4f}")
    within = sum(1 for r in ratios if abs(r - 1) <= 0.05)
    print(f"\n{len(ratios)} cases; {within} within 5% of ASTRA-sim; ratio "
          f"{statistics.median(ratios):.4f} [{min(ratios):.4f}, {max(ratios):.4f}]\n")
    print(f"{'workload':28} {'fabriclab SCF':>14} {'ASTRA-sim SCF':>14} {'fabriclab FIFO':>15} "
          f"{'ceiling':>8} {'paper':>6} {'arXiv':>6}")
    for name, workload in WORKLOADS.items():
        def gain(times: dict, sched: str, w: str = workload) -> float:
            return statistics.fmean(times[(s, w, "baseline")] / times[(s, w, sched)]
                                    for s in SYSTEMS.values())
        paper = E2E_GAINS[name]
        print(f"{workload:28} {gain(mine, 'themis_scf'):14.3f} {gain(ref, 'themis_scf'):14.3f} "
              f"{gain(mine, 'themis_fifo'):15.3f} {statistics.fmean(ceilings[workload]):8.3f} "
              f"{paper.camera_ready:6.2f} "
              f"{paper.arxiv if paper.arxiv else '-':>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
