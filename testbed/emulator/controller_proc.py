"""Start, watch and stop the SDN controller process (os-ken manager running sdn_app.controller);
its HTTP API is :class:`~testbed.emulator.controller_api.ControllerApi`.

Both of its listening sockets are bound here, before it starts, and handed to it as open
descriptors (:mod:`sdn_app.listeners`): the API a Unix socket of mode 0600 in a fresh
directory of mode 0700 under the state directory, OpenFlow a TCP port on the loopback. No
other user can take either in between, and a restarted controller serves the same ones.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sdn_app.compat import MANAGER_MODULE
from sdn_app.listeners import API_FD_ENV, OF_FD_ENV, OF_LAN_PEERS_ENV
from testbed.core.safe_paths import open_append
from testbed.emulator import cleanup
from testbed.emulator.cleanup import API_SOCKET
from testbed.emulator.controller_api import HOST, ControllerApi, ControllerError

__all__ = ["HOST", "Controller", "ControllerError"]

def _api_listener() -> tuple[Path, socket.socket]:
    """A Unix socket only root can connect to, listening, in a new 0700 directory."""
    where = Path(tempfile.mkdtemp(prefix=cleanup.CONTROLLER_DIRS.rstrip("*"),
                                  dir=cleanup.state_dir()))  # mode 0700
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(where / API_SOCKET))
    os.chmod(where / API_SOCKET, 0o600)
    sock.listen(64)
    return where, sock


class Controller(ControllerApi):
    """The controller of one run: its process, log, listening sockets and API.

    ``start()`` launches it; ``wait_ready()`` blocks until every switch of the fabric is
    connected and programmed (barrier confirmed); ``stop()`` ends it and closes the sockets."""

    def __init__(self, run_dir: Path, policy: str | None = None, ocs_delay: float = 0.0,
                 of_listen: tuple[str, str] | None = None,
                 lan_peers: list[str] | None = None) -> None:
        """``of_listen`` (namespace, address): OpenFlow listens there instead of on the
        loopback, for switches on stand-in servers (:mod:`testbed.emulator.netns_socket`)."""
        self.run_dir = Path(run_dir)
        self.policy = policy
        self.ocs_delay = ocs_delay
        self._socket_dir, self._api_sock = _api_listener()
        if of_listen is None:
            self.of_host = HOST
            self._of_sock = socket.create_server((HOST, 0), backlog=128)
        else:
            from testbed.emulator.netns_socket import server_socket_in

            self.of_host = of_listen[1]
            self._of_sock = server_socket_in(*of_listen)
        self.of_port: int = self._of_sock.getsockname()[1]
        self.lan_peers = lan_peers or []  # with of_listen: the servers' LAN addresses
        super().__init__(str(self._socket_dir / API_SOCKET))
        self.proc: subprocess.Popen | None = None
        self.log_path = self.run_dir / "controller.log"

    @property
    def address(self) -> tuple[str, int]:
        return self.of_host, self.of_port

    def start(self) -> int:
        """Launch the controller on the listening sockets; return its PID."""
        topo = self.run_dir / "topology.json"
        if not topo.exists():
            raise ControllerError(f"{topo} is missing: bring the fabric plan up first")
        fds = (self._api_sock.fileno(), self._of_sock.fileno())
        env = dict(os.environ, FABRICLAB_TOPOLOGY=str(topo),
                   FABRICLAB_OCS_DELAY=str(self.ocs_delay),
                   FABRICLAB_JOBS=str(self.run_dir / "controller-jobs.json"),
                   **{API_FD_ENV: str(fds[0]), OF_FD_ENV: str(fds[1])})
        if self.policy:
            env["FABRICLAB_POLICY"] = self.policy
        if self.lan_peers:
            env[OF_LAN_PEERS_ENV] = ",".join(self.lan_peers)
        args = [sys.executable, "-m", MANAGER_MODULE, "--ofp-listen-host", self.of_host,
                "--ofp-tcp-listen-port", str(self.of_port), "sdn_app.controller"]
        # appended across restarts; a symlink planted in its place is refused, not followed
        with os.fdopen(open_append(self.log_path), "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True, pass_fds=fds)
        return self.proc.pid

    def gone(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            return f"the controller exited (code {self.proc.returncode})"
        return None

    def wait_ready(self, timeout: float = 60.0) -> dict[str, Any]:
        """Block until every switch is programmed; a clear error if it never happens."""
        deadline = time.monotonic() + timeout
        health: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if reason := self.gone():
                raise ControllerError(f"{reason}: {self.last_log_line()}")
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
        """End the controller, then close its listening sockets and remove the API's."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for sock in (self._api_sock, self._of_sock):
            sock.close()
        with contextlib.suppress(OSError):
            shutil.rmtree(self._socket_dir)

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
