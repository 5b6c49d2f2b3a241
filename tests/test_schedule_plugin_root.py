"""A chunk schedule installed from outside the package (``reverse``, tests/plugins/
fl_schedule_demo.py) runs a training job on the emulator (root): real workers on a 2x2
multidim fabric move every chunk through the dimensions in the plug-in's order, and every sum
is exact."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_schedule_plugin import PLUGIN, installed_schedule
from test_training_emulated_root import tiny_spec

from testbed.core.traces import read_table

pytestmark = [pytest.mark.root, pytest.mark.slow]
__all__ = ["installed_schedule"]  # the fixture, used by name below


def test_a_plugin_schedule_orders_a_training_jobs_chunks_on_the_emulator(tmp_path,
                                                                         installed_schedule):
    spec_file = tmp_path / "sched.json"
    spec_file.write_text(json.dumps(tiny_spec(PLUGIN, chunks=2, passes=2)))
    out = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(spec_file),
                           "--backend", "emulated", "--out", str(out), "--no-report"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = [d for d in out.iterdir() if d.is_dir()]
    (job,) = json.loads((run / "jobs.json").read_text())
    assert job["algorithm"] == PLUGIN and job["status"] == "ok"
    phases = read_table(run / "jobs" / "t", "phases").to_pandas()
    # every chunk on every rank: Reduce-Scatter on dimension 1, All-Reduce on 0, All-Gather
    # on 1 (the baseline starts on dimension 0)
    orders = phases.sort_values("phase").groupby(["rank", "coll", "chunk"])["dim"].apply(tuple)
    assert len(orders) == 4 * 2 * 3 * 2  # ranks x passes x collectives x chunks
    assert set(orders) == {(1, 0, 1)}
    colls = read_table(run / "jobs" / "t", "collectives").to_pandas()
    assert len(colls) == 4 * 2 * 3 and colls["correct"].all()
