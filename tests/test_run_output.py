"""What `fabriclab run` prints: every number from summary.json, a busbw above the host's
links flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from analysis.limits import above_rate, host_rate_mbit_s
from testbed.cli.run import summary_table

TOPOLOGY = {"links": [{"a": "h0", "b": "s0", "mbit_s": 200, "kind": "host"},
                      {"a": "h1", "b": "s0", "mbit_s": 200, "kind": "host"}]}


def _run_dir(tmp_path: Path, busbw_gbit_s: float) -> Path:
    size = {"iterations": 5, "collective_s": 0.00231, "busbw_gbit_s": busbw_gbit_s,
            "algbw_gbit_s": busbw_gbit_s}
    summary = {"status": "ok", "rate_scale": 1.0, "jobs": {
        "tensors": {"hosts": ["h0", "h1"], "world": 2, "status": "ok", "solo_of": None,
                    "correct": True, "sizes": {"65536": size}},
        "tensors-solo": {"hosts": ["h0", "h1"], "solo_of": "tensors", "sizes": {}}}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "topology.json").write_text(json.dumps(TOPOLOGY))
    return tmp_path


def _text(run_dir: Path) -> str:
    console = Console(record=True, width=200)
    console.print(summary_table(run_dir)[0])
    return console.export_text()


def test_the_terminal_table_shows_summary_json_figures(tmp_path: Path) -> None:
    text = _text(_run_dir(tmp_path, 0.150))
    row = next(line for line in text.splitlines() if "tensors" in line)
    assert "64KiB" in row and "2.31" in row and "150.0" in row and "True" in row
    assert "⚠" not in text and "tensors-solo" not in text


def test_a_busbw_above_the_hosts_links_is_flagged(tmp_path: Path) -> None:
    text = _text(_run_dir(tmp_path, 0.227))
    assert "227.0 ⚠ above the host's 200 Mbit/s" in text


def test_host_rate_is_the_sum_of_a_hosts_links() -> None:
    fc = {"links": [{"a": "h0", "b": f"h{i}", "mbit_s": 33.3} for i in (1, 2, 3)]}
    assert host_rate_mbit_s(fc, ["h0"]) == pytest.approx(99.9)
    assert host_rate_mbit_s(TOPOLOGY, ["h9"]) is None
    assert above_rate(0.230, 200) and not above_rate(0.201, 200)


def test_fidelity_on_no_evidence_is_not_judged() -> None:
    """A faithful verdict over 0 s of loaded links says nothing either way: amber."""
    from types import SimpleNamespace

    from analysis.report import _fidelity

    def run(loaded_s: float) -> SimpleNamespace:
        return SimpleNamespace(rate_scale=1.0, fidelity={
            "verdict": "faithful", "cpu_idle_min": 0.5, "cpu_idle_mean": 0.7,
            "invariants": {"judged": True, "loaded_s": loaded_s}})

    idle, busy = _fidelity(run(0.0)), _fidelity(run(3.2))
    assert (idle["shown"], idle["cls"]) == ("not judged", "amber")
    assert (busy["shown"], busy["cls"]) == ("faithful", "ok")
    assert busy["evidence"] == "3.2 s of loaded links" and busy["cpu"] == "min 50%, mean 70%"
    sim = _fidelity(SimpleNamespace(rate_scale=1.0, fidelity={"verdict": "simulated"}))
    assert (sim["shown"], sim["cpu"], sim["evidence"]) == ("simulated", "—", "—")
