"""simulate-cluster results: GPU utilisation over time and the cluster report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from analysis.cluster import is_cluster_dir, load_cluster, trace_warning, utilisation_timeline
from analysis.report import write_report
from testbed.cli import main
from testbed.core.errors import FabricLabError

DATA = Path(__file__).parent / "data"


def test_utilisation_timeline_is_a_step_function_of_starts_and_finishes() -> None:
    rows = [
        {"start_s": 0.0, "finish_s": 10.0, "gpus": 4},
        {"start_s": 5.0, "finish_s": 10.0, "gpus": 2},
        {"start_s": 12.0, "finish_s": 12.0, "gpus": 8},  # starts and ends at once: no step
        {"start_s": 15.0, "finish_s": 20.0, "gpus": 8},
    ]
    tl = utilisation_timeline(rows, total_gpus=8)
    assert tl["time_s"].tolist() == [0.0, 5.0, 10.0, 12.0, 15.0, 20.0]
    assert tl["busy_gpus"].tolist() == [4, 6, 0, 0, 8, 0]
    assert tl["utilisation"].tolist() == [0.5, 0.75, 0.0, 0.0, 1.0, 0.0]


def _simulate(out: Path, policy: str, *extra: str) -> Path:
    assert main(["simulate-cluster", "--leaves", "4", "--spines", "4", "--hosts-per-leaf", "4",
                 "--jobs", "40", "--load", "1.2", "--seed", "2", "--policy", policy,
                 "--out", str(out), *extra]) == 0
    return out


def test_cluster_report_compares_policies(tmp_path: Path) -> None:
    dirs = [_simulate(tmp_path / p, p) for p in ("ecmp", "vclos")]
    dirs.append(_simulate(tmp_path / "ocs", "ocs-vclos", "--placement", "hosts-first"))
    for d in dirs:
        assert is_cluster_dir(d)
        tl = pd.read_csv(d / "utilisation.csv")
        summary = json.loads((d / "summary.json").read_text())
        assert tl["busy_gpus"].between(0, summary["gpus"]).all()
        assert tl["busy_gpus"].iloc[-1] == 0  # every job finished
        jobs = pd.read_csv(d / "jobs.csv")
        assert (jobs["slowdown"] >= 1 - 1e-9).all(), "a job ran faster than alone"
    html = write_report(dirs, tmp_path / "report")
    text = html.read_text()
    for label in ("ecmp", "vclos", "ocs-vclos hosts-first augment rewiring"):
        assert label in text
    assert "Average wait" in text and "data:image/png;base64," in text
    md = (tmp_path / "report" / "report.md").read_text()
    assert "fig-cluster-cdfs.png" in md and "fig-cluster-utilisation.png" in md
    assert (tmp_path / "report" / "fig-cluster-cdfs.png").stat().st_size > 0
    assert load_cluster(dirs[2]).label == "ocs-vclos hosts-first augment rewiring"
    assert "Compare with care" not in md  # one trace, one seed: the same jobs


def test_report_refuses_mixed_directories(tmp_path: Path) -> None:
    cluster = _simulate(tmp_path / "c", "vclos")
    with pytest.raises(FabricLabError, match="not both at once"):
        write_report([cluster, DATA / "run-tiny"], tmp_path / "r")
    with pytest.raises(FabricLabError, match="not a simulate-cluster directory"):
        load_cluster(DATA / "run-tiny")
    assert not (tmp_path / "r").exists()


def test_directories_from_before_units_in_keys_still_load(tmp_path: Path) -> None:
    d = _simulate(tmp_path / "old", "vclos")
    summary = json.loads((d / "summary.json").read_text())
    old = {"avg_jct_s": "avg_jct", "avg_wait_s": "avg_wait", "link_gbit_s": "link_gbps"}
    (d / "summary.json").write_text(json.dumps({old.get(k, k): v for k, v in summary.items()}))
    jobs = pd.read_csv(d / "jobs.csv")
    jobs.rename(columns={"jct_s": "jct", "wait_s": "wait", "arrival_s": "arrival"}).to_csv(
        d / "jobs.csv", index=False)
    run = load_cluster(d)
    assert run.summary["avg_jct_s"] == summary["avg_jct_s"] and "avg_jct" not in run.summary
    assert {"jct_s", "wait_s", "arrival_s"} <= set(run.jobs.columns)
    write_report([d], tmp_path / "r")
    assert "Average JCT" in (tmp_path / "r" / "report.md").read_text()


TINY = ["simulate-cluster", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2",
        "--jobs", "6"]


def _tiny(out: Path, *extra: str) -> Path:
    assert main([*TINY, "--out", str(out), *extra]) == 0
    return out


def test_report_lists_each_runs_trace_and_warns_when_the_jobs_differ(tmp_path: Path,
                                                                    capsys) -> None:
    a = _tiny(tmp_path / "a", "--seed", "1", "--label", "ECMP, seed 1")
    b = _tiny(tmp_path / "b", "--seed", "2", "--load", "1.5", "--policy", "vclos")
    summary = json.loads((a / "summary.json").read_text())
    assert summary["label"] == "ECMP, seed 1" and summary["jobs_requested"] == 6
    assert (summary["trace"], summary["trace_file"], summary["load"]) == ("synthetic", None, 0.8)
    capsys.readouterr()
    assert main(["report", str(a), str(b), "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    # what was swept (seed, load) is said plainly; the red warning is for jobs that did not run
    assert err.startswith("note: these runs did not simulate the same jobs (seed 1 vs 2; "
                          "load 0.8 vs 1.5)"), err
    md = (tmp_path / "r" / "report.md").read_text()
    assert "**What differs:** these runs did not simulate the same jobs" in md
    assert "Compare with care" not in md  # every job of both traces ran
    assert "| ECMP, seed 1 | `synthetic` | — | 6 / 6 | 1 | 0.8 | 4 | 100 Gbit/s |" in md
    assert "| vclos | `synthetic` | — | 6 / 6 | 2 | 1.5 | 4 | 100 Gbit/s |" in md
    assert "fabriclab cluster report: ECMP, seed 1 vs vclos" in md
    html = (tmp_path / "r" / "report.html").read_text()
    assert 'class="banner unknown"><strong>What differs:' in html and "ECMP, seed 1" in html
    assert "banner bad" not in html


def test_refused_jobs_are_counted_beside_every_average(tmp_path: Path, capsys) -> None:
    """vClos refuses jobs it cannot shape; ECMP runs them all: the report says so in red,
    counts them per run, and averages over the jobs both ran."""
    shape = ["--leaves", "8", "--spines", "8", "--hosts-per-leaf", "32", "--jobs", "200"]
    ecmp, vclos = tmp_path / "ecmp", tmp_path / "vclos"
    assert main(["simulate-cluster", *shape, "--out", str(ecmp)]) == 0
    assert main(["simulate-cluster", *shape, "--policy", "vclos", "--out", str(vclos)]) == 0
    out = capsys.readouterr().out
    refused = json.loads((vclos / "summary.json").read_text())["refused_unshapeable"]
    assert refused > 0
    assert f"vclos: {200 - refused} of 200 ran; {refused} refused as unshapeable;" in out
    assert "ecmp: 200 of 200 ran; over those" in out
    assert main(["report", str(ecmp), str(vclos), "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"warning: not every job ran: vclos: {200 - refused} of 200 ran"), err
    md = (tmp_path / "r" / "report.md").read_text()
    assert (f"| Jobs | 200 of 200 ran | {200 - refused} of 200 ran; {refused} refused as "
            "unshapeable |") in md
    assert f"| Average JCT over the {200 - refused} jobs every run completed |" in md


def test_same_trace_file_same_jobs_whatever_its_path(tmp_path: Path, capsys) -> None:
    copy = tmp_path / "copy.csv"
    copy.write_bytes((DATA / "helios_sample.csv").read_bytes())
    leaves = ["--leaves", "16"]
    a = _tiny(tmp_path / "a", *leaves, "--trace", f"helios:{DATA / 'helios_sample.csv'}")
    b = _tiny(tmp_path / "b", *leaves, "--trace", f"helios:{copy}", "--load", "2")
    c = _tiny(tmp_path / "c", *leaves, "--trace", f"helios:{copy}", "--seed", "5")
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    assert sa["trace_sha256"] == sb["trace_sha256"] and sa["load"] is None
    assert sb["trace_file"] == str(copy.resolve())
    assert trace_warning([sa, sb]) is None  # load is not used by a trace file
    capsys.readouterr()
    assert main(["report", str(a), str(c), "--out", str(tmp_path / "r")]) == 0
    assert "the same jobs (seed 1 vs 5):" in capsys.readouterr().err  # not the trace's path
    md = (tmp_path / "r" / "report.md").read_text()
    row = f"`helios:{copy.resolve()}` | {sb['trace_sha256'][:12]} | 3 / 4 | 5 | — (trace file)"
    assert row in md


def test_older_summaries_are_compared_by_their_trace_parameters() -> None:
    old = {"trace": "synthetic", "jobs_in_trace": 10, "seed": 1, "load": 0.8, "gpus": 4}
    assert trace_warning([old, dict(old)]) is None
    assert "jobs 10 vs 20" in trace_warning([old, {**old, "jobs_in_trace": 20}])
    helios = {**old, "trace": "helios:x.csv"}
    assert trace_warning([helios, {**helios, "load": 2.0}]) is None  # a file ignores --load


def test_a_negative_seed_is_one_line_and_leaves_nothing(tmp_path: Path, capsys) -> None:
    assert main([*TINY, "--seed", "-1", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "fabriclab simulate-cluster: error: --seed is -1; it must be 0 or more"]
    assert not (tmp_path / "out").exists()


def _documented(heading: str) -> set[str]:
    """Every `name` in the first cell of the table under ``### heading`` in docs/results.md."""
    text = (Path(__file__).parent.parent / "docs" / "results.md").read_text(encoding="utf-8")
    section = text.split(f"### {heading}\n", 1)[1].split("\n#", 1)[0]
    return {name for line in section.splitlines() if line.startswith("| `")
            for name in re.findall(r"`([a-z0-9_]+)`", line.split("|")[1])}


