"""Mininet's CLI over a running :class:`~testbed.emulator.fabric.Fabric` (``fabriclab up``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from mininet.cli import CLI
from mininet.log import setLogLevel

from testbed.core.errors import FabricLabError

if TYPE_CHECKING:
    from testbed.emulator.fabric import Fabric


class FabricCLI(CLI):
    """Mininet's own CLI (``h0 ping -c1 h1``, ``pingall``, ``exit``) on the fabric's network.
    Before each command it checks the fabric as a run does once a second (a controller that
    died is restarted) and says once what is wrong."""

    def __init__(self, fab: Fabric, **kwargs: Any) -> None:
        self.fab = fab
        self._shown: str | None = None
        setLogLevel("output")  # the fabric builds quietly, but the CLI answers at this level
        try:
            super().__init__(fab.net, **kwargs)  # runs the command loop until exit or EOF
        finally:
            setLogLevel("error")  # and the teardown is quiet again

    def precmd(self, line: str) -> str:
        restarts = len(self.fab.restarts)
        try:
            problem = self.fab.health()
        except FabricLabError as exc:  # a restarted controller that never came up
            problem = str(exc)
        if len(self.fab.restarts) > restarts:
            print("fabriclab: the controller had exited; restarted it (running jobs "
                  "reinstalled)", file=sys.stderr)
        if problem and problem != self._shown:
            print(f"fabriclab: warning: {problem}", file=sys.stderr)
        self._shown = problem
        return line
