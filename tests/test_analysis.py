"""Analysis: metrics against hand-computed numbers, the report's sections, the report CLI."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import (
    LS_SIZE,
    SIZE,
    build_leaf_spine_run,
    build_multidim_run,
)

from analysis import metrics
from analysis.figures import read_drawn
from analysis.load import load_run
from analysis.report import write_report
from testbed.cli import main
from testbed.core.errors import FabricLabError
from workloads.model import predict

SECTION_HEADINGS = ("Summary", "Per-dimension utilisation", "Chunk schedule (Gantt)",
                    "Leaf-spine link heatmap", "Job completion time and slowdown", "Fidelity")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {"multidim": build_multidim_run(root), "leaf_spine": build_leaf_spine_run(root)}


def _copy(src, tmp_path):
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


# ---------------------------------------------------------------- hand-computed metrics

def test_collective_bandwidths_use_the_slowest_rank():
    rows = [{"job": "j", "rank": r, "coll": 0, "iteration": 0, "warmup": False, "size": SIZE,
             "world": 2, "algorithm": "ring", "transport": "zerocopy", "chunks": 1,
             "start": 1.0, "time": t, "algbw": SIZE / t / 1e9, "busbw": SIZE / t / 1e9,
             "correct": True} for r, t in ((0, 0.4), (1, 0.5))]
    c = metrics.collective_table(pd.DataFrame(rows)).iloc[0]
    assert c["t"] == 0.5 and c["end"] == 1.5
    assert c["algbw"] == pytest.approx(2e-3)  # 1 MB in 0.5 s
    assert c["busbw"] == pytest.approx(2e-3 * 2 * (2 - 1) / 2)
    assert c["rank_algbw"] == pytest.approx((2.5e-3 + 2e-3) / 2)
    four = metrics.collective_table(pd.DataFrame([{**rows[1], "world": 4}])).iloc[0]
    assert four["busbw"] == pytest.approx(2e-3 * 2 * 3 / 4)


def test_link_utilisation_from_cumulative_counters():
    # 100 Mbit/s link: 6.25 MB (50 Mbit) in the first second, nothing in the second; the
    # probe once read 0 (a vanished host), which must not count as traffic.
    s = pd.DataFrame({"time": [0.0, 1.0, 1.5, 2.0], "link": "l", "src": "a", "dst": "b",
                      "capacity_mbit_s": 100.0, "bytes": [0, 6_250_000, 0, 6_250_000]})
    rates = metrics.link_rates(s)
    assert list(rates["util"]) == pytest.approx([0.5, 0.0, 0.0])
    u = metrics.link_utilisation(s).iloc[0]
    assert u["key"] == "a→b" and u["mean_util"] == pytest.approx(0.25)
    assert u["peak_util"] == pytest.approx(0.5)
    assert metrics.link_utilisation(s, (1.0, 2.0)).iloc[0]["mean_util"] == pytest.approx(0.0)
    # a 0.1 s burst at twice the configured rate is jitter: the peak is over 0.5 s stretches
    t = np.round(np.arange(0, 1.01, 0.1), 3)
    b = np.cumsum([0] + [1_250_000] * 4 + [2_500_000] + [1_250_000] * 5)  # 100/200 Mbit/s
    burst = pd.DataFrame({"time": t, "link": "l", "src": "a", "dst": "b",
                          "capacity_mbit_s": 100.0, "bytes": b})
    assert metrics.link_rates(burst)["util"].max() == pytest.approx(2.0)
    assert metrics.link_utilisation(burst).iloc[0]["peak_util"] == pytest.approx(1.2)
    bins = metrics.link_util_bins(s, np.array([0.0, 0.5, 1.0, 2.0]))
    assert list(bins.loc["a→b"]) == pytest.approx([0.5, 0.5, 0.0])


def test_jain_index():
    assert metrics.jain([1, 1]) == pytest.approx(1.0)
    assert metrics.jain([1, 0]) == pytest.approx(0.5)
    assert metrics.jain([3, 1]) == pytest.approx(16 / (2 * 10))
    assert metrics.jain([]) is None


def test_sent_bytes_are_read_from_the_trace_not_inferred():
    ph = pd.DataFrame({"op": ["RS", "AR"], "bytes": [100, 100], "sent_bytes": [75, 400]})
    assert list(metrics.phase_sent(ph)) == [75, 400]  # whatever the collective sent
    older = ph.drop(columns="sent_bytes")  # a trace without the column does not say
    assert np.isnan(metrics.phase_sent(older)).all()


def test_dimension_activity_of_baseline_and_themis(runs):
    run = load_run(runs["multidim"])
    act = metrics.dimension_activity(run).groupby(["job", "dim"]).mean(numeric_only=True)
    # baseline: d0 busy 4 of 4 units, d1 2 of 4; Themis: both busy 3 of 3 units
    assert act.loc[("baseline", 0), "active_fraction"] == pytest.approx(1.0)
    assert act.loc[("baseline", 1), "active_fraction"] == pytest.approx(0.5)
    assert act.loc[("themis", 1), "active_fraction"] == pytest.approx(1.0)
    assert act.loc[("baseline", 0), "window_s"] == pytest.approx(1.0)  # 2 collectives x 0.5 s
    # bytes: 250 kB per phase; baseline d0 1 MB/(10 MB/s·0.5 s), d1 0.5 MB/(5 MB/s·0.5 s)
    assert act.loc[("baseline", 0), "bytes_util"] == pytest.approx(0.2)
    assert act.loc[("baseline", 1), "bytes_util"] == pytest.approx(0.2)
    assert act.loc[("themis", 1), "bytes_util"] == pytest.approx(0.75e6 / (5e6 * 0.375))
    dims = metrics.dimension_summary(run)
    assert dims["1"]["active_fraction"] == pytest.approx(0.75)
    assert 0 < dims["0"]["link_util"] < 1


def test_dimension_timeline_sees_the_idle_dimension(runs):
    run = load_run(runs["multidim"])
    job = run.job("baseline")
    c = run.collectives[(run.collectives["job"] == "baseline") & (run.collectives["coll"] == 1)]
    c0 = float(c["start"].min())
    edges = c0 + np.array([0.0, 0.125, 0.25])  # first unit: only d0 works in the baseline
    tl = metrics.dimension_timeline(run, edges)
    assert tl[("active", 0)].tolist() == pytest.approx([1.0, 1.0])
    assert tl[("active", 1)].tolist() == pytest.approx([0.0, 1.0])
    assert tl[("bytes", 0)].iloc[0] == pytest.approx(0.2)
    assert job["algorithm"] == "baseline"


def test_summary_of_the_leaf_spine_run(runs):
    s = metrics.summarise(runs["leaf_spine"])  # a path works too
    json.dumps(s, allow_nan=False)
    a, b, dnn = s["jobs"]["a"], s["jobs"]["b"], s["jobs"]["dnn"]
    assert a["slowdown"] == pytest.approx(2.0) and b["slowdown"] == pytest.approx(1.5)
    assert s["jobs"]["a-solo"]["slowdown"] is None
    assert a["mean_s"] == pytest.approx(0.4) and a["iterations"] == 3
    assert a["algbw_gbit_s"] == pytest.approx(LS_SIZE * 8 / 0.4 / 1e9)
    assert a["jct_s"] == pytest.approx(4 * 0.25 + 4 * 0.4 + 0.25)
    assert s["fairness_basis"] == "1/slowdown"
    assert s["fairness"] == pytest.approx(metrics.jain([1 / 2.0, 1 / 1.5]))
    assert dnn["mean_s"] == pytest.approx(0.5) and dnn["iterations"] == 2
    assert dnn["exposed_comm_s"] == pytest.approx(0.2)
    assert dnn["compute_share"] == pytest.approx(0.6)
    assert dnn["collective_s"] == pytest.approx(0.2)
    assert s["speedup"] is None and s["status"] == "ok"
    assert s["fidelity"] == {"verdict": "faithful", "reasons": []}
    # the ECMP collision: both jobs on spine0, spine1 idle
    assert s["links"]["leaf0→spine0"]["peak_util"] > 0.5
    assert s["links"]["leaf0→spine1"]["peak_util"] == pytest.approx(0.0)
    assert set(s) >= {"run", "status", "jobs", "dimensions", "links", "fairness", "speedup",
                      "fidelity"}


def test_summary_of_baseline_vs_themis(runs):
    s = metrics.summarise(load_run(runs["multidim"]))
    base, them = s["jobs"]["baseline"], s["jobs"]["themis"]
    assert base["collective_s"] == pytest.approx(0.5) and them["collective_s"] == 0.375
    assert base["busbw_gbit_s"] == pytest.approx(SIZE * 8 / 0.5 / 1e9 * 2 * 3 / 4)
    assert s["speedup"]["mean"] == pytest.approx(4 / 3)
    assert s["speedup"]["pairs"][0] | {} == {"baseline": "baseline", "themis": "themis",
                                             "baseline_s": 0.5, "baseline_real_s": 0.5,
                                             "themis_s": 0.375, "themis_real_s": 0.375,
                                             "speedup": pytest.approx(4 / 3)}
    assert s["fairness"] is None  # the two jobs ran one after the other


# ---------------------------------------------------------------- loading

def test_missing_optional_files_and_partial_traces(runs, tmp_path):
    run_dir = _copy(runs["leaf_spine"], tmp_path)
    for name in ("controller.log", "fidelity.json"):
        (run_dir / name).unlink()
    for f in (run_dir / "jobs" / "dnn").glob("iterations-*"):
        f.unlink()
    part = run_dir / "jobs" / "a" / "phases-rank1.parquet"
    part.rename(part.with_name("phases-rank1.partial.parquet"))
    run = load_run(run_dir)
    assert run.fidelity is None and run.controller_log is None and run.iterations.empty
    assert any("phases-rank1 is a partial snapshot" in n for n in run.notes)
    assert len(run.phases[(run.phases["job"] == "a") & (run.phases["rank"] == 1)]) == 4
    s = metrics.summarise(run)
    assert s["fidelity"] is None and s["jobs"]["dnn"]["mean_s"] is None
    html = write_report([run_dir]).read_text()
    assert "no fidelity record" in html


def test_not_a_run_directory(tmp_path, capsys):
    with pytest.raises(FabricLabError, match="is not a run directory"):
        load_run(tmp_path)
    assert main(["report", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert "missing does not exist" in err and "\n" not in err and "Traceback" not in err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "jobs.json").write_text("{not json")
    assert main(["report", str(bad)]) == 2
    assert "cannot read" in capsys.readouterr().err


# ---------------------------------------------------------------- the report

def _headings(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<h2[^>]*>(.*?)</h2>", html)]


def test_report_of_one_run_leads_with_its_headline_and_skips_empty_sections(runs, tmp_path,
                                                                           capsys):
    run_dir = _copy(runs["leaf_spine"], tmp_path)
    assert main(["report", str(run_dir)]) == 0
    path = capsys.readouterr().out.strip()
    assert path == str(run_dir / "report.html")
    html = (run_dir / "report.html").read_text()
    # flat rings only: no chunk schedule to draw, so no Gantt section at all
    # headlines first, then the one fidelity table; a leaf-spine fabric has no dimensions
    assert _headings(html) == ["Headlines", "Fidelity", "Headlines in detail", *(
        h for h in SECTION_HEADINGS if "Gantt" not in h and "dimension" not in h)]
    assert re.search("Contention under ecmp on [^<]+</a></strong> — slowdown against running "
                     "alone: 1.75× mean, 2.00× worst over 2 jobs", html)
    assert html.count('src="data:image/png;base64,') == 3  # headline slowdowns, heatmap, CDF
    assert "Do not trust" not in html and "leaf0→spine0" in html
    md = (run_dir / "report.md").read_text()
    assert "## Headlines" in md and "## Chunk schedule" not in md
    for fig in re.findall(r"!\[[^]]*\]\(([^)]+)\)", md):
        assert (run_dir / fig).is_file()


def test_unfaithful_run_is_flagged_and_its_themis_headline_has_the_model(runs, tmp_path):
    run_dir = build_multidim_run(tmp_path, faithful=False)
    html = write_report([run_dir], tmp_path / "out").read_text()
    # no leaf-spine links: no heatmap section; two jobs without solo baselines: no JCT CDF
    assert _headings(html) == ["Headlines", "Fidelity", "Headlines in detail", "Summary",
                               "Per-dimension utilisation",
                               "Chunk schedule (Gantt)", "Job completion time and slowdown",
                               "Fidelity"]
    assert html.count('src="data:image/png;base64,') == 4  # the headline's Gantt, dims, Gantt, CDF
    assert 'alt="Gantt chart of chunk phases per dimension"' in html
    banner = html.index("Do not trust this run")
    assert banner < html.index(">Headlines<") < html.index(">Summary<")
    assert "CPU idle fell to 3%" in html[banner:html.index(">Summary<")]
    head = re.search(r"themis is ([\d.]+)× as fast as baseline \(the model predicts ([\d.]+)×\)",
                     html)
    model = [predict([2, 2], [80e6, 40e6], SIZE, 2, policy=p).time_s
             for p in ("baseline", "themis")]
    assert head and head.group(1) == "1.33" and head.group(2) == f"{model[0] / model[1]:.2f}"
    assert "failed its fidelity check" in html
    assert "Do not trust this run" in (tmp_path / "out" / "report.md").read_text()


def test_report_on_two_runs_leads_with_the_routing_headline(runs, tmp_path):
    vclos = build_leaf_spine_run(tmp_path, "vclos", policy="vclos", times=(0.2, 0.2),
                                 spines=(0, 1))
    html_path = write_report([runs["leaf_spine"], vclos], tmp_path / "cmp")
    html = html_path.read_text()
    heads = _headings(html)
    assert heads[:4] == ["Headlines", "Fidelity", "Headlines in detail", "Comparison"]
    for label in ("ecmp", "vclos"):
        assert f"Run: {label}" in heads
        assert f"Summary — {label}" in heads and f"Fidelity — {label}" in heads
    assert ("Routing: vclos vs ecmp on 2 leaves × 2 spines at 100 Mbit/s, 3 jobs</a></strong> — "
            "slowdown against running alone: 1.75× mean, "
            "2.00× worst under ecmp; 1.00× mean, 1.00× worst under vclos — slowdown ratio "
            "1.75×") in html
    table = html[html.index('id="comparison"'):]
    table = table[:table.index("</table>")]
    assert "<th>ecmp</th><th>vclos</th>" in table
    assert "Worst slowdown</td><td>2.00×</td><td>1.00×" in table
    assert "Speed-up vs" not in table  # runs are compared only in headlines, within a setup
    # no plot across the runs at large: the headline's own, of exactly its two runs
    assert not (tmp_path / "cmp" / "fig-comparison.png").exists()
    assert read_drawn(tmp_path / "cmp" / "fig-headline-1.png")["runs"] == ["ecmp", "vclos"]
    md = (tmp_path / "cmp" / "report.md").read_text()
    assert "| metric | ecmp | vclos |" in md
    assert "| a | 1 MiB |" in md or "| a |" in md


def test_runs_without_a_shared_setup_get_no_headline(runs, tmp_path):
    html = write_report([runs["leaf_spine"], runs["multidim"]], tmp_path / "x").read_text()
    assert "No two runs share a fabric and jobs" in html
    assert "Routing:" not in html and "Chunk schedule:" not in html


def test_report_default_out_for_several_runs(runs, tmp_path):
    a = _copy(runs["leaf_spine"], tmp_path)
    b = _copy(runs["multidim"], tmp_path)
    out = write_report([a, b])
    assert out == a / "comparison" / "report.html" and out.is_file()


def test_report_reads_an_allreduce_out_directory(tmp_path, capsys):
    out = tmp_path / "ar"
    assert main(["allreduce", "--ranks", "2", "--size", "1KiB:2KiB", "--iters", "1",
                 "--warmup", "0", "--out", str(out)]) == 0
    capsys.readouterr()
    run = load_run(out)
    assert run.job_names == ["job0"] and run.jobs[0]["status"] == "ok"
    assert sorted(set(run.collectives["size"])) == [1024, 2048]
    md = (write_report([out], tmp_path / "rep").parent / "report.md").read_text()
    assert "over loopback" in md and "## Every message size" in md
    assert "| job0 | 1 KiB | 1 |" in md and "| job0 | 2 KiB | 1 |" in md


def test_report_reads_a_calibration_directory(tmp_path):
    from testbed.core.spec import load_fabric
    from testbed.core.topology import build_plan
    from testbed.emulator.calibrate import Calibration, LinkResult

    plan = build_plan(load_fabric("experiments/fabrics/leaf-spine-4x4.yaml"))
    links = [LinkResult("l0", "h0", "leaf0", 100.0, 100.0, 97.0, 0.97, 0),
             LinkResult("l1", "leaf0", "spine0", 100.0, 100.0, 71.0, 0.71, 1)]
    cal = Calibration(fabric={}, datapath="userspace", rounds=2, round_s=4.0, links=links,
                      cpu_idle_min=0.4, cpu_idle_mean=0.6, iperf_goodput_ratio=0.95,
                      bring_up_s=1.0)
    (tmp_path / "topology.json").write_text(plan.to_json())
    (tmp_path / "calibration.json").write_text(json.dumps(cal.to_dict()))
    md = (write_report([tmp_path], tmp_path / "rep").parent / "report.md").read_text()
    assert "Do not trust this run" in md and "leaf0->spine0 at 0.71 of 100 Mbit/s" in md
    section = md[md.index("## Calibration"):md.index("## Fidelity", md.index("## Calibration"))]
    assert "verdict **not faithful**" in section
    rows = [line for line in section.splitlines() if line.startswith("| h0") or
            line.startswith("| leaf0")]
    assert rows == ["| leaf0→spine0 | 100.0 | 100.0 | 71.0 | 71% |",
                    "| h0→leaf0 | 100.0 | 100.0 | 97.0 | 97% |"]


def test_a_link_short_of_its_rate_while_loaded_is_reported_where_and_when(runs, tmp_path):
    import numpy as np
    import pandas as pd

    from testbed.core.samples import QDISC_SAMPLE_SCHEMA
    from testbed.emulator.fidelity import fidelity_record
    from testbed.emulator.sampler import write_parquet

    run_dir = _copy(runs["leaf_spine"], tmp_path)
    topo = json.loads((run_dir / "topology.json").read_text())
    lk = next(lk for lk in topo["links"] if {lk["a"], lk["b"]} == {"leaf0", "spine0"})
    name = f"{lk['a']}:{lk['a_port']}-{lk['b']}:{lk['b_port']}"
    t = 20.0 + np.arange(51) * 0.01  # 0.5 s at 100 Hz, queue always covering, half the rate
    sent = (np.arange(51) * 0.01 * 100e6 / 8 * 0.5).astype(int)
    q = pd.DataFrame({"time": t, "link": name, "src": "leaf0", "dst": "spine0",
                      "capacity_mbit_s": 100.0, "sent_bytes": sent, "backlog_bytes": 10**6,
                      "drops": 0})
    write_parquet(q, run_dir / "qdisc_samples.parquet", QDISC_SAMPLE_SCHEMA)
    record = fidelity_record(None, q, idle_min=0.5)
    record.update(verdict="not faithful", cpu_idle_min=0.5, cpu_idle_mean=0.7,
                  calibration=None)
    (run_dir / "fidelity.json").write_text(json.dumps(record))
    md = (write_report([run_dir], tmp_path / "rep").parent / "report.md").read_text()
    assert "Do not trust this run" in md
    assert "leaf0->spine0 sent 50% of its 100 Mbit/s at 0.0 s while its queue would have " \
           "kept it busy" in md
    assert "judged by the link invariant, over 0.5 s" in md
    assert re.search(r"\| leaf0→spine0 \| 1 \| 500 ms \| 50% \| 0 ms \| (2\.9\d|3\.0\d) MiB \|",
                     md), md
