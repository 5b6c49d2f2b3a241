"""Registries (no root): names and errors, and a routing policy from outside the package,
registered through the API and through an entry point of an installed distribution, runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_policies import contract_experiment

from testbed.core.experiment import expand
from testbed.core.registry import (
    COLLECTIVES,
    POLICIES,
    SCHEDULES,
    TRANSPORTS,
    Registry,
    RegistryError,
)
from testbed.sim.backend import SimRunner

PLUGINS = Path(__file__).parent / "plugins"
REPO = Path(__file__).parent.parent


def test_builtins_load_and_names_need_no_import() -> None:
    assert {"ecmp", "ecmp-l3", "vclos", "ocs-vclos", "shortest"} <= set(POLICIES.names())
    assert {"zerocopy", "rpc"} <= set(TRANSPORTS.names())
    assert {"ring", "halving-doubling"} <= set(COLLECTIVES.names())
    assert {"baseline", "themis"} <= set(SCHEDULES.names())
    for name, policy in POLICIES.items():
        assert policy.name == name


def test_mistakes_are_one_sentence() -> None:
    reg: Registry[object] = Registry("fabriclab.test-nothing", "widget", {"a": "json:dumps"})
    with pytest.raises(RegistryError, match=r"'b' is not a widget; choose one of a$"):
        reg.get("b")
    with pytest.raises(RegistryError, match="cannot name a widget"):
        reg.register("Bad Name", "json:dumps")
    with pytest.raises(RegistryError, match="not 'module:attribute'"):
        reg.register("c", "json.dumps")
    with pytest.raises(RegistryError, match="already registered"):
        reg.register("a", "json:loads")
    reg.register("gone", "no_such_module_here:X")
    with pytest.raises(RegistryError, match="widget 'gone' cannot be loaded from"):
        reg.get("gone")


def test_a_policy_registered_through_the_api_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    POLICIES.register("single-spine", "fl_plugin_demo:POLICY")
    try:
        (exp,) = expand(contract_experiment("single-spine", "leaf_spine"))
        runner = SimRunner(exp, tmp_path)
        run_dir = runner.run()
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "ok"
        spines = {link[1:] for paths in runner.routes["together"].values() for p in paths
                  for link in p if link[0] == "ls"}
        assert spines and {s for _leaf, s in spines} == {0}  # every flow through spine 0
    finally:
        POLICIES.unregister("single-spine")


def test_a_policy_from_an_installed_distribution_runs(tmp_path: Path) -> None:
    """A tiny distribution (metadata with an entry point) on the path, as pip would install
    it: `fabriclab run` finds the policy by name, the spec validates, the run completes."""
    dist = tmp_path / "site" / "fl_plugin_demo-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fl-plugin-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[fabriclab.policies]\nsingle-spine = fl_plugin_demo:POLICY\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(contract_experiment("single-spine", "leaf_spine")))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path / "site"), str(PLUGINS), str(REPO)]))
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "testbed.cli", "run", str(spec), "--backend", "sim", "--out",
         str(out), "--no-report"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = [d for d in out.iterdir() if d.is_dir()]
    jobs = json.loads((run_dir / "jobs.json").read_text())
    assert {j["policy"] for j in jobs} == {"single-spine"}
    # Without the distribution the same spec is refused in one sentence naming the field.
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, "-m", "testbed.cli", "run", str(spec), "--backend", "sim", "--out",
         str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "policy: 'single-spine' is not a routing policy; choose one of" in proc.stderr
    assert "Traceback" not in proc.stderr
