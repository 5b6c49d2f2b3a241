"""A training workload replayed on the emulator (root): an ASTRA-sim 1.0 DATA workload file on
a real 4-host multidim fabric, every pass's iteration row written and every collective exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.core.experiment import expand
from testbed.core.traces import read_table
from testbed.emulator import cleanup
from testbed.emulator.runner import Runner

pytestmark = [pytest.mark.root, pytest.mark.slow]

TINY = Path(__file__).parent / "data" / "training-tiny.txt"


@pytest.mark.parametrize("algorithm", ["baseline", "themis"])
def test_training_file_replays_on_a_multidim_fabric(tmp_path, algorithm):
    spec = {
        "name": "training", "policy": "shortest",
        "fabric": {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                                {"size": 2, "mbit_s": 20, "kind": "switch"}]},
        "jobs": [{"name": "t", "hosts_wanted": 4, "algorithm": algorithm, "chunks": 4,
                  "dim_algorithm": "ring",
                  "workload": {"kind": "training", "file": str(TINY), "passes": 3,
                               "warmup": 1, "compute_scale": 10}}],
    }
    (exp,) = expand(spec)
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    job_dir = run_dir / "jobs" / "t"
    it = read_table(job_dir, "iterations").to_pandas()
    assert len(it) == 4 * 3 and set(it["model"]) == {"training-tiny.txt"}
    assert it["correct"].all() and (it["buckets"] == 3).all()
    # compute is the file's 12 ms per pass x 10, the pass at least that and all of it
    assert ((it["compute"] > 0.11) & (it["compute"] < 0.5)).all()
    assert (it["time"] >= it["compute"]).all() and (it["exposed_comm"] > 0).all()
    colls = read_table(job_dir, "collectives").to_pandas()
    assert len(colls) == 4 * 3 * 3 and colls["correct"].all()
    assert sorted(set(colls["size"])) == [65536, 131072, 262144]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["jobs"]["t"]["correct"] and summary["jobs"]["t"]["iterations"] == 2
    assert not cleanup.stale_states()
