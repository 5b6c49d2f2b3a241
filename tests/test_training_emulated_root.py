"""A training workload replayed on the emulator (root): an ASTRA-sim 1.0 DATA workload file on
a real 4-host multidim fabric, every pass's iteration row written and every collective exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.core.experiment import expand
from testbed.core.spec import one_switch_fabric
from testbed.core.traces import read_table
from testbed.emulator import cleanup
from testbed.emulator.runner import Runner

pytestmark = [pytest.mark.root, pytest.mark.slow]

TINY = Path(__file__).parent / "data" / "training-tiny.txt"


def tiny_spec(algorithm: str, chunks: int = 4, passes: int = 3) -> dict:
    """Job ``t`` replaying the tiny workload file (three All-Reduces a pass, the first pass a
    warm-up) on a 2x2 multidim fabric of 40 and 20 Mbit/s."""
    return {
        "name": "training", "policy": "shortest",
        "fabric": {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                                {"size": 2, "mbit_s": 20, "kind": "switch"}]},
        "jobs": [{"name": "t", "hosts_wanted": 4, "algorithm": algorithm, "chunks": chunks,
                  "dim_algorithm": "ring",
                  "workload": {"kind": "training", "file": str(TINY), "passes": passes,
                               "warmup": 1, "compute_scale": 10}}],
    }


@pytest.mark.parametrize("algorithm", ["baseline", "themis"])
def test_training_file_replays_on_a_multidim_fabric(tmp_path, algorithm):
    (exp,) = expand(tiny_spec(algorithm))
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
    # exposed communication split per dimension of the job, as the simulator's rows are
    for dims, exposed in zip(it["exposed_dim"], it["exposed_comm"], strict=True):
        assert len(dims) == 2 and all(0 <= x <= exposed + 1e-9 for x in dims)
    colls = read_table(job_dir, "collectives").to_pandas()
    assert len(colls) == 4 * 3 * 3 and colls["correct"].all()
    assert sorted(set(colls["size"])) == [65536, 131072, 262144]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["jobs"]["t"]["correct"] and summary["jobs"]["t"]["iterations"] == 2
    assert not cleanup.stale_states()


@pytest.mark.parametrize("case", ["all-reduce", "training"])
def test_chakra_trace_replays_on_the_emulator_near_the_simulator(tmp_path, case):
    """``fabriclab run --backend emulated`` on a job replaying a Chakra trace (astra-sim's
    8-NPU 1 MiB All-Reduce microbenchmark, or the multi-layer training trace) on 8 hosts of a
    kernel-bridge switch: every pass a row, every sum right, and the measured pass within
    0.5x-2x of the simulator's (``--backend sim`` of the same spec)."""
    import subprocess
    import sys

    from testbed.sim.backend import SimBackend
    from workloads.training.chakra_examples import all_reduce_trace, training_trace

    path = tmp_path / ("ar.0.et" if case == "all-reduce" else "train.0.et")
    path.write_bytes(all_reduce_trace(8, 1, 0) if case == "all-reduce" else training_trace())
    scale = {} if case == "all-reduce" else {"size_scale": 1 / 32, "compute_scale": 100}
    spec = {
        "name": "chakra", "policy": "shortest",
        "fabric": one_switch_fabric(8, 100, "multidim"),
        "jobs": [{"name": "t", "hosts_wanted": 8, "algorithm": "baseline", "chunks": 4,
                  "dim_algorithm": "ring",
                  "workload": {"kind": "training", "file": str(path), "passes": 2,
                               "warmup": 1, **scale}}],
    }
    spec_file = tmp_path / "chakra.json"
    spec_file.write_text(json.dumps(spec))
    out = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(spec_file),
                           "--backend", "emulated", "--out", str(out), "--no-report"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = out.iterdir()
    it = read_table(run_dir / "jobs" / "t", "iterations").to_pandas()
    assert len(it) == 8 * 2 and it["correct"].all() and set(it["model"]) == {path.name}
    colls = read_table(run_dir / "jobs" / "t", "collectives").to_pandas()
    assert colls["correct"].all() and len(colls) == len(it) * it["buckets"].iloc[0]
    measured = it[~it["warmup"]]["time"].mean()
    (exp,) = expand(spec)
    sim_dir = SimBackend(seed=1).run(exp, tmp_path / "sim")
    (simulated,) = read_table(sim_dir / "jobs" / "t", "iterations").to_pandas()["time"]
    assert 0.5 < measured / simulated < 2.0, (measured, simulated)
    assert not cleanup.stale_states()
