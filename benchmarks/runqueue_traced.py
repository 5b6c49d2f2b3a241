"""The scheduler invariant's CPU waits checked against the kernel's own scheduler events.

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
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import pandas as pd
import yaml

from analysis import sched_invariant

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sched_waits_vs_links import judged

ROOT = Path(__file__).resolve().parents[1]
FABRICLAB = ROOT / "bin" / "fabriclab"
TRACEFS = Path("/sys/kernel/tracing")
SWITCH = re.compile(r"^\s*\d+\s+\[\d+\]\s+([\d.]+):\s+sched:sched_switch: .*prev_pid=(\d+) "
                    r".*prev_state=(\S+) ==> .*next_pid=(\d+)")
WAKE = re.compile(r"^\s*\d+\s+\[\d+\]\s+([\d.]+):\s+sched:sched_(?:waking|wakeup|wakeup_new):"
                  r" .*\bpid=(\d+) ")
SHOWN_EXCESS_S = 0.1  # a thread whose counted wait beats the traced one by more is named


def traced_waits(lines) -> dict[int, list[tuple[float, float]]]:
    """Per thread, its run-queue waits as (ready, switched in) times, from ``perf script -F
    tid,cpu,time,event,trace`` lines of sched_switch and wake-up events in time order."""
    ready: dict[int, float] = {}
    running: set[int] = set()
    waits: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for line in lines:
        if m := SWITCH.match(line):
            t, prev, state, nxt = float(m[1]), int(m[2]), m[3], int(m[4])
            running.discard(prev)
            if state.startswith("R"):  # preempted (R+) or yielded: still runnable
                ready[prev] = t
            else:
                ready.pop(prev, None)
            if nxt in ready:
                waits[nxt].append((ready.pop(nxt), t))
            running.add(nxt)
        elif (m := WAKE.match(line)) and (tid := int(m[2])) not in running | ready.keys():
            ready[tid] = float(m[1])
    return waits


def compare(sched: pd.DataFrame, waits: dict[int, list[tuple[float, float]]]) -> pd.DataFrame:
    """Per sampled thread: ``counted_s`` (the kernel's run_delay over its samples), ``kept_s``
    (what the invariant keeps), ``traced_s`` (the events' waits that ended in that span), and
    the largest single wait: ``jump_s`` (run_delay's largest growth in one sample) and
    ``traced_max_s``."""
    rows = []
    for (process, tid, thread), h in sched.sort_values("time").groupby(
            ["process", "tid", "thread"], sort=False):
        t0, t1 = float(h["time"].iloc[0]), float(h["time"].iloc[-1])
        kept = sched_invariant.thread_wait(h)
        mine = [b - a for a, b in waits.get(int(tid), []) if t0 < b <= t1]
        rows.append({"process": process, "thread": thread, "tid": int(tid),
                     "span_s": t1 - t0,
                     "counted_s": float(h["wait_s"].iloc[-1] - h["wait_s"].iloc[0]),
                     "kept_s": float(kept[-1] - kept[0]), "traced_s": sum(mine),
                     "jump_s": float(h["wait_s"].diff().max()),
                     "traced_max_s": max(mine, default=0.0)})
    return pd.DataFrame(rows)


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
    return [(run, compare(pd.read_parquet(run / "sched_samples.parquet"), waits))
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
    was = judged(run, asleep_bound=False)
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
