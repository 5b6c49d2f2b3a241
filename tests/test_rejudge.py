"""A run's waits judged again (:mod:`testbed.emulator.rejudge`, what
benchmarks/sched_waits_vs_links.py prints) on a made-up run: a worker whose wait its host links
did not feel (excused), one whose job fell short (not, unless its job's result held), the
verdict three ways, and a directory that is not a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from testbed.core.errors import FabricLabError
from testbed.core.traces import COLLECTIVE_SCHEMA
from testbed.emulator.rejudge import rejudged

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "sched_waits_vs_links.py"
RATE_BYTES_S = 10e6 / 8  # a 10 Mbit/s link
T0 = 100.0


def collectives(job_dir: Path, start: float, seconds: float) -> None:
    """One measured collective of ``seconds`` from ``start`` in a job's trace directory."""
    job_dir.mkdir(parents=True)
    cols = {f.name: pa.nulls(1, f.type) for f in COLLECTIVE_SCHEMA}
    cols |= {"warmup": pa.array([False]), "start": pa.array([start]),
             "time": pa.array([seconds])}
    pq.write_table(pa.table(cols, schema=COLLECTIVE_SCHEMA),
                   job_dir / "collectives-rank0.parquet")


def make_run(run: Path, share_of_rate: dict[str, float],
             job_ratios: dict[str, float] | None = None) -> None:
    """A run of two one-host jobs, ``a`` on h0 and ``b`` on h1, communicating over [0, 4] s
    from the first sample, each worker waiting 20 % of it; host h's links send
    ``share_of_rate[h]`` of their rate; ``job_ratios``: the job invariant's judged jobs."""
    run.mkdir()
    sched = pd.DataFrame([{"time": T0 + t, "job": job, "process": f"{h} rank0", "pid": 1,
                           "tid": 1, "thread": "python3", "run_s": t, "wait_s": 0.2 * t}
                          for t in range(5) for job, h in (("a", "h0"), ("b", "h1"))])
    sched.to_parquet(run / "sched_samples.parquet")
    rows = []
    for h, share in share_of_rate.items():
        for src, dst in ((h, "leaf0"), ("leaf0", h)):
            for k in range(41):  # every 0.1 s over [0, 4] s
                t = k / 10
                rows.append({"time": T0 + t, "link": f"{h}-leaf0", "src": src, "dst": dst,
                             "capacity_mbit_s": 10.0,
                             "sent_bytes": int(share * RATE_BYTES_S * t),
                             "backlog_bytes": 3000, "drops": 0})
    pd.DataFrame(rows).to_parquet(run / "qdisc_samples.parquet")
    (run / "jobs.json").write_text(json.dumps([{"name": "a", "hosts": ["h0"]},
                                               {"name": "b", "hosts": ["h1"]}]))
    for job in ("a", "b"):
        collectives(run / "jobs" / job, T0, 4.0)
    judged = [{"job": job, "judged": True, "violated": ratio < 0.9,
               "sizes": [{"size": 1, "ratio": ratio}]}
              for job, ratio in (job_ratios or {}).items()]
    (run / "fidelity.json").write_text(json.dumps({
        "verdict": "not faithful", "reasons": ["scheduler invariant: job a's worker ...",
                                               "scheduler invariant: job b's worker ..."],
        "job": {"jobs": judged}}))


def faithful(res: dict, way: str) -> int:
    return int(res[way] == "faithful")


def test_a_wait_its_links_did_not_feel_is_excused_and_the_verdict_shown_both_ways(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    make_run(run, {"h0": 1.0, "h1": 0.8})
    res = rejudged(run)
    rows = {r.job: r for r in res["stretches"].itertuples()}
    assert len(res["stretches"]) == 2
    for job, links, excused in (("a", "1.00", True), ("b", "0.80", False)):
        r = rows[job]
        assert (f"{r.worst_share:.0%}", f"{r.links_ratio:.2f}") == ("20%", links)
        assert bool(r.excused) is excused and pd.isna(r.job_ratio)
    assert [res[k] for k in ("recorded", "strict", "excusing", "both")] == ["not faithful"] * 4
    assert res["others"] == []
    st = res["stretches"]
    assert int(st["excused"].sum()) == 1
    assert int((~st["excused"] & st["job_ratio"].notna()).sum()) == 0
    assert [faithful(res, w) for w in ("strict", "excusing", "both")] == [0, 0, 0]
    make_run(tmp_path / "kept", {"h0": 1.0, "h1": 0.97})
    res = rejudged(tmp_path / "kept")
    assert [faithful(res, w) for w in ("strict", "excusing", "both")] == [0, 1, 1]
    # b's links fell short, but b reached 0.93 of what its links allow: its result bounds the
    # wait's cost. A job short of 0.90 excuses nothing.
    for ratio, both in ((0.93, 1), (0.85, 0)):
        make_run(tmp_path / f"held{ratio}", {"h0": 1.0, "h1": 0.8}, {"a": 0.99, "b": ratio})
        res = rejudged(tmp_path / f"held{ratio}")
        assert (faithful(res, "excusing"), faithful(res, "both")) == (0, both)


def test_a_directory_that_is_not_a_run_gets_one_sentence(tmp_path: Path) -> None:
    sentence = f"not a run's output directory with sched and qdisc samples: {tmp_path}"
    with pytest.raises(FabricLabError) as exc:
        rejudged(tmp_path)
    assert str(exc.value) == sentence
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == sentence
