"""The Docker engine the container hosts need: reached through the Docker SDK, started by the
project where it is not running, and stopped only if the project started it.

There is no systemd on the project's machines, so a missing engine is started here as
``dockerd`` in a session of its own, with no firewall rules, no ``docker0`` bridge and no
TCP listener (its API is the local unix socket only): containers get their network from the
emulated fabric and nothing else. The daemon and the ``containerd`` it spawns are identified
by (PID, start time) (:mod:`testbed.emulator.procs`), so whoever started them can stop exactly
them later, also ``fabriclab clean`` after a crash.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError
from testbed.core.safe_paths import open_append, own_or_new_dir
from testbed.emulator import procs
from testbed.emulator.procs import ProcessId

READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 15.0
DOCKERD_ARGS = ("--iptables=false", "--ip6tables=false", "--bridge=none",
                "--host=unix:///var/run/docker.sock")
INSTALL_HINT = "install it with `apt-get install docker.io` (scripts/install.sh does)"


def client(timeout_s: int = 120) -> Any:
    """A Docker SDK client for the local engine (raises FabricLabError if the SDK is missing)."""
    try:
        import docker
    except ImportError:
        raise FabricLabError("the Docker SDK is not installed: run `bash scripts/install.sh` "
                             "(it installs fabriclab's docker extra)") from None
    return docker.DockerClient(base_url="unix:///var/run/docker.sock", timeout=timeout_s)


def answers() -> bool:
    """The engine answers on its socket."""
    try:
        return bool(client(timeout_s=5).ping())
    except Exception:
        return False


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids = [int(k) for k in task.read_text().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def start(log_path: Path) -> list[ProcessId]:
    """Start ``dockerd`` if the engine does not answer; return the processes this started
    (the daemon first, then the containerd it spawned), or [] if it was running already."""
    if answers():
        return []
    if shutil.which("dockerd") is None:
        raise FabricLabError(f"container hosts need the Docker engine, and dockerd is missing: "
                             f"{INSTALL_HINT}")
    own_or_new_dir(log_path.parent)
    with os.fdopen(open_append(log_path), "ab") as log:  # a planted symlink is refused
        proc = subprocess.Popen(["dockerd", *DOCKERD_ARGS], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
    daemon = procs.identify(proc.pid)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            if daemon is not None:
                procs.terminate([daemon], STOP_GRACE_S)
            raise FabricLabError(f"dockerd did not come up within {READY_TIMEOUT_S:.0f} s; "
                                 f"its log is {log_path}")
        time.sleep(0.2)
    assert daemon is not None
    kids = [k for k in (procs.identify(p) for p in _descendants(proc.pid)) if k is not None]
    return [daemon, *kids]


def stop(started: list[ProcessId]) -> list[ProcessId]:
    """Stop what :func:`start` started (the daemon first, so it stops its containers and
    containerd cleanly); return what is still alive."""
    if not started:
        return []
    left = procs.terminate(started[:1], STOP_GRACE_S)
    return left + procs.terminate(started[1:], STOP_GRACE_S)
