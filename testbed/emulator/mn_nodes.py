"""Mininet node classes that record themselves in the run's state the moment they exist.

Injected into ``Mininet(host=..., switch=...)`` the way Mininet expects node classes to be:
a host pins its network namespace and records its shell; a switch records its shell and
creates its bridge with the run's mark in the same ``ovs-vsctl`` transaction. So a run killed
at any point of bring-up leaves nothing that ``fabriclab clean`` cannot prove is its own.
"""

from __future__ import annotations

from typing import Any

from mininet.node import Host, OVSSwitch

from testbed.emulator.cleanup import RunState


class _Owned:
    """Mixin: the node belongs to ``state``; its shell is recorded as soon as it starts."""

    def __init__(self, name: str, state: RunState, **params: Any) -> None:
        self.run_state = state
        super().__init__(name, **params)  # type: ignore[call-arg]

    def startShell(self, mnopts: str | None = None) -> None:
        super().startShell(mnopts)  # type: ignore[misc]
        self.run_state.add_process(self.pid)  # type: ignore[attr-defined]
        self.started()

    def started(self) -> None:
        """Hook for what else a node records once its shell exists."""


class OwnedHost(_Owned, Host):
    """A host whose shell and pinned namespace belong to the run from the start."""

    def started(self) -> None:
        self.run_state.pin_netns(self.name, self.pid)


class OwnedSwitch(_Owned, OVSSwitch):
    """An OVS switch whose shell is recorded and whose bridge carries the run's mark."""

    def bridgeOpts(self) -> str:
        # run ids are [a-z0-9-] only (RunState.new): safe inside Mininet's shell command
        return super().bridgeOpts() + f" external_ids:{self.run_state.mark}"
