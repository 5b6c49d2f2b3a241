"""Every routing policy the cluster simulator takes, and every rewiring of ocs-vclos, on the vClos
paper's preset with 1- and 4-GPU servers: no documented combination of ``simulate-cluster
--preset vclos-paper --policy P [--rewiring R]`` may end in a traceback (gpu-count once did:
its all-pairs flows cross no fabric link). On the preset's first :data:`JOBS` jobs, so that the
whole grid runs in about 20 s of CPU; tests/test_ocs_preset_results.py pins ocs-vclos's
results where jobs wait."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdn_app.allocation.ocs import REWIRINGS
from sdn_app.policies import applicable
from testbed.cli import main

JOBS = 24
POLICIES = sorted({n for kind in ("leaf_spine", "ocs_leaf_spine")
                   for n in applicable(kind, simulator=True)})
CASES = ([(p, None, g) for p in POLICIES if p != "ocs-vclos" for g in (1, 4)]
         + [("ocs-vclos", r, g) for r in REWIRINGS for g in (1, 4)])


@pytest.mark.parametrize(("policy", "rewiring", "gpus_per_server"), CASES)
def test_every_policy_runs_the_vclos_preset(tmp_path: Path, policy: str, rewiring: str | None,
                                            gpus_per_server: int) -> None:
    out = tmp_path / "run"
    argv = ["simulate-cluster", "--preset", "vclos-paper", "--seed", "1", "--policy", policy,
            "--jobs", str(JOBS), "--gpus-per-server", str(gpus_per_server), "--out", str(out)]
    if rewiring:
        argv += ["--rewiring", rewiring]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == policy
    assert summary["jobs_completed"] == JOBS, summary
    assert summary["preset"] == "vclos-paper" and summary["avg_jct_s"] > 0
