"""``experiments/latency.yaml`` on the emulator, size by size, beside the simulator and the model.

For each run directory given (emulated runs of ``fabriclab run experiments/latency.yaml``):
its verdict (and the workers' latency per step, where it measured one), and per size the
emulator's mean collective time, the simulator's replay of the
same job on the paths it took (``prediction/``), emulator ÷ simulator and the model's time,
the emulator's own load (its delay lines' packets and CPU, the machine's idle CPU),
and for a flat job what the prediction missed per step of a rank's chain ((emulator −
simulator) ÷ steps: how far the latency per step it measured at 1 KiB was off at that size);
then the latency headlines (where halving-doubling stops beating a ring, per backend) that
``fabriclab report`` prints. With ``--real-sim DIR``, a simulated run of the same experiment
at its real rates (``rate_scale: 1``) beside each emulated run's real-rate figures
(``collective_real_s``): what rate scaling keeps.

    .venv/bin/python benchmarks/latency_emulated.py RUN_DIR... [--real-sim SIM_RUN_DIR...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from analysis import metrics
from analysis.latency import backend_times, headlines, tenant_job
from analysis.load import Run, load_run
from testbed.core.registry import COLLECTIVES, RegistryError
from testbed.core.units import format_size


def chain_steps(run: Run) -> int | None:
    """The steps of a rank's chain in the run's tenant All-Reduce, if it is a flat one (one
    registered collective over all its hosts); else None."""
    job = tenant_job(run) or {}
    if (job.get("workload") or {}).get("kind") != "allreduce" or len(job.get("dims") or []) > 1:
        return None
    try:
        collective = COLLECTIVES.get(str(job.get("algorithm")))
    except RegistryError:
        return None
    return collective.step_count("AR", len(job.get("hosts") or [])) or None


def real_times(run_dir: Path) -> dict[str, dict[int, float]]:
    """Per job, per size: the run's ``collective_real_s`` (a simulated run's own times)."""
    summary = load_run(run_dir).summary or {}
    return {job: {int(s): t for s, v in (rec.get("sizes") or {}).items()
                  if (t := metrics._num(v.get("collective_real_s"))) is not None}
            for job, rec in (summary.get("jobs") or {}).items()}


def machine_load(run: Run) -> str:
    """What the emulator itself cost in the run: the packets its delay lines handled and their
    CPU time (their records in ``delay-lines/``), and the machine's mean idle CPU."""
    packets = cpu_s = 0.0
    for path in sorted((run.path / "delay-lines").glob("*.json")):
        line = json.loads(path.read_text())
        packets, cpu_s = packets + line.get("packets", 0), cpu_s + line.get("cpu_s", 0.0)
    idle = (run.fidelity or {}).get("cpu_idle_mean")
    lines = (f"delay lines {packets:,.0f} packets, {cpu_s:.1f} CPU-s "
             f"({cpu_s / packets * 1e6:.0f} µs each)" if packets else "no delay lines")
    return lines + ("" if idle is None else f"; CPU idle {idle:.0%} on average")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--real-sim", nargs="*", type=Path, default=[],
                    help="simulated runs of the same variants at rate_scale 1")
    args = ap.parse_args()
    runs = []
    for d in args.runs:
        if (d / "report.md").exists() and not (d / "spec.yaml").exists():
            continue  # the experiment's report directory, which DIR/*-latency-* also matches
        runs.append(load_run(d))
    # a simulated run pairs with the emulated run whose name ends its own (latency-real-hd-2us
    # with latency-hd-2us: same variant)
    sims = {str(load_run(d).spec.get("name")): d for d in args.real_sim}
    worst = 0.0
    for run in runs:
        times = backend_times(run)
        verdict = (run.fidelity or {}).get("verdict")
        alpha = ((run.fidelity or {}).get("step_latency") or {}).get("step_latency_s")
        emu, sim, model = (times.get(k) or {} for k in ("emulator", "simulator", "model"))
        print(f"{run.label}: {verdict}" + ("" if alpha is None else
                                            f"; latency per step {alpha * 1e3:.2f} ms measured"
                                            ", in the simulator" + (" and the model" if model
                                                                    else "")))
        sim_real = {}
        variant = str(run.spec.get("name")).split("-", 1)[-1]
        if match := [d for name, d in sims.items() if name.endswith("-" + variant)]:
            sim_real = next(iter(real_times(match[0]).values()), {})
        print(f"  {machine_load(run)}")
        emu_real = next(iter(real_times(run.path).values()), {})
        steps = chain_steps(run)
        for size in sorted(emu):
            ratio = emu[size] / sim[size] if sim.get(size) else None
            if ratio is not None and verdict == "faithful":
                worst = max(worst, abs(ratio - 1))
            line = (f"  {format_size(size, sep=' '):>8}: emulator {emu[size] * 1e3:9.2f} ms, "
                    f"simulator {sim.get(size, float('nan')) * 1e3:9.2f} ms, ratio "
                    f"{ratio:.3f}" if ratio is not None else "")
            if size in model:
                line += f", model {model[size] * 1e3:9.2f} ms"
            if steps and ratio is not None:
                line += f", off by {(emu[size] - sim[size]) / steps * 1e3:+.2f} ms per step"
            if size in sim_real and size in emu_real:
                line += (f"; real: emulator {emu_real[size] * 1e6:8.1f} µs, unscaled "
                         f"simulator {sim_real[size] * 1e6:8.1f} µs, ratio "
                         f"{emu_real[size] / sim_real[size]:.3f}")
            print(line)
    print(f"largest |emulator ÷ simulator − 1| on faithful runs: {worst:.3f}")
    for h in headlines(runs):
        print(f"{h.title}: {h.sentence}")
        for caveat in h.caveats:
            print(f"  caveat: {caveat}")


if __name__ == "__main__":
    main()