def test_docs_describe_every_key_and_column(tmp_path: Path) -> None:
    d = _tiny(tmp_path / "d")
    assert _documented("`summary.json` (simulate-cluster)") == set(
        json.loads((d / "summary.json").read_text()))
    columns = set(pd.read_csv(d / "jobs.csv").columns) | set(
        pd.read_csv(d / "utilisation.csv").columns)
    assert _documented("`jobs.csv` and `utilisation.csv` (simulate-cluster)") == columns


def test_docs_describe_a_sweeps_point_json_and_results_columns(tmp_path: Path) -> None:
    from testbed.sim.cluster_run import simulate_run
    from testbed.sim.sweep_run import sweep_results, write_point
    from testbed.sim.sweep_spec import SweepSpec, expand

    point = expand(SweepSpec(base={"leaves": 2, "spines": 2, "hosts_per_leaf": 2, "jobs": 5}))[0]
    files = simulate_run(point.params, point.label)
    write_point(tmp_path, point, files)
    assert _documented("`point.json` (sweep)") == set(
        json.loads((tmp_path / point.key / "point.json").read_text()))
    df = sweep_results(tmp_path, [point], "tiny", [])
    assert df is not None
    head = ["point", *point.params]
    assert list(df.columns[:len(head)]) == head
    assert set(df.columns[len(head):]) == set(files.summary) - set(point.params)
    assert {"wall_s", "rss_start_bytes", "peak_rss_bytes"} <= set(df.columns)


