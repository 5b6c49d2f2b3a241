"""Small things the command line prints: what a user reads before any report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from testbed.cli import main, version
from testbed.core.errors import SpecError
from testbed.core.experiment import expand
from testbed.core.spec import one_switch_fabric

FAST = {"name": "fast", "policy": "ecmp",
        "fabric": one_switch_fabric(2, 5000),
        "jobs": [{"name": "t", "hosts": ["h0", "h1"],
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 1}}]}


def test_version_names_the_checkout_it_runs_from() -> None:
    text = version()
    checkout = Path(__file__).resolve().parents[1]
    assert f"checkout {checkout}" in text or f"from {checkout}" in text


def test_topo_prints_hosts_switches_and_links(capsys) -> None:
    assert main(["topo", "experiments/fabrics/leaf-spine-4x4.yaml"]) == 0
    out = capsys.readouterr().out
    assert "hosts:    h0, h1," in out and "spine:    spine0, spine1, spine2, spine3" in out
    assert re.search(r"16 uplink links at [\d.]+ Mbit/s: leaf0–spine0, ", out)


def test_plan_gives_every_size_in_one_unit_style(capsys) -> None:
    assert main(["plan", "--dims", "4x4", "--bw", "100,50", "--size", "1000MB",
                 "--chunks", "3"]) == 0
    chunks = capsys.readouterr().out.split("per-dimension load")[0]
    sizes = re.findall(r"│\s+\d+ │\s+(\S+) │", chunks)
    assert sizes and all(s.endswith("MiB") for s in sizes), sizes


def test_a_fast_link_is_refused_for_the_emulator_only() -> None:
    with pytest.raises(SpecError, match="more than this machine shapes faithfully"):
        expand(FAST)
    (exp,) = expand(FAST, shaped=False)  # the sim backend's links are not shaped
    assert exp.fabric.host_link_mbit_s == 5000


def test_the_sim_backend_runs_a_5000_mbit_s_link(tmp_path, capsys) -> None:
    spec = tmp_path / "fast.yaml"
    spec.write_text(json.dumps(FAST))
    assert main(["run", str(spec), "--backend", "sim", "--out", str(tmp_path / "r"),
                 "--no-report"]) == 0
    (run_dir,) = (tmp_path / "r").iterdir()
    busbw = json.loads((run_dir / "summary.json").read_text())["jobs"]["t"]["busbw_gbit_s"]
    assert 4 < busbw <= 5


def test_simulate_cluster_help_shows_what_a_preset_sets(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["simulate-cluster", "--preset", "vclos-paper", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "vclos-paper: --trace vclos-paper, --jobs 5000" in help_text
    assert "with ocs-vclos: --leaves 256" in help_text


def test_model_takes_a_scaled_down_preset_shape(capsys) -> None:
    assert main(["model", "--preset", "3d-fc-ring-switch", "--dims", "4x2x2", "--size", "4MiB",
                 "--chunks", "16", "--order", "scf", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dims"] == [4, 2, 2] and doc["speedup"] == pytest.approx(1.387, abs=0.001)


def test_model_and_plan_take_a_size_no_rank_could_hold(capsys) -> None:
    # they allocate nothing: a rank's buffer limit (4GiB) is not theirs
    for command in ("model", "plan"):
        assert main([command, "--preset", "3d-switch-homo", "--size", "8GiB", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["total_bytes"] == 8 * 1024**3
    assert main(["model", "--preset", "3d-switch-homo", "--size", "2048TiB"]) == 2


def test_report_skips_report_directories_a_glob_matches(tmp_path, capsys) -> None:
    spec = tmp_path / "fast.yaml"
    spec.write_text(json.dumps(FAST))
    assert main(["run", str(spec), "--backend", "sim", "--out", str(tmp_path / "r"),
                 "--no-report"]) == 0
    (run_dir,) = (tmp_path / "r").iterdir()
    old = tmp_path / "r" / "20261126-000000-fast-report"  # an earlier run's report
    old.mkdir()
    (old / "report.html").write_text("<html></html>")
    capsys.readouterr()
    assert main(["report", str(run_dir), str(old), "--out", str(tmp_path / "rep")]) == 0
    assert capsys.readouterr().err.startswith("skipping 1 report directory: ")
    assert (tmp_path / "rep" / "report.html").is_file()


def test_headlines_over_runs_not_faithful_say_so_first(tmp_path, capsys, monkeypatch) -> None:
    from analysis import report
    from analysis.compare import Headline

    def fake_report(run_dirs, out, name):
        caveat = "run “vclos” failed its fidelity check: do not trust this comparison"
        return out / "report.html", [
            Headline("Routing", "slowdown ratio 0.92×", "ecmp", "vclos", 0.92, [], [caveat]),
            Headline("Schedule", "themis is 1.70× as fast as baseline", "b", "t", 1.7, [], [])]

    monkeypatch.setattr(report, "build_report", fake_report)
    spec = tmp_path / "fast.yaml"
    spec.write_text(json.dumps(FAST))
    assert main(["run", str(spec), "--backend", "sim", "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    tail = " ".join(out[out.index("report: "):].split())  # rich wraps at the terminal width
    first = tail.index("not faithful: 1 of 2 headlines compare runs that failed")
    routing = tail.index("Routing — not a finding, run “vclos” failed its fidelity check")
    assert first < routing < tail.index("(measured: slowdown ratio 0.92×)")
    assert tail.endswith("Schedule — themis is 1.70× as fast as baseline")


def test_long_commands_log_progress_when_stderr_is_not_a_terminal(tmp_path, capsys,
                                                                   monkeypatch) -> None:
    from testbed.cli import progress

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)  # a line at every update
    assert main(["simulate-cluster", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2",
                 "--jobs", "20", "--out", str(tmp_path / "sc")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^simulating ecmp: 20/20 jobs, [\d.]+ h simulated, \d+ s elapsed$", err,
                     re.M), err
    # before the end, every line estimates the time left
    assert re.search(r"^simulating ecmp: 1/20 jobs, [\d.]+ h simulated, \d+ s elapsed, about "
                     r"\d+ s left$", err, re.M), err
    assert main(["model", "--dims", "2x2", "--bw", "100,50", "--size", "1MiB", "--chunks", "4",
                 "--sim"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^model --sim: 1/2 policies simulated, now themis, \d+ s elapsed, "
                     r"about \d+ s left$", err,
                     re.M), err
    from workloads import launcher

    real = launcher.run_local

    def run_local(**kwargs):  # a real run, told of progress first (its own lines need > 2 s)
        kwargs["on_progress"](3, 4096)
        return real(**kwargs)

    monkeypatch.setattr(launcher, "run_local", run_local)
    monkeypatch.chdir(tmp_path)  # a relative --out: the workers, run from the checkout, find it
    assert main(["allreduce", "--ranks", "2", "--size", "4KiB", "--out", "ar"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^allreduce: 3/12 collectives, at 4KiB, \d+ s elapsed, about \d+ s left$",
                     err, re.M), err
    assert (tmp_path / "ar" / "collectives-rank0.parquet").is_file()


def test_the_launcher_reports_what_rank_0_has_done(tmp_path) -> None:
    from workloads.launcher import _report
    from workloads.traces import TraceWriter

    seen: list[tuple[int, int]] = []
    _report(tmp_path, lambda *a: seen.append(a))  # no trace yet: nothing said
    trace = TraceWriter(tmp_path, rank=0)
    row = {name: None for name in trace_fields()}
    trace.collectives += [{**row, "size": 1024}, {**row, "size": 2048}]
    trace.flush_partial()
    _report(tmp_path, lambda *a: seen.append(a))
    assert seen == [(2, 2048)]


def trace_fields() -> list[str]:
    from testbed.core.traces import SCHEMAS

    return SCHEMAS["collectives"].names


def test_piped_output_keeps_every_column_and_line_whole(capsys, monkeypatch) -> None:
    from rich.table import Table

    from testbed.cli.terminal import out_console

    monkeypatch.delenv("COLUMNS", raising=False)  # stdout is captured: not a terminal
    table = Table()
    headers = [f"a long column header {i}" for i in range(8)]  # ~200 columns
    for h in headers:
        table.add_column(h)
    table.add_row(*(f"value {i}" for i in range(8)))
    out_console().print(table)
    lines = capsys.readouterr().out.splitlines()
    assert all(h in lines[1] for h in headers) and "…" not in "".join(lines), lines
    assert main(["model", "--preset", "4d-ring-fc-ring-switch", "--size", "1GiB"]) == 0
    # ASTRA-sim's GB/s are 2**30 bytes/s (testbed.core.astra_units): 375 GB/s is 3221.23 Gbit/s
    assert ("All-Reduce 1GiB in 64 chunks, 4x8x4x8 at 3221.23,1503.24,1288.49,858.993 Gbit/s "
            "per host, fifo order, astra-sim-1.0 semantics\n") in capsys.readouterr().out
