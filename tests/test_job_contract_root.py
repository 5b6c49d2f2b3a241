"""The job contract on a real fabric (root): an installed plug-in collective with its own knob
runs through `fabriclab run` on the emulator, its bytes recorded as it sent them, and the run's
report reads the summary the run wrote."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from test_job_contract import PLUGIN, check_plugin_bytes, installed_plugin, plugin_experiment

from analysis.load import load_run

pytestmark = [pytest.mark.root, pytest.mark.slow]
__all__ = ["installed_plugin"]  # the fixture, used by name below


def test_a_plugin_collective_and_its_knob_run_on_the_emulator(tmp_path, installed_plugin):
    spec = tmp_path / "plugin.yaml"
    spec.write_text(yaml.safe_dump(plugin_experiment()))
    proc = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(spec), "--out",
                           str(tmp_path / "results")], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = [d for d in (tmp_path / "results").iterdir() if d.is_dir()]
    (job,) = json.loads((run / "jobs.json").read_text())
    assert job["status"] == "ok" and job["options"] == {PLUGIN: {"whole_buffers": True}}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == json.loads((run / "run.json").read_text())["status"] == "ok"
    assert summary["jobs"]["p"]["correct"] is True  # exact sums with the knob on
    check_plugin_bytes(load_run(run).phases)
