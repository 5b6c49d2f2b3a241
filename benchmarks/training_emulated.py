"""Emulated vs simulated; BENCHMARKS.md "Training iterations on the emulator against the simulator".

Training iterations on the emulator against the simulator: the Themis paper's ResNet-50 and
GNMT (experiments/themis-e2e-emulated.yaml), baseline and Themis, ``--runs`` times (root).

Per workload x schedule: the emulated pass time (every rank's row of a measured pass, mean
over ranks; the run's median over its measured passes; median [min, max] over runs), the
simulated pass time, measured ÷ simulated, and each run's fidelity verdict; per workload the
Themis gain (baseline ÷ Themis) measured, run by run, and simulated.

The simulated time is ``fabriclab run --backend sim`` of the same spec where the simulator
replays training jobs, else (said in the output) the replay of one pass on the job's logical
dimensions at the emulated rates x TCP goodput, computed here
(:func:`workloads.training.emulated.plan_pass`, what the workers themselves plan with).

    .venv/bin/python benchmarks/training_emulated.py [--runs 3] [--spec SPEC] [--keep DIR]
    .venv/bin/python benchmarks/training_emulated.py --no-emulator   (the predictions only)
    .venv/bin/python benchmarks/training_emulated.py --chakra [--runs 3]

``--chakra``: instead of SPEC, the Chakra traces of :func:`chakra_spec` (astra-sim's 8-NPU
All-Reduce microbenchmark and the multi-layer training trace, one run each).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from testbed.core.experiment import Experiment, load_experiments
from testbed.core.formulas import TCP_GOODPUT
from testbed.core.jobs import resolve
from testbed.core.topology import build_plan
from testbed.core.traces import read_table
from testbed.core.units import format_spread
from workloads.training.chakra_examples import all_reduce_trace, training_trace
from workloads.training.emulated import plan_pass, predicted_exposed_s, predicted_pass_s
from workloads.training.jobs import job_platform, job_workload

SPEC = Path(__file__).resolve().parent.parent / "experiments" / "themis-e2e-emulated.yaml"


def predicted(exp: Experiment) -> dict[str, tuple[float, float]]:
    """Per job: the replay's (pass s, exposed communication s) on the job as placed."""
    plan = build_plan(exp.fabric, exp.rate_scale)
    out = {}
    for spec in exp.jobs:
        job = resolve(spec, plan, [h.name for h in plan.hosts])
        network, system = job_platform(job, TCP_GOODPUT)
        p = plan_pass(job_workload(job), network, system)  # what the workers plan
        out[spec.name] = (predicted_pass_s(p), predicted_exposed_s(p))
    return out


def chakra_spec(folder: Path) -> Path:
    """An experiment replaying two Chakra traces, written into ``folder``: astra-sim's 8-NPU
    All-Reduce microbenchmark at 16 MiB (``ar8``) and the multi-layer training trace
    (``train8``, bytes / 8), each a training job of 8 hosts of a 100 Mbit/s kernel-bridge
    switch, ring, 4 chunks, 4 passes (1 warm-up). The training trace's compute x 500 keeps
    roughly its ratio to communication at 50 GB/s (rate_scale 100 Mbit/s / 50 GB/s = 2.3e-4;
    size_scale / rate_scale = 536)."""
    ar, train = folder / "ar8-16MiB.0.et", folder / "train8.0.et"
    ar.write_bytes(all_reduce_trace(8, 16, 0))
    train.write_bytes(training_trace())

    def job(name: str, path: Path, **scale: float) -> dict:
        return {"name": name, "hosts_wanted": 8, "algorithm": "baseline", "order": "fifo",
                "dim_algorithm": "ring", "chunks": 4,
                "workload": {"kind": "training", "file": str(path), "passes": 4, "warmup": 1,
                             **scale}}

    spec = folder / "chakra-emulated.json"
    spec.write_text(json.dumps({
        "name": "chakra-emulated", "policy": "shortest", "timeout_s": 600,
        "fabric": {"kind": "multidim", "dims": [{"size": 8, "mbit_s": 100, "kind": "switch"}]},
        "jobs": [job("ar8", ar)],
        "variants": [{"name": "ar8"},
                     {"name": "train8", "jobs": [job("train8", train, size_scale=1 / 8,
                                                     compute_scale=500)]}]}))
    return spec


def pass_times(run_dir: Path, job: str) -> list[float]:
    """The measured passes of ``job``: per pass the mean over ranks of its time."""
    it = read_table(run_dir / "jobs" / job, "iterations").to_pandas()
    if it.empty:
        return []
    it = it[~it["warmup"].astype(bool)]
    if not it["correct"].all():
        raise SystemExit(f"{run_dir}: job {job} reduced a wrong sum")
    return it.groupby("iteration")["time"].mean().tolist()


