"""The analysis of command jobs (no root): iteration times from a program's iteration-log
lines, nccl-tests bandwidths when its iterations report bytes, and the headline comparing
fabriclab's job against a peer program (``peer_of``)."""

from __future__ import annotations

import json

import pytest
from analysis_fixtures import LS_SIZE, build_leaf_spine_run

from analysis import compare, metrics
from analysis.load import load_run
from workloads.iteration_log import write_iterations


def add_command_job(run, name: str, seconds: float, *, solo_of: str | None = None,
                    peer_of: str | None = "a") -> None:
    """A 2-rank command job whose program printed 3 iterations of ``seconds`` (one warm-up)
    reducing LS_SIZE bytes, with ``peer_of`` the fabriclab job it stands beside."""
    job_dir = run / "jobs" / name
    job_dir.mkdir(parents=True)
    for rank in range(2):
        lines = [json.dumps({"fabriclab": "iteration", "iteration": i, "time_s": seconds,
                             "warmup": i == 0, "bytes": LS_SIZE}) for i in range(3)]
        log = job_dir / f"stdout-rank{rank}.log"
        log.write_text("loading...\n" + "\n".join(lines) + "\n")
        assert write_iterations(log, job_dir, run_id="r", job_id=name, rank=rank, world=2,
                                label="gloo_allreduce") == 3
    jobs = json.loads((run / "jobs.json").read_text())
    workload = {"kind": "command", "argv": ["python", "-m", "x"], "env": {},
                "master_port": 29500, "peer_of": None if solo_of else peer_of}
    jobs.append({"name": name, "hosts": ["h0", "h2"], "solo_of": solo_of, "policy": "ecmp",
                 "spines": [], "circuits": [], "algorithm": None, "dim_algorithm": None,
                 "order": None, "chunks": None, "transport": None, "workload": workload,
                 "start": 30.0, "end": 31.0, "status": "ok", "error": None, "results": [],
                 "command": {"exit_codes": [0, 0], "iterations": [3, 3]}})
    (run / "jobs.json").write_text(json.dumps(jobs))


def test_a_command_job_is_measured_by_its_iterations_and_bytes(tmp_path):
    run_dir = build_leaf_spine_run(tmp_path, with_dnn=False)
    add_command_job(run_dir, "gloo", 0.25)
    jm = metrics.job_metrics(load_run(run_dir))
    row = jm.loc["gloo"]
    assert row["workload"] == "command" and row["iterations"] == 2  # the warm-up left out
    assert row["mean_s"] == pytest.approx(0.25)
    assert row["size_bytes"] == LS_SIZE
    algbw = LS_SIZE * 8 / 0.25 / 1e9
    assert row["algbw_gbit_s"] == pytest.approx(algbw)
    assert row["busbw_gbit_s"] == pytest.approx(algbw)  # 2(n-1)/n = 1 for two ranks


def test_the_peer_headline_compares_bus_bandwidths_of_the_solo_runs(tmp_path):
    run_dir = build_leaf_spine_run(tmp_path, with_dnn=False)
    add_command_job(run_dir, "gloo", 0.4)
    add_command_job(run_dir, "gloo-solo", 0.25, solo_of="gloo")
    run = load_run(run_dir)
    summary = metrics.summarise(run)
    facts = compare.facts(run, summary, "ok")
    assert facts.peers == [("gloo", "a")]
    (peer,) = [h for h in compare.run_headlines(facts, None) if h.title.startswith("Peer")]
    ours = summary["jobs"]["a-solo"]["busbw_gbit_s"]
    theirs = summary["jobs"]["gloo-solo"]["busbw_gbit_s"]
    assert peer.number == pytest.approx(ours / theirs)
    assert "(each alone)" in peer.sentence and not peer.caveats


def test_without_solo_runs_the_peer_headline_says_they_ran_together(tmp_path):
    run_dir = build_leaf_spine_run(tmp_path, with_dnn=False)
    add_command_job(run_dir, "gloo", 0.4)
    jobs = [j for j in json.loads((run_dir / "jobs.json").read_text())
            if j["name"] != "a-solo"]
    (run_dir / "jobs.json").write_text(json.dumps(jobs))
    run = load_run(run_dir)
    facts = compare.facts(run, metrics.summarise(run), "ok")
    (peer,) = [h for h in compare.run_headlines(facts, None) if h.title.startswith("Peer")]
    assert any("same time" in c for c in peer.caveats)