def test_a_sweep_averages_over_the_jobs_every_point_of_a_job_set_completed() -> None:
    from analysis.sweep import with_common_jobs

    df = pd.DataFrame({"point": ["e", "v", "other"], "job_set_sha256": ["s", "s", "t"]})
    jobs = {"e": pd.DataFrame({"job_id": ["j0", "j1", "j2"], "jct_s": [10.0, 20.0, 90.0],
                               "slowdown": [1.0, 2.0, 3.0]}),
            "v": pd.DataFrame({"job_id": ["j0", "j1"], "jct_s": [5.0, 5.0],
                               "slowdown": [1.0, 1.0]}),
            "other": pd.DataFrame({"job_id": ["j0"], "jct_s": [1.0], "slowdown": [1.0]})}
    out = with_common_jobs(df, jobs).set_index("point")
    assert out.loc["e", "jobs_common"] == 2 and out.loc["e", "avg_jct_common_s"] == 15.0
    assert out.loc["v", "avg_slowdown_common"] == 1.0 and out.loc["e", "avg_slowdown_common"] == 1.5
    assert pd.isna(out.loc["other", "jobs_common"])  # alone in its job set: nothing to match


def test_the_collided_flows_are_a_percentage_in_the_terminal_as_in_the_report(
        tmp_path: Path, capsys) -> None:
    d = _tiny(tmp_path / "a", "--leaves", "2")
    printed = capsys.readouterr().out
    share = json.loads((d / "summary.json").read_text())["collided_flow_fraction"]
    assert f"collided flows {share * 100:.0f}% -> " in printed
    write_report([d], tmp_path / "r")
    assert f"| Flows collided | {share * 100:.0f}% |" in (tmp_path / "r" / "report.md").read_text()
