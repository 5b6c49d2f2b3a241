"""Start, watch and stop the SDN controller process (os-ken manager running sdn_app.controller);
its loopback HTTP API is :class:`~testbed.emulator.controller_api.ControllerApi`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sdn_app.compat import MANAGER_MODULE
from testbed.core.safe_paths import open_append
from testbed.emulator.controller_api import HOST, ControllerApi, ControllerError

__all__ = ["HOST", "Controller", "ControllerError", "free_port"]


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Controller(ControllerApi):
    """The controller of one run: its process, log and API.

    ``start()`` launches it; ``wait_ready()`` blocks until every switch of the fabric is
    connected and programmed (barrier confirmed); ``stop()`` ends it."""

    def __init__(self, run_dir: Path, policy: str | None = None, ocs_delay: float = 0.0) -> None:
        self.run_dir = Path(run_dir)
        self.policy = policy
        self.ocs_delay = ocs_delay
        self.of_port = free_port()
        super().__init__(free_port())
        self.proc: subprocess.Popen | None = None
        self.log_path = self.run_dir / "controller.log"

    @property
    def address(self) -> tuple[str, int]:
        return HOST, self.of_port

    def start(self) -> int:
        """Launch the controller; return its PID."""
        topo = self.run_dir / "topology.json"
        if not topo.exists():
            raise ControllerError(f"{topo} is missing: bring the fabric plan up first")
        env = dict(os.environ, FABRICLAB_TOPOLOGY=str(topo), FABRICLAB_API_PORT=str(self.api_port),
                   FABRICLAB_OCS_DELAY=str(self.ocs_delay),
                   FABRICLAB_JOBS=str(self.run_dir / "controller-jobs.json"))
        if self.policy:
            env["FABRICLAB_POLICY"] = self.policy
        args = [sys.executable, "-m", MANAGER_MODULE, "--ofp-listen-host", HOST,
                "--ofp-tcp-listen-port", str(self.of_port), "sdn_app.controller"]
        # appended across restarts; a symlink planted in its place is refused, not followed
        with os.fdopen(open_append(self.log_path), "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        return self.proc.pid

    def wait_ready(self, timeout: float = 60.0) -> dict[str, Any]:
        """Block until every switch is programmed; a clear error if it never happens."""
        deadline = time.monotonic() + timeout
        health: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise ControllerError(f"the controller exited (code {self.proc.returncode}): "
                                      f"{self.last_log_line()}")
            try:
                health = self.get("/health")
                if health.get("ok"):
                    return health
            except (OSError, ControllerError):
                pass
            time.sleep(0.2)
        raise ControllerError(
            f"the controller did not program the fabric within {timeout:.0f} s "
            f"({health.get('ready', 0)} of {health.get('switches', '?')} switches ready); "
            f"see {self.log_path}"
        )

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        """End the controller abruptly (tests of controller restarts)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def last_log_line(self) -> str:
        try:
            lines = [ln for ln in self.log_path.read_text().splitlines() if ln.strip()]
        except OSError:
            return "no log"
        return lines[-1] if lines else "empty log"
