"""The emulated backend behind :class:`testbed.core.backend.Backend`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sdn_app.policies import controller_policy
from testbed.core.errors import FabricLabError
from testbed.core.experiment import Experiment
from testbed.core.jobs import check_against_fabric
from testbed.core.limits import run_buffer_bytes
from testbed.core.topology import build_plan
from testbed.emulator import impairments
from testbed.emulator.preflight import memory_error, netem_available, require_fabric_ready
from testbed.emulator.runner import Runner
from testbed.emulator.workers import check_training


class EmulatedBackend:
    """Mininet fabric, SDN controller and real worker processes (needs root)."""

    name = "emulated"

    def check(self, experiment: Experiment) -> None:
        plan = build_plan(experiment.fabric, experiment.rate_scale)
        check_against_fabric(experiment, plan)
        check_training(experiment, plan)
        controller_policy(plan, experiment.policy)
        require_fabric_ready()
        # what this kernel cannot emulate (delay without netem, ...) is refused before any run
        impaired = any(lk.impaired for lk in plan.links)
        impairments.mechanisms(plan, impaired and netem_available())
        need = run_buffer_bytes(experiment.jobs)
        if problem := memory_error(need, f"experiment {experiment.name}"):
            raise FabricLabError(problem)

    def run(self, experiment: Experiment, out: Path, console: Any = None) -> Path:
        return Runner(experiment, out, console).run()
