"""Every registered collective, flat and under every registered schedule, on a real fabric
(root): the contract experiment of test_collectives_contract.py through Mininet, the
controller and real workers, exact on every rank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_collectives_contract import contract_experiment, ids, modes

from testbed.core.experiment import expand
from testbed.emulator.runner import Runner

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.mark.parametrize("mode", modes(), ids=ids)
def test_runs_on_a_real_fabric(tmp_path: Path, mode: tuple[str, str]) -> None:
    (exp,) = expand(contract_experiment(*mode))
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["jobs"]["j"]["correct"]
    (job,) = json.loads((run_dir / "jobs.json").read_text())
    assert (job["algorithm"], job["dim_algorithm"], job["status"]) == (*mode, "ok")