def simulated(experiments: list[Experiment], spec: Path, out: Path) -> tuple[dict, str]:
    """Per (run name, job) the simulated pass time, and where it came from."""
    try:
        from testbed.sim.backend import SimBackend

        sim = SimBackend(seed=1)
        times = {}
        for exp in load_experiments(spec, shaped=False):  # (simulated links are unshaped)
            run_dir = sim.run(exp, out)
            for spec in exp.jobs:
                times[(exp.name, spec.name)] = statistics.median(pass_times(run_dir, spec.name))
        return times, "fabriclab run --backend sim"
    except Exception as exc:  # the simulator does not replay training jobs (yet)
        reason = f"{type(exc).__name__}: {str(exc)[:100]}"
    times = {(exp.name, job): t for exp in experiments for job, (t, _) in predicted(exp).items()}
    return times, f"the replay of one pass at the emulated rates (sim backend: {reason})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--spec", type=Path, default=SPEC)
    ap.add_argument("--keep", type=Path, help="keep the run directories here")
    ap.add_argument("--no-emulator", action="store_true",
                    help="print the simulated figures only (no root, no fabric)")
    ap.add_argument("--chakra", action="store_true",
                    help="run the Chakra traces of chakra_spec instead of --spec")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="training-emulated-") as tmp:
        out = args.keep or Path(tmp)
        if args.chakra:
            (out / "traces").mkdir(parents=True, exist_ok=True)
            args.spec = chakra_spec(out / "traces")
        experiments = load_experiments(args.spec)
        sims, source = simulated(experiments, args.spec, out / "sim")
        print(f"simulated: {source}")
        measured: dict[tuple[str, str], list[float]] = {}
        verdicts: dict[str, list[str]] = {}
        if not args.no_emulator:
            from testbed.emulator.backend import EmulatedBackend

            backend = EmulatedBackend()
            for exp in experiments:
                backend.check(exp)
            for run in range(args.runs):
                for exp in experiments:
                    run_dir = backend.run(exp, out / f"run{run}")
                    fid = json.loads((run_dir / "fidelity.json").read_text())
                    verdicts.setdefault(exp.name, []).append(
                        fid["verdict"] + (f" ({'; '.join(fid['reasons'])[:160]})"
                                          if fid["reasons"] else ""))
                    for spec in exp.jobs:
                        times = pass_times(run_dir, spec.name)
                        measured.setdefault((exp.name, spec.name), []).append(
                            statistics.median(times) if times else None)
                        if not times:
                            print(f"run {run + 1} {exp.name}: no measured pass "
                                  f"({fid['reasons'][-1] if fid['reasons'] else 'failed'})")
                            continue
                        print(f"run {run + 1} {exp.name} {spec.name}: passes "
                              f"{', '.join(f'{t:.3f}' for t in times)} s, "
                              f"{verdicts[exp.name][-1]}", flush=True)
        report(experiments, sims, measured, verdicts, args.runs)


def report(experiments: list[Experiment], sims: dict, measured: dict, verdicts: dict,
           runs: int) -> None:
    print(f"\npass time, median [min, max] of {runs} runs (each run: the median of its "
          "measured passes)")
    print(f"{'run':40} {'job':9} {'emulated s':>22} {'simulated s':>11} "
          f"{'meas÷sim':>22}  verdicts")
    by_job: dict[str, dict[str, tuple]] = {}
    for exp in experiments:
        for spec in exp.jobs:
            key = (exp.name, spec.name)
            sim = sims[key]
            got = [t for t in measured.get(key, []) if t is not None]
            by_job.setdefault(spec.name, {})[spec.algorithm] = (measured.get(key, []), sim)
            print(f"{exp.name:40} {spec.name:9} {format_spread(got, '.3f') if got else '-':>22} "
                  f"{sim:11.3f} "
                  f"{format_spread([g / sim for g in got], '.3f') if got else '-':>22}  "
                  f"{', '.join(v.split(' (')[0] for v in verdicts.get(exp.name, []))}")
    pairs = {job: algos for job, algos in by_job.items()
             if "baseline" in algos and "themis" in algos}
    if pairs:
        print("\nThemis gain (baseline ÷ themis)")
    for job, algos in pairs.items():
        (base, sim_b), (them, sim_t) = algos["baseline"], algos["themis"]
        gains = [b / t for b, t in zip(base, them, strict=True)  # run by run
                 if b is not None and t is not None]
        print(f"{job:9} emulated {format_spread(gains, '.3f') if gains else '-'}, "
              f"simulated {sim_b / sim_t:.3f}"
              + (f", emulated ÷ simulated {statistics.median(gains) / (sim_b / sim_t):.3f}"
                 if gains else ""))
    for name, vs in verdicts.items():
        for v in vs:
            if not v.startswith("faithful"):
                print(f"{name}: {v}")


if __name__ == "__main__":
    main()
