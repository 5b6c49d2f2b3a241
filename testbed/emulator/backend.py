"""The emulated backend behind :class:`testbed.core.backend.Backend`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sdn_app.policies import controller_policy
from testbed.core.errors import FabricLabError
from testbed.core.experiment import Experiment
from testbed.core.jobs import check_against_fabric
from testbed.core.limits import run_buffer_bytes
from testbed.core.placement import place
from testbed.core.servers import ServersSpec, server_rundirs
from testbed.core.topology import build_plan
from testbed.emulator import impairments
from testbed.emulator.preflight import memory_error, require_fabric_ready
from testbed.emulator.runner import Runner
from testbed.emulator.workers import check_training


class EmulatedBackend:
    """Mininet fabric, SDN controller and real worker processes (needs root)."""

    name = "emulated"

    def __init__(self, servers: ServersSpec | None = None) -> None:
        self.servers = servers  # stand-in servers to spread the fabric over (issue #43)

    def check(self, experiment: Experiment) -> None:
        plan = build_plan(experiment.fabric, experiment.rate_scale)
        if self.servers is not None:
            place(plan, self.servers)  # refused here, before any run, if it cannot be placed
        check_against_fabric(experiment, plan)
        check_training(experiment, plan)
        controller_policy(plan, experiment.policy)
        require_fabric_ready(None if self.servers is None else server_rundirs(self.servers))
        # what this kernel cannot emulate (delay without netem, ...) is refused before any run
        impairments.on_this_kernel(plan)
        need = run_buffer_bytes(experiment.jobs)
        if problem := memory_error(need, f"experiment {experiment.name}"):
            raise FabricLabError(problem)

    def run(self, experiment: Experiment, out: Path, console: Any = None) -> Path:
        return Runner(experiment, out, console, servers=self.servers).run()
