"""Analysis on a run directory produced by a real run (tests/data/run-tiny: two 2-host ring
jobs on a 2x2 leaf-spine under vClos, each also run alone), against values computed here by
hand from the raw traces."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from analysis.load import load_run
from analysis.metrics import summarise
from analysis.report import write_report

RUN = Path(__file__).parent / "data" / "run-tiny"


def collective_times(job: str) -> pd.Series:
    """Per measured collective: the slowest rank's time (nccl-tests' convention)."""
    frames = [pq.read_table(f).to_pandas() for f in sorted((RUN / "jobs" / job).glob(
        "collectives-rank*.parquet"))]
    df = pd.concat(frames)
    df = df[~df["warmup"]]
    return df.groupby("coll")["time"].max()


def test_job_metrics_match_hand_computation():
    s = summarise(load_run(RUN))
    for job in ("a", "b"):
        t = collective_times(job)
        assert len(t) == 2  # two measured iterations, warm-up excluded
        mean = t.mean()
        size, n = 512 * 1024, 2
        algbw_gbit_s = size * 8 / mean / 1e9
        j = s["jobs"][job]
        assert j["iterations"] == 2 and j["correct"]
        assert j["collective_s"] == pytest.approx(mean, rel=1e-9)
        assert j["algbw_gbit_s"] == pytest.approx(algbw_gbit_s, rel=1e-9)
        assert j["busbw_gbit_s"] == pytest.approx(algbw_gbit_s * 2 * (n - 1) / n, rel=1e-9)
        solo = collective_times(f"{job}-solo").mean()
        assert j["slowdown"] == pytest.approx(mean / solo, rel=1e-9)


def test_fairness_and_link_utilisation_match_hand_computation():
    s = summarise(load_run(RUN))
    x = [1 / s["jobs"][j]["slowdown"] for j in ("a", "b")]
    jain = sum(x) ** 2 / (len(x) * sum(v * v for v in x))
    assert s["fairness"] == pytest.approx(jain, rel=1e-9)
    samples = pd.read_parquet(RUN / "link_samples.parquet")
    jobs = json.loads((RUN / "jobs.json").read_text())
    t0, t1 = min(j["start"] for j in jobs), max(j["end"] for j in jobs)  # the jobs' span
    g = samples[(samples["src"] == "h0") & (samples["dst"] == "leaf0")].sort_values("time")
    g = g[(g["time"] >= t0) & (g["time"] <= t1)]
    mean = (g["bytes"].iloc[-1] - g["bytes"].iloc[0]) * 8 / (
        g["time"].iloc[-1] - g["time"].iloc[0]) / 50e6
    assert s["links"]["h0→leaf0"]["mean_util"] == pytest.approx(mean, rel=1e-6)
    assert 0 < mean < 1


def test_recorded_summary_and_placement():
    recorded = json.loads((RUN / "summary.json").read_text())
    assert recorded["status"] == "ok"
    jobs = {j["name"]: j for j in json.loads((RUN / "jobs.json").read_text())}
    # vClos gave the two jobs different spines; each job's hosts sit on both leaves
    assert jobs["a"]["spines"] != jobs["b"]["spines"]
    topo = json.loads((RUN / "topology.json").read_text())
    leaf = {h["name"]: h["leaf"] for h in topo["hosts"]}
    assert {leaf[h] for h in jobs["a"]["hosts"]} == {0, 1}


def test_report_renders_every_section(tmp_path):
    html = write_report([RUN], tmp_path).read_text()
    for heading in ("Headlines", "Summary", "Fidelity"):
        assert heading in html
    assert "Per-dimension utilisation" not in html  # a leaf-spine fabric has no dimensions
    assert (tmp_path / "report.md").exists()


def test_old_unit_less_names_load_as_the_current_ones():
    """run-tiny predates the unit suffixes (``mbps``): loading renames them, in one place."""
    assert "mbps" in pq.read_schema(RUN / "link_samples.parquet").names  # really an old run
    run = load_run(RUN)
    assert "capacity_mbit_s" in run.links and "mbps" not in run.links
    assert set(run.links["capacity_mbit_s"]) == {50.0}
    assert all(lk["mbit_s"] == 50 and "mbps" not in lk for lk in run.topology["links"])
    assert run.topology["spec"]["host_link_mbit_s"] == 50
    assert run.spec["fabric"]["uplink_mbit_s"] == 50
    lk = run.fidelity["links"][0]
    assert lk["configured_mbit_s"] == 50 and lk["peak_mbit_s"] > 0 and "peak_mbps" not in lk


def test_an_old_runs_jobs_read_as_the_typed_contract(tmp_path):
    """run-tiny is schema 1 in its first layout (no dims in jobs.json, no run.json):
    analysis.compat gives its jobs their dims from the worker config and their kinds and host
    rates from topology.json, once; a run of a newer schema is read with a note."""
    assert "dims" not in json.loads((RUN / "jobs.json").read_text())[0]  # really that old
    run = load_run(RUN)
    assert set(run.resolved) == {"a", "b", "a-solo", "b-solo"} and not run.notes
    a = run.resolved["a"]
    assert (a.hosts, a.dims, a.dim_kinds, a.dim_host_rates_bps) == (
        ["h0", "h2"], [2], ["switch"], [50e6])
    newer = tmp_path / "run"
    newer.mkdir()
    for name in ("spec.yaml", "topology.json", "jobs.json"):
        (newer / name).write_text((RUN / name).read_text())
    (newer / "run.json").write_text(json.dumps({"schema": 99, "status": "ok"}))
    assert any("schema is 99" in note for note in load_run(newer).notes)
