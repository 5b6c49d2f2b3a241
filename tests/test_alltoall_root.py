"""All-to-all workers on a real leaf-spine fabric (root): Mininet, OVS, the controller under
ECMP and real worker processes run every registered all-to-all algorithm across two leaves;
every block arrives where it belongs, and the link counters show every rank's blocks leaving
its host and the cross-leaf ones crossing the spines."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from testbed.core.experiment import expand
from testbed.core.registry import ALLTOALLS
from testbed.core.topology import build_plan
from testbed.core.traces import read_table
from testbed.emulator.runner import Runner

pytestmark = [pytest.mark.root, pytest.mark.slow]

HOSTS = ["h0", "h1", "h2", "h3"]  # h0, h1 on leaf0; h2, h3 on leaf1
SIZES = [16 * 1001, 256 * 1024]  # bytes per rank: 4 blocks of 1001 floats, and 256 KiB
ITERATIONS, WARMUP = 2, 1


def experiment(algorithm: str) -> dict:
    return {
        "name": "a2a-root", "policy": "ecmp",
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "host_link_mbit_s": 50, "uplink_mbit_s": 50},
        "jobs": [{"name": "j", "hosts": HOSTS, "algorithm": algorithm,
                  "workload": {"kind": "alltoall", "sizes": SIZES, "iterations": ITERATIONS,
                               "warmup": WARMUP}}],
    }


def carried_bytes(run_dir: Path) -> dict[tuple[str, str], int]:
    """Bytes each link direction carried over the run (counter growth)."""
    df = pd.read_parquet(run_dir / "link_samples.parquet")
    g = df.groupby(["src", "dst"])["bytes"]
    return {k: int(v) for k, v in (g.max() - g.min()).items()}


@pytest.mark.parametrize("algorithm", ALLTOALLS.names())
def test_alltoall_across_two_leaves_under_ecmp(tmp_path: Path, algorithm: str) -> None:
    (exp,) = expand(experiment(algorithm))
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error

    summary = json.loads((run_dir / "summary.json").read_text())
    job = summary["jobs"]["j"]
    assert job["correct"] is True, "a rank received a block that is not what its sender sent"
    assert (job["workload"], job["algorithm"], job["world"]) == ("alltoall", algorithm, 4)
    colls = read_table(run_dir / "jobs" / "j", "collectives").to_pandas()
    measured = colls[~colls["warmup"]]
    assert set(measured["collective"]) == {"alltoall"} and measured["correct"].all()
    assert sorted(measured.groupby("rank").size().to_dict().items()) == [
        (r, ITERATIONS * len(SIZES)) for r in range(4)]

    # Every rank sends 3 of its 4 blocks per all-to-all (warm-up included) through its host
    # link; rank r's blocks for the other leaf (2 of them) cross the spines.
    per_rank_bytes = (ITERATIONS + WARMUP) * sum(SIZES) * 3 / 4
    cross_leaf_bytes = (ITERATIONS + WARMUP) * sum(SIZES) * 2 / 4
    carried = carried_bytes(run_dir)
    plan = build_plan(exp.fabric)
    leaf_of = {h: f"leaf{plan.node(h).leaf}" for h in HOSTS}
    assert sorted(set(leaf_of.values())) == ["leaf0", "leaf1"]
    for host, leaf in leaf_of.items():
        up = carried.get((host, leaf), 0)
        assert up >= 0.95 * per_rank_bytes, (host, up, per_rank_bytes)
    for leaf in ("leaf0", "leaf1"):
        to_spines = sum(b for (src, dst), b in carried.items()
                        if src == leaf and dst.startswith("spine"))
        # both hosts of the leaf send their cross-leaf blocks up to the spines
        assert to_spines >= 0.95 * 2 * cross_leaf_bytes, (leaf, to_spines)
