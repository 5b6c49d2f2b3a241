"""Every routing policy the cluster simulator takes, on the vClos paper's preset: no documented
combination of ``simulate-cluster --preset vclos-paper --policy P`` may end in a traceback
(gpu-count once did: its all-pairs flows cross no fabric link)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdn_app.policies import applicable
from testbed.cli import main

POLICIES = sorted({n for kind in ("leaf_spine", "ocs_leaf_spine")
                   for n in applicable(kind, simulator=True)})
CASES = ([(p, None, g) for p in POLICIES for g in (1, 4)]
         + [("ocs-vclos", r, 1) for r in ("any", "conservative", "augment", "exact")])


@pytest.mark.parametrize(("policy", "rewiring", "gpus_per_server"), CASES)
def test_every_policy_runs_the_vclos_preset(tmp_path: Path, policy: str, rewiring: str | None,
                                            gpus_per_server: int) -> None:
    out = tmp_path / "run"
    argv = ["simulate-cluster", "--preset", "vclos-paper", "--seed", "1", "--policy", policy,
            "--jobs", "6", "--gpus-per-server", str(gpus_per_server), "--out", str(out)]
    if rewiring:
        argv += ["--rewiring", rewiring]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == policy
    assert summary["jobs_completed"] == 6, summary
    assert summary["preset"] == "vclos-paper" and summary["avg_jct_s"] > 0
