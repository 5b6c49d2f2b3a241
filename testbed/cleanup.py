"""What a run leaves on the machine, and removing it.

Before a fabric is built, the run writes a state file under ``/run/fabriclab/`` naming every
bridge and root-namespace interface it will create; once up, it adds the PIDs of its host
shells and helper processes. ``fabriclab clean`` removes what state files of dead runs name —
only this project's bridges, interfaces and processes, never anything else on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from testbed.atomic import write_json

STATE_DIR = Path(os.environ.get("FABRICLAB_STATE_DIR", "/run/fabriclab"))


@dataclass
class RunState:
    run_id: str
    owner_pid: int
    bridges: list[str]
    root_intfs: list[str]
    pids: list[int] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return STATE_DIR / f"{self.run_id}.json"

    def save(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        write_json(self.path, asdict(self), indent=None)

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def processes_in_netns(pids: list[int]) -> list[int]:
    """Every process that shares a network namespace with one of ``pids`` (other than the root
    namespace): the host shells and whatever was started inside the hosts."""
    root_ns = _netns(1)
    wanted = {ns for p in pids if (ns := _netns(p)) and ns != root_ns}
    if not wanted:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _netns(int(entry.name)) in wanted:
            found.append(int(entry.name))
    return found


def kill_pids(pids: list[int], grace: float = 2.0) -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL what is left."""
    pids = [p for p in pids if p != os.getpid() and _alive(p)]
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


def existing_bridges() -> set[str]:
    out = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True)
    return set(out.stdout.split()) if out.returncode == 0 else set()


def existing_intfs(names: list[str]) -> list[str]:
    return [n for n in names if Path("/sys/class/net", n).exists()]


def leftovers(state: RunState) -> list[str]:
    """What of a run is still on the machine (empty after a clean teardown)."""
    left = [f"bridge {b}" for b in sorted(existing_bridges() & set(state.bridges))]
    left += [f"interface {i}" for i in existing_intfs(state.root_intfs + state.bridges)]
    left += [f"process {p}" for p in state.pids if _alive(p)]
    return left


def remove(state: RunState) -> None:
    """Remove everything a state file names (processes, bridges, interfaces)."""
    kill_pids(processes_in_netns(state.pids) + state.pids)
    bridges = sorted(existing_bridges() & set(state.bridges))
    if bridges:
        args = ["ovs-vsctl", "--timeout=10"]
        for b in bridges:
            args += ["--", "--if-exists", "del-br", b]
        subprocess.run(args, capture_output=True)
    for name in existing_intfs(state.root_intfs + state.bridges):
        subprocess.run(["ip", "link", "del", name], capture_output=True)


def stale_states() -> list[RunState]:
    """State files whose owning process is gone (crashed or killed runs)."""
    states = []
    for path in sorted(STATE_DIR.glob("*.json")) if STATE_DIR.exists() else []:
        try:
            state = RunState(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if not _alive(state.owner_pid):
            states.append(state)
    return states


def clean_stale() -> list[str]:
    """Remove what crashed runs left; return one line per run cleaned."""
    report = []
    for state in stale_states():
        left = leftovers(state)
        remove(state)
        state.forget()
        report.append(f"run {state.run_id}: removed {len(left)} leftovers")
    return report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("clean", help="remove bridges, interfaces and processes of crashed runs")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from testbed.preflight import require_root

    require_root("clean up after a run")
    report = clean_stale()
    for line in report:
        print(line)
    if not report:
        print("nothing to clean: no crashed fabriclab run left anything behind")
    return 0
