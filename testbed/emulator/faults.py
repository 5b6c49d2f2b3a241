"""The fault-injection harness shared by the root safety tests and the soak
(``benchmarks/soak_faults.py``): runs of the real CLI in a child process, canaries that must
survive every fault, and the check that a run left nothing on the machine.

Faults are real signals, sent only to processes this harness started or that a run recorded
as its own (see :mod:`testbed.emulator.cleanup`), or to the OVS daemons named by their own pidfiles.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from testbed.emulator import cleanup, procs
from testbed.emulator.procs import ProcessId

FABRICLAB = str(Path(sys.executable).parent / "fabriclab")
T = TypeVar("T")
OVS_PIDFILES = ("/run/openvswitch/ovs-vswitchd.pid", "/run/openvswitch/ovsdb-server.pid")


FABRIC = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
          "host_link_mbit_s": 50, "uplink_mbit_s": 50}
BRIDGES = ["leaf0", "leaf1", "spine0", "spine1"]
INTERFACES = [f"{b}-eth{i}" for b in BRIDGES for i in (1, 2, 3, 4)]


def fault_spec(iterations: int = 20, policy: str = "vclos") -> dict:
    """The small experiment faults are injected into: two 2-host jobs across two leaves,
    one placed by name and one by the allocator, ``iterations`` All-Reduces of 1 MiB each."""
    job = {"workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": iterations}}
    return {"name": "fault", "fabric": FABRIC, "policy": policy, "timeout_s": 120,
            "jobs": [{"name": "a", "hosts": ["h0", "h2"], **job},
                     {"name": "b", "hosts_wanted": 2, **job}]}


def fabriclab(*args: str, failpoint: str | None = None) -> subprocess.Popen:
    """``fabriclab ARGS`` in a child process (output captured), optionally with a failpoint."""
    env = {k: v for k, v in os.environ.items() if k != "FABRICLAB_FAILPOINT"}
    if failpoint:
        env["FABRICLAB_FAILPOINT"] = failpoint
    # Ctrl-C must reach the run as Ctrl-C even if this process was started in the background
    # (a non-interactive shell starts background jobs with SIGINT ignored, and that is
    # inherited; Python then never raises KeyboardInterrupt)
    return subprocess.Popen([FABRICLAB, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_until(predicate: Callable[[], T], timeout_s: float, poll_s: float = 0.1) -> T | None:
    """The first truthy value of ``predicate()`` within ``timeout_s`` (None if none came)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(poll_s)
    return None


def run_of(out: Path) -> cleanup.RunState | None:
    """The state file of the run writing under ``out`` (None once it is forgotten)."""
    for state in cleanup.load_states()[0]:
        if state.run_dir.startswith(str(out)):
            return state
    return None


def recorded(state: cleanup.RunState, needle: bytes) -> ProcessId | None:
    """A live process the run recorded whose command line contains ``needle``."""
    for p in state.processes():
        try:
            if p.alive() and needle in Path(f"/proc/{p.pid}/cmdline").read_bytes():
                return p
        except OSError:
            continue
    return None


def ovs_daemons() -> list[ProcessId]:
    """The running OVS daemons, as their own pidfiles name them."""
    found = []
    for path in OVS_PIDFILES:
        try:
            ident = procs.identify(int(Path(path).read_text()))
        except (OSError, ValueError):
            continue
        if ident is not None:
            found.append(ident)
    return found


def residue(bridges: list[str] = BRIDGES, intfs: list[str] = INTERFACES) -> list[str]:
    """What any fabriclab run left: state files, namespace pins, and these bridges and
    interfaces (the fault fabric's names, whoever made them). Empty on a clean machine."""
    left = [f"state file {p.name}" for p in sorted(cleanup.STATE_DIR.glob("*.json"))]
    left += [f"controller sockets {p.name}"
             for p in sorted(cleanup.STATE_DIR.glob(cleanup.CONTROLLER_DIRS))]
    pin_root = cleanup.STATE_DIR / "netns"
    if pin_root.is_dir():
        left += [f"namespace pins of {d.name}" for d in sorted(pin_root.iterdir())]
    try:
        left += [f"bridge {b}" for b in sorted(set(bridges) & cleanup.existing_bridges())]
    except cleanup.OvsUnreachable:
        left.append("bridges unverified (Open vSwitch is not running)")
    left += [f"interface {i}" for i in cleanup.existing_intfs(intfs)]
    return left


class Canaries:
    """A process in the caller's own network namespace and one in an unrelated namespace,
    started by no run: both must outlive every fault and every ``clean``."""

    def __init__(self) -> None:
        self._popens = [subprocess.Popen(["sleep", "86400"], start_new_session=True),
                        subprocess.Popen(["unshare", "--net", "sleep", "86400"],
                                         start_new_session=True)]
        self.ids = [procs.identify(p.pid) for p in self._popens]
        deadline = time.monotonic() + 10
        while procs.netns_of(self._popens[1].pid) == procs.own_netns():
            if time.monotonic() > deadline:
                raise RuntimeError("the canary never entered a namespace of its own")
            time.sleep(0.05)

    def alive(self) -> bool:
        return all(p is not None and p.alive() for p in self.ids)

    def stop(self) -> None:
        for p in self._popens:
            p.kill()
            p.wait()

    def __enter__(self) -> Canaries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
