"""The ``milp`` OCS placement on a real fabric (root): a job that crosses leaves through
spines gets block circuits (built only when the controller reads them), and its All-Reduce
runs correctly over them with Mininet, OVS, the controller and real workers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import BlockCircuits
from testbed.core.experiment import expand
from testbed.core.spec import parse_fabric
from testbed.emulator.runner import Runner

pytestmark = [pytest.mark.root, pytest.mark.slow]

FABRIC = {"kind": "ocs_leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 4,
          "host_link_mbit_s": 20, "uplink_mbit_s": 20, "ocs_count": 4, "ocs_rewiring": "milp"}
WIDE = 12  # 3 leaves x 4 hosts: no leaf pair or star holds it, so m x n blocks through spines


def test_an_exact_block_job_runs_over_its_circuits(tmp_path: Path) -> None:
    cluster = Cluster.for_fabric(parse_fabric({"fabric": FABRIC}))
    placed = cluster.allocate("wide", WIDE, "ocs-vclos")
    assert isinstance(placed.circuits, BlockCircuits) and len(placed.spines) == 4
    (exp,) = expand({"name": "exact-blocks", "fabric": FABRIC, "policy": "ocs-vclos",
                     "jobs": [{"name": "wide", "hosts_wanted": WIDE, "workload": {
                         "kind": "allreduce", "sizes": ["256KiB"], "iterations": 2}}]})
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["jobs"]["wide"]["correct"]
    (job,) = json.loads((run_dir / "jobs.json").read_text())
    # The controller placed it as the allocator does: one circuit per host, to 4 spines.
    assert job["spines"] == list(placed.spines) and len(job["circuits"]) == WIDE
