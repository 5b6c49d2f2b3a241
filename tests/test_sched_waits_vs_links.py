"""benchmarks/sched_waits_vs_links.py on a made-up run: a stretch whose job kept its host
links at rate, one whose job fell short, and a directory that is not a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "sched_waits_vs_links.py"
RATE_BYTES_S = 10e6 / 8  # a 10 Mbit/s link


def make_run(run: Path, share_of_rate: dict[str, float]) -> None:
    """A run of two one-host jobs, ``a`` on h0 and ``b`` on h1, each flagged for CPU wait in
    [1, 3] s of the first sample; host h's links send ``share_of_rate[h]`` of their rate."""
    run.mkdir()
    t0 = 100.0
    sched = pd.DataFrame([{"time": t0 + t, "job": job, "process": f"{h} rank0", "pid": 1,
                           "tid": 1, "thread": "python3", "run_s": t, "wait_s": 0.2 * t}
                          for t in range(5) for job, h in (("a", "h0"), ("b", "h1"))])
    sched.to_parquet(run / "sched_samples.parquet")
    rows = []
    for h, share in share_of_rate.items():
        for src, dst in ((h, "leaf0"), ("leaf0", h)):
            for k in range(41):  # every 0.1 s over [0, 4] s
                t = k / 10
                rows.append({"time": t0 + t, "link": f"{h}-leaf0", "src": src, "dst": dst,
                             "capacity_mbit_s": 10.0,
                             "sent_bytes": int(share * RATE_BYTES_S * t),
                             "backlog_bytes": 3000 if share > 0.95 else 0, "drops": 0})
    pd.DataFrame(rows).to_parquet(run / "qdisc_samples.parquet")
    violation = {"start_s": 1.0, "end_s": 3.0, "worst_wait_share": 0.2, "wait_s": 0.4,
                 "comm_s": 2.0, "pid": 1, "tid": 1, "thread": "python3"}
    (run / "fidelity.json").write_text(json.dumps({"scheduler": {"violations": [
        {**violation, "job": "a", "process": "h0 rank0"},
        {**violation, "job": "b", "process": "h1 rank0"}]}}))


def test_it_sets_each_stretch_beside_its_jobs_link_rates(tmp_path: Path) -> None:
    run = tmp_path / "run"
    make_run(run, {"h0": 1.0, "h1": 0.8})
    out = subprocess.run([sys.executable, str(SCRIPT), str(run)], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout.splitlines()
    rows = {line.split()[1]: line for line in out[1:-1]}
    # wire-equivalent rates sit a little above the payload's share (TCP_WIRE_FACTOR)
    assert "(busy 100%)" in rows["a"] and "(busy 0%)" in rows["b"]
    assert 1.0 <= float(rows["a"].split()[-1]) < 1.1 and 0.8 <= float(rows["b"].split()[-1]) < 0.9
    assert out[-1] == ("2 stretches of too much CPU wait; in 1 every host link of the job ran "
                       "at 90% of its rate or more")


def test_a_directory_that_is_not_a_run_gets_one_sentence(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == f"not a run's output directory (no fidelity.json): {tmp_path}"
