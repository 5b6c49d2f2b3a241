"""Simulated against emulated times; BENCHMARKS.md "Emulator vs simulator (cross-validation)".

Cross-validate the sim backend against emulated runs: per variant, job and size, the mean
measured collective time (slowest rank, warm-up excluded: ``summary.json`` ``sizes``).

Run the sim side of experiment specs and print its table (no root needed):

    .venv/bin/python benchmarks/sim_crossval.py experiments/contention.yaml experiments/themis.yaml

Compare two results roots (run directories of ``fabriclab run`` and ``fabriclab run --backend
sim``; runs are matched by experiment variant name, the newest run of a name wins):

    .venv/bin/python benchmarks/sim_crossval.py results/ results-sim/

or simulate the specs and compare with an emulated root in one go (``--emulated results/``).
DNN jobs are compared by their mean iteration time. The gap is (emulated - simulated) /
simulated: the simulator is the emulator's best case (shaped rate x TCP goodput, no latency,
no CPU limit), so a faithful emulation shows a small positive gap.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from analysis.load import MARKERS, load_run
from analysis.metrics import summarise
from testbed.core.experiment import load_experiments
from testbed.sim.backend import simulate_experiment

Key = tuple[str, str, int]  # (variant, job, size in bytes)


def run_dirs(root: Path) -> dict[str, Path]:
    """{experiment variant name: newest run directory} under ``root`` (or ``root`` itself)."""
    cands = [root] if any((root / m).exists() for m in MARKERS) else sorted(
        d for d in root.iterdir() if d.is_dir() and any((d / m).exists() for m in MARKERS))
    out: dict[str, Path] = {}
    for d in cands:  # sorted by name = by timestamp: later runs replace earlier ones
        try:
            spec = yaml.safe_load((d / "spec.yaml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            spec = {}
        out[str(spec.get("name") or d.name)] = d
    return out


def collective_times(run_dir: Path, buckets: bool = False
                     ) -> dict[tuple[str, int], tuple[float | None, str]]:
    """{(job, size): (mean collective seconds, job status)} of one run directory; a DNN job
    gives one row, its mean iteration time, under size 0 (shown as "iteration"), and with
    ``buckets`` also one row per bucket size."""
    path = run_dir / "summary.json"
    summary: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if not isinstance(summary.get("jobs"), dict) or not all(
            "sizes" in j for j in summary["jobs"].values()):
        summary = summarise(load_run(run_dir))
    out = {}
    for name, job in summary["jobs"].items():
        if job.get("workload") == "dnn":
            out[(name, 0)] = (job.get("mean_s"), str(job.get("status")))
            if not buckets:
                continue
        for size, row in (job.get("sizes") or {}).items():
            out[(name, int(size))] = (row.get("collective_s"), str(job.get("status")))
        if not job.get("sizes"):
            out[(name, int(job.get("size") or 0))] = (None, str(job.get("status")))
    return out


def table(roots: dict[str, dict[str, Path]], buckets: bool = False
          ) -> dict[Key, dict[str, tuple[float | None, str]]]:
    """{(variant, job, size): {side: (seconds, status)}} over every side's runs."""
    rows: dict[Key, dict[str, tuple[float | None, str]]] = {}
    for side, runs in roots.items():
        for variant, d in runs.items():
            for (job, size), value in collective_times(d, buckets).items():
                rows.setdefault((variant, job, size), {})[side] = value
    return rows


def _size(n: int) -> str:
    if n == 0:
        return "iteration"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"


def _s(v: float | None) -> str:
    return "—" if v is None else f"{v:.4f}"


def render(rows: dict[Key, dict[str, tuple[float | None, str]]], sides: list[str]) -> str:
    head = ["variant", "job", "size"] + [f"{s} s" for s in sides]
    if sides == ["emulated", "simulated"]:
        head += ["gap", "status"]
    lines = [head]
    for (variant, job, size), got in sorted(rows.items()):
        line = [variant, job, _size(size)] + [_s(got.get(s, (None, ""))[0]) for s in sides]
        if sides == ["emulated", "simulated"]:
            emu, sim = got.get("emulated", (None, "missing")), got.get("simulated", (None, ""))
            gap = (emu[0] - sim[0]) / sim[0] if emu[0] is not None and sim[0] else None
            line += ["—" if gap is None else f"{gap:+.1%}", emu[1]]
        lines.append(line)
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    out = []
    for i, r in enumerate(lines):
        out.append("  ".join(c.ljust(w) if j < 3 else c.rjust(w)
                             for j, (c, w) in enumerate(zip(r, widths, strict=True))))
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def extra_time(rows: dict[Key, dict[str, tuple[float | None, str]]]) -> str:
    """Median and p10/p90 of emulated - simulated seconds per collective (iterations left out):
    the time the simulator does not model, e.g. per-message latency."""
    gaps = sorted(got["emulated"][0] - got["simulated"][0] for (_v, _j, size), got in rows.items()
                  if size and got.get("emulated", (None,))[0] is not None
                  and got.get("simulated", (None,))[0] is not None)
    if not gaps:
        return "no collective measured on both sides"

    def q(f: float) -> float:
        return gaps[min(len(gaps) - 1, int(f * len(gaps)))] * 1e3

    return (f"emulated - simulated per collective over {len(gaps)} sizes: median {q(0.5):.1f} ms "
            f"(p10 {q(0.1):.1f}, p90 {q(0.9):.1f})")


def simulate(specs: list[Path], out: Path) -> dict[str, Path]:
    runs = {}
    for spec in specs:
        for exp in load_experiments(spec):
            runs[exp.name] = simulate_experiment(exp, out)
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", type=Path,
                    help="experiment specs (run on the sim), or EMULATED_ROOT SIM_ROOT")
    ap.add_argument("--emulated", type=Path, help="emulated results root to compare with")
    ap.add_argument("--buckets", action="store_true",
                    help="DNN jobs: also compare every bucket size's collective time")
    ap.add_argument("--sim-out", type=Path,
                    help="where the simulated run directories go (default: a temporary dir)")
    args = ap.parse_args(argv)
    if len(args.inputs) == 2 and all(p.is_dir() for p in args.inputs):
        roots = {"emulated": run_dirs(args.inputs[0]), "simulated": run_dirs(args.inputs[1])}
        rows = table(roots, args.buckets)
        print(render(rows, ["emulated", "simulated"]))
        print(extra_time(rows))
        return 0
    for p in args.inputs:
        if not p.is_file():
            ap.error(f"{p} is not an experiment spec (give specs, or two results roots)")
    with tempfile.TemporaryDirectory(prefix="sim-crossval-") as tmp:
        out = args.sim_out or Path(tmp)
        roots = {"simulated": simulate(args.inputs, out)}
        if args.emulated is not None:
            roots = {"emulated": run_dirs(args.emulated), **roots}
            # only the variants of these specs
            roots["emulated"] = {k: v for k, v in roots["emulated"].items()
                                 if k in roots["simulated"]}
        rows = table(roots, args.buckets)
        print(render(rows, list(roots)))
        if args.emulated is not None:
            print(extra_time(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
