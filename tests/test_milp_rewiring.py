"""The ``milp`` OCS rewiring by its name and its old one (``exact``, still accepted with one
warning), and the solver's work it records in a run's summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdn_app.allocation import ocs
from sdn_app.allocation.cluster import Cluster
from testbed.cli import main
from testbed.sim.sweep_spec import ClusterParams

SMALL = ["--leaves", "8", "--spines", "4", "--hosts-per-leaf", "8", "--ocs-count", "8",
         "--spine-ports-per-ocs", "2", "--policy", "ocs-vclos", "--jobs", "60"]


def run(tmp_path: Path, rewiring: str) -> dict:
    out = tmp_path / rewiring
    assert main(["simulate-cluster", *SMALL, "--rewiring", rewiring, "--out", str(out)]) == 0
    return json.loads((out / "summary.json").read_text())


def test_a_milp_run_records_the_solvers_work(tmp_path: Path) -> None:
    summary = run(tmp_path, "milp")
    assert summary["rewiring"] == "milp"
    solved, unproven = summary["milp_solved"], summary["milp_unproven"]
    assert solved >= 1  # this run's jobs do reach the MILPs
    assert 0 <= unproven <= solved
    assert 0 <= summary["milp_wire_unproven"] <= summary["milp_wire_milps"] <= solved
    assert 0 <= summary["milp_last_resort_wirings"] <= summary["milp_last_resorts"]
    assert summary["milp_reused"] >= 0 and summary["milp_solver_s"] >= 0


def test_only_a_milp_run_has_solver_fields(tmp_path: Path) -> None:
    assert not [k for k in run(tmp_path, "augment") if k.startswith("milp_")]


def test_exact_is_milp_with_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(ocs, "_warned", set())
    assert run(tmp_path, "exact")["rewiring"] == "milp"
    assert Cluster(4, 2, 4, 4, spine_ports_per_ocs=2, rewiring="exact").rewiring == "milp"
    assert ClusterParams(rewiring="exact").rewiring == "milp"  # a sweep file's
    assert capsys.readouterr().err.count("'exact' is deprecated") == 1
