"""Sampled waits vs sched events; BENCHMARKS.md "Waits the kernel counted while a worker slept".

The scheduler invariant's CPU waits checked against the kernel's own scheduler events.

    .venv/bin/python benchmarks/runqueue_traced.py experiments/contention.yaml --variant ecmp

Each run is ``fabriclab run`` under ``perf sched record -a``. The sched events give the true
run-queue wait of every thread: from its wake-up (or from being switched out still runnable)
to being switched in. For every worker and ``ovs-vswitchd`` thread the run sampled, the script
prints three figures over the thread's sampled span:

- the wait the kernel counted (``run_delay``, ``sched_samples.parquet`` ``wait_s``);
- what the invariant keeps of it (:func:`analysis.sched_invariant.runnable_wait`);
- the wait the events show.

It also prints the largest single wait each source has. It names the threads whose counted
wait exceeds the traced one by more than 0.1 s, gives the run's verdict, and sums the workers'
wait over the runs.

Needs root and ``perf`` (Debian: ``linux-perf``, installed here if missing). ``perf sched
timehist`` is not used: perf 6.1 reads the state of a preempted task (``R+``) on newer kernels
as a sleep, and leaves those waits out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from analysis.runqueue_trace import counted_vs_traced, traced_waits
from testbed.emulator.rejudge import rejudged

ROOT = Path(__file__).resolve().parents[1]
FABRICLAB = ROOT / "bin" / "fabriclab"
TRACEFS = Path("/sys/kernel/tracing")
SHOWN_EXCESS_S = 0.1  # a thread whose counted wait beats the traced one by more is named


def ensure_perf() -> None:
    """perf on the PATH and tracefs mounted where it looks, or one clear sentence."""
    if shutil.which("perf") is None:
        print("runqueue_traced: installing linux-perf (perf) with apt-get", flush=True)
        subprocess.run(["apt-get", "install", "-y", "-q", "linux-perf"], check=True,
                       stdout=subprocess.DEVNULL)
    if not (TRACEFS / "events").is_dir():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], check=True)


def one_run(spec: Path, out: Path, k: int) -> list[tuple[Path, pd.DataFrame]]:
    """Run ``spec`` under perf; per run directory it made (one per variant), the directory and
    the per-thread comparison."""
    data = out / f"perf{k}.data"
    subprocess.run(["perf", "sched", "record", "-a", "-o", str(data), "--",
                    str(FABRICLAB), "run", str(spec), "--out", str(out / f"run{k}"),
                    "--no-report"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    script = subprocess.Popen(["perf", "script", "-i", str(data), "-F",
                               "tid,cpu,time,event,trace"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    assert script.stdout is not None
    waits = traced_waits(script.stdout)
    script.wait()
    data.unlink()  # about 60 MB a minute
    runs = sorted(p for p in (out / f"run{k}").iterdir() if p.is_dir())
    return [(run, counted_vs_traced(pd.read_parquet(run / "sched_samples.parquet"), waits))
            for run in runs]


def one_variant(spec_path: Path, variant: str | None, out: Path) -> Path:
    """The experiment with only ``variant`` left (all of it without one)."""
    spec = yaml.safe_load(spec_path.read_text())
    if variant is not None:
        spec["variants"] = [v for v in spec.get("variants", []) if v["name"] == variant]
        if not spec["variants"]:
            sys.exit(f"runqueue_traced: {spec_path} has no variant named {variant!r}")
    path = out / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def report(k: int, run: Path, cmp: pd.DataFrame) -> tuple[pd.Series, tuple[str, str]]:
    """Print one run directory's figures; return its workers' summed waits and its verdicts
    (as recorded, and judged on the kernel's count)."""
    fid = json.loads((run / "fidelity.json").read_text())
    workers = cmp[cmp["process"].str.contains(" rank")]
    sums = workers[["counted_s", "kept_s", "traced_s"]].sum()
    print(f"run {k}: {fid['verdict']} ({run}); workers' wait: kernel counted "
          f"{sums.counted_s:.2f} s, invariant kept {sums.kept_s:.2f} s, traced "
          f"{sums.traced_s:.2f} s; largest single: counted {workers.jump_s.max():.3f} s, "
          f"traced {workers.traced_max_s.max():.3f} s", flush=True)
    excess = cmp[cmp["counted_s"] - cmp["traced_s"] > SHOWN_EXCESS_S]
    if len(excess):
        print(excess.round(3).to_string(index=False))
    for reason in fid["reasons"]:
        print(f"  {reason}")
    was = rejudged(run, asleep_bound=False)
    print(f"  judged on the wait as the kernel counted it: {was['both']} "
          f"({int((~was['stretches']['excused']).sum())} stretches not excused by links)")
    return sums, (fid["verdict"], was["both"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", type=Path)
    ap.add_argument("--variant", help="run only this variant of the experiment")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--out", type=Path, help="where runs go (default: a new temporary dir)")
    args = ap.parse_args()
    ensure_perf()
    out = args.out or Path(tempfile.mkdtemp(prefix="runqueue-traced-"))
    out.mkdir(parents=True, exist_ok=True)
    spec = one_variant(args.experiment, args.variant, out)
    pd.set_option("display.width", 160)
    reported = [report(k, run, cmp) for k in range(1, args.runs + 1)
                for run, cmp in one_run(spec, out, k)]
    verdicts = [v for _, v in reported]
    t = pd.DataFrame([sums for sums, _ in reported]).sum()
    print(f"{len(verdicts)} runs, workers' wait: kernel counted {t.counted_s:.2f} s, invariant "
          f"kept {t.kept_s:.2f} s, traced {t.traced_s:.2f} s; faithful "
          f"{sum(v == 'faithful' for v, _ in verdicts)} of {len(verdicts)}, and "
          f"{sum(w == 'faithful' for _, w in verdicts)} judged on the kernel's count")


if __name__ == "__main__":
    main()
