"""What a run leaves on the machine, and removing it: only what the run can prove it made.

Before a fabric is built the run writes a state file, ``/run/fabriclab/<run_id>.json``, naming
its owner process and the bridges and root-namespace interfaces it is about to create; it adds
every process it starts as (PID, start time) the moment the process exists. Ownership is
proven, never guessed from names or patterns:

- **processes**: a recorded (PID, start time) that still matches (:mod:`testbed.emulator.procs`), or
  any process inside one of the run's own network namespaces;
- **network namespaces**: each host's namespace is pinned by a bind mount under
  ``/run/fabriclab/netns/<run_id>/`` as soon as the host exists; the pin keeps the namespace
  (and its inode) from being freed and reused, so membership proves the process is ours. The
  caller's own namespace is never pinned and never swept;
- **bridges**: created with ``external_ids:fabriclab-run=<run_id>`` in the same ``ovs-vsctl``
  transaction; a bridge without that mark is not ours, whatever its name;
- **interfaces** (root namespace): marked with the alias ``fabriclab-run=<run_id>`` when made;
- **containers** (container hosts): created with the label ``fabriclab-run=<run_id>``; a
  container without it is not ours, whatever its name;
- **the Docker engine**, if the run had to start it: its processes are recorded like any
  other, and stopped once the run's containers are gone.

``fabriclab clean`` removes what the state files of dead runs (owner gone) name, and keeps a
state file until every item in it is verified gone: with Open vSwitch down the bridges cannot
be checked, so it says so and keeps the file for the next ``clean``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import threading
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from testbed.core.atomic import write_json
from testbed.core.safe_paths import own_or_new_dir
from testbed.emulator import procs
from testbed.emulator.preflight import ovs_env
from testbed.emulator.procs import NetnsId, ProcessId

STATE_DIR = Path(os.environ.get("FABRICLAB_STATE_DIR", "/run/fabriclab"))
CONTROLLER_DIRS = "controller-*"  # a controller's API socket dir (controller_proc), 0700
API_SOCKET = "api.sock"
MARK = "fabriclab-run"  # OVS external_ids key and interface alias prefix
RUN_ID = re.compile(r"^fl-[0-9a-f]{12}$")  # reaches shell commands (Mininet's): keep it plain
_save_lock = threading.Lock()  # workers are started (and recorded) from several threads
OVS_DOWN = ("Open vSwitch is not running, so this run's bridges cannot be checked or removed: "
            "start it (`bash scripts/start-ovs.sh` as root) and run `fabriclab clean` again")


DOCKER_DOWN = ("the Docker engine does not answer, so this run's containers cannot be checked "
               "or removed: start it (`dockerd &` as root) and run `fabriclab clean` again")


def state_dir() -> Path:
    """:data:`STATE_DIR` (``FABRICLAB_STATE_DIR`` may move it), made by this user if missing
    and refused in one sentence if another user could change it or a directory above it."""
    return own_or_new_dir(STATE_DIR)


class OvsUnreachable(Exception):
    """The OVS database did not answer: bridges can be neither listed nor removed."""


class DockerUnreachable(Exception):
    """The Docker engine did not answer: containers can be neither listed nor removed."""


@dataclass
class RunState:
    """Everything one run made, recorded before (or the moment) it exists."""

    run_id: str
    owner: list[int]  # [pid, start_ticks] of the process that made the run
    bridges: list[str]
    root_intfs: list[str]
    procs: list[list[int]] = field(default_factory=list)  # [pid, start_ticks] each
    run_dir: str = ""
    containers: bool = False  # the run may have made containers (labelled with its mark)
    engine: list[list[int]] = field(default_factory=list)  # [pid, start_ticks] of a Docker
    # engine the run started (daemon first), to be stopped once its containers are gone
    # stand-in servers the fabric was spread over (issue #43): {name, netns, ovs_rundir} each;
    # their bridges are in their own OVS, their switch ports and tunnels in their namespace
    servers: list[dict[str, str]] = field(default_factory=list)
    server_intfs: dict[str, list[str]] = field(default_factory=dict)  # server -> interfaces
    version: int = 3

    def __post_init__(self) -> None:
        if not RUN_ID.match(self.run_id):
            raise ValueError(f"run id {self.run_id!r} is not of the form fl-<12 hex digits>")

    @classmethod
    def new(cls, run_dir: Path, bridges: list[str], root_intfs: list[str]) -> RunState:
        me = procs.identify(os.getpid())
        assert me is not None
        return cls(f"fl-{uuid.uuid4().hex[:12]}", me.as_list(), bridges, root_intfs,
                   run_dir=str(run_dir))

    @property
    def path(self) -> Path:
        return STATE_DIR / f"{self.run_id}.json"

    @property
    def pin_dir(self) -> Path:
        return STATE_DIR / "netns" / self.run_id

    @property
    def mark(self) -> str:
        return f"{MARK}={self.run_id}"

    def owner_alive(self) -> bool:
        return ProcessId(*self.owner).alive()

    def processes(self) -> list[ProcessId]:
        return [ProcessId(*p) for p in self.procs]

    def save(self) -> None:
        with _save_lock:
            state_dir()
            write_json(self.path, asdict(self), indent=None, mode=0o600)

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)

    # -- recording, as things come into being -------------------------------------------------

    def add_process(self, pid: int) -> ProcessId:
        """Record a process the run just started (call while it is still our unreaped child,
        so its PID cannot have been reused)."""
        ident = procs.identify(pid)
        if ident is None:
            raise ProcessLookupError(pid)
        with _save_lock:
            self.procs.append(ident.as_list())
        self.save()
        return ident

    def pin_netns(self, name: str, pid: int) -> NetnsId:
        """Pin the network namespace of a host shell we just started (``name`` is a validated
        node name). Refuses the caller's own namespace: that one is never the run's."""
        ns = procs.netns_of(pid)
        if ns is None or ns == procs.own_netns():
            raise RuntimeError(f"host {name} (pid {pid}) has no namespace of its own")
        state_dir()
        self.pin_dir.mkdir(parents=True, exist_ok=True)  # inside a directory only root writes
        pin = self.pin_dir / name
        pin.touch()
        out = subprocess.run(["mount", "--bind", f"/proc/{pid}/ns/net", str(pin)],
                             capture_output=True, text=True)
        if out.returncode != 0 or pinned_netns(pin) != ns:
            raise RuntimeError(f"could not pin the namespace of {name}: {out.stderr.strip()}")
        return ns


# -- what exists ------------------------------------------------------------------------------


def pinned_netns(pin: Path) -> NetnsId | None:
    """The namespace a pin file holds, or None if nothing is mounted on it (or it is a
    symlink, which is never followed: a pin is a file this run made)."""
    try:
        st, parent = os.lstat(pin), os.lstat(pin.parent)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(parent.st_mode):
        return None
    return (st.st_dev, st.st_ino) if st.st_dev != parent.st_dev else None


def pins(state: RunState) -> dict[Path, NetnsId | None]:
    if not state.pin_dir.is_dir():
        return {}
    return {p: pinned_netns(p) for p in sorted(state.pin_dir.iterdir())}


def _vsctl(*args: str, timeout_s: int = 10, rundir: str | None = None) -> str:
    out = subprocess.run(["ovs-vsctl", f"--timeout={timeout_s}", *args],
                         capture_output=True, text=True, env=ovs_env(rundir))
    if out.returncode != 0:
        raise OvsUnreachable(out.stderr.strip())
    return out.stdout


def ovs_rundirs(state: RunState) -> list[str | None]:
    """The Open vSwitches the run's bridges are in: this machine's (None), or each stand-in
    server's."""
    return [s["ovs_rundir"] for s in state.servers] if state.servers else [None]


def existing_bridges(rundir: str | None = None) -> set[str]:
    """Every bridge in the OVS database, this machine's or ``rundir``'s (raises
    OvsUnreachable if it does not answer)."""
    return set(_vsctl("list-br", timeout_s=5, rundir=rundir).split())


def marked_bridges(state: RunState, rundir: str | None = None) -> list[str]:
    """The bridges that carry this run's mark, in this machine's OVS or the one of
    ``rundir`` (raises OvsUnreachable)."""
    out = _vsctl("--bare", "--columns=name", "find", "Bridge",
                 f"external_ids:{state.mark}", timeout_s=5, rundir=rundir)
    return sorted(out.split())


def server_intf_alias(netns: str, name: str) -> str | None:
    """The alias of an interface in a stand-in server's namespace (None if it is not there)."""
    out = subprocess.run(["ip", "-n", netns, "-json", "-details", "link", "show", "dev", name],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    try:
        return json.loads(out.stdout)[0].get("ifalias", "")
    except (ValueError, IndexError, AttributeError):
        return None


def marked_server_intfs(state: RunState) -> list[tuple[str, str]]:
    """(namespace, interface) of each stand-in server interface that still carries the mark."""
    netns = {s["name"]: s["netns"] for s in state.servers}
    return [(netns[server], name) for server, names in state.server_intfs.items()
            for name in names if server in netns
            and server_intf_alias(netns[server], name) == state.mark]


def intf_alias(name: str) -> str | None:
    """The alias of a root-namespace interface (None if it does not exist)."""
    path = Path("/sys/class/net", name, "ifalias")
    try:
        return path.read_text().strip()
    except OSError:
        return None


def existing_intfs(names: list[str]) -> list[str]:
    """Those of ``names`` that exist in the caller's namespace, ours or not."""
    return [n for n in names if Path("/sys/class/net", n).exists()]


def marked_intfs(state: RunState) -> list[str]:
    return [n for n in state.root_intfs if intf_alias(n) == state.mark]


def marked_containers(state: RunState) -> list[Any]:
    """The containers (running or not) that carry this run's label (raises
    DockerUnreachable)."""
    from testbed.emulator import docker_engine

    try:
        client = docker_engine.client(timeout_s=30)
        return client.containers.list(all=True, filters={"label": state.mark})
    except Exception as exc:  # the SDK's errors, a missing socket, a timeout
        raise DockerUnreachable(str(exc)) from None


def engine_processes(state: RunState) -> list[ProcessId]:
    """The processes of a Docker engine the run started that are still alive."""
    return [p for p in (ProcessId(*e) for e in state.engine) if p.alive()]


def run_processes(state: RunState) -> list[ProcessId]:
    """The run's processes still alive: recorded ones and all inside its pinned namespaces."""
    recorded = [p for p in state.processes() if p.alive()]
    netns = [ns for ns in pins(state).values() if ns is not None]
    return sorted(set(recorded) | set(procs.in_netns(netns)))


def leftovers(state: RunState) -> list[str]:
    """What of a run is still on the machine, verified (empty after a complete teardown).
    If OVS does not answer, the bridges are unverified and that is a leftover too."""
    left = [f"process {p.pid}" for p in run_processes(state)]
    left += [f"namespace pin {p.name}" for p in pins(state)]
    for rundir in ovs_rundirs(state):
        where = "" if rundir is None else f" (Open vSwitch of {rundir})"
        try:
            left += [f"bridge {b}{where}" for b in marked_bridges(state, rundir)]
        except OvsUnreachable:
            left.append(f"bridges unverified (Open vSwitch{where} is not running)")
    left += [f"interface {i}" for i in marked_intfs(state)]
    left += [f"interface {i} in {ns}" for ns, i in marked_server_intfs(state)]
    if state.containers:
        try:
            left += [f"container {c.name}" for c in marked_containers(state)]
        except DockerUnreachable:
            left.append("containers unverified (the Docker engine does not answer)")
    left += [f"docker engine process {p.pid}" for p in engine_processes(state)]
    return left


# -- removing it ------------------------------------------------------------------------------


def remove(state: RunState, grace_s: float = 2.0) -> list[str]:
    """Remove everything the run provably made; return what is left (see ``leftovers``)."""
    containers_gone = _remove_containers(state)
    procs.terminate(run_processes(state), grace_s)
    pinned = pins(state)
    occupied = {procs.netns_of(p.pid) for p in
                procs.in_netns(ns for ns in pinned.values() if ns is not None)}
    for pin, ns in pinned.items():
        if ns is not None and ns in occupied:
            continue  # a process survived SIGKILL (uninterruptible): keep the pin, retry later
        if ns is not None:
            subprocess.run(["umount", str(pin)], capture_output=True)
        if pinned_netns(pin) is None:
            pin.unlink(missing_ok=True)
    if state.pin_dir.is_dir() and not any(state.pin_dir.iterdir()):
        state.pin_dir.rmdir()
    for rundir in ovs_rundirs(state):
        try:
            bridges = marked_bridges(state, rundir)
            if bridges:
                args: list[str] = ["--no-wait"]
                for b in bridges:
                    args += ["--", "--if-exists", "del-br", b]
                _vsctl(*args, rundir=rundir)
        except OvsUnreachable:
            pass  # reported by leftovers(); the state file stays for the next clean
    for name in marked_intfs(state):
        subprocess.run(["ip", "link", "del", "dev", name], capture_output=True)
    for netns, name in marked_server_intfs(state):
        subprocess.run(["ip", "-n", netns, "link", "del", "dev", name], capture_output=True)
    if state.containers and containers_gone:
        state.containers = False  # verified gone: nothing left to ask the engine about
        state.save()
    if state.engine and containers_gone:
        from testbed.emulator import docker_engine

        docker_engine.stop(engine_processes(state))
    return leftovers(state)


def _remove_containers(state: RunState) -> bool:
    """Remove the run's containers (with their processes); True once none is left."""
    if not state.containers:
        return True
    try:
        for container in marked_containers(state):
            with contextlib.suppress(Exception):  # going already, or busy: leftovers() says
                container.remove(force=True)
        return not marked_containers(state)
    except DockerUnreachable:
        return False  # reported by leftovers(); the state file stays for the next clean


def load_states() -> tuple[list[RunState], list[Path]]:
    """Every state file: those this version reads, and the paths of those it cannot."""
    states, unreadable = [], []
    for path in sorted(STATE_DIR.glob("*.json")) if STATE_DIR.is_dir() else []:
        try:
            states.append(RunState(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            unreadable.append(path)
    return states, unreadable


def stale_states() -> list[RunState]:
    """State files whose owner process is gone (crashed or killed runs)."""
    return [s for s in load_states()[0] if not s.owner_alive()]


def clean_stale() -> list[str]:
    """Remove what dead runs left; one line per run. A run's state file is removed only when
    nothing it names is left."""
    report = []
    for state in stale_states():
        before = leftovers(state)
        left = remove(state)
        if not left:
            state.forget()
            report.append(f"run {state.run_id}: removed {len(before)} leftovers")
        elif any(item.startswith("bridges unverified") for item in left):
            report.append(f"run {state.run_id}: {OVS_DOWN}")
        elif any(item.startswith("containers unverified") for item in left):
            report.append(f"run {state.run_id}: {DOCKER_DOWN}")
        else:
            report.append(f"run {state.run_id}: could not remove {', '.join(left)}; "
                          "state kept, run `fabriclab clean` again")
    if gone := remove_dead_sockets():
        report.append(f"removed the API sockets of {gone} controllers no run holds any more")
    for path in load_states()[1]:
        report.append(f"{path} is not a state file this version can read: left untouched")
    return report


def remove_dead_sockets() -> int:
    """Remove the controller socket directories whose socket nobody listens on (their run
    died: the run, not its controller, holds the listening socket); return how many."""
    gone = 0
    for d in STATE_DIR.glob(CONTROLLER_DIRS):
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(str(d / API_SOCKET))
                continue  # a live run's
            except (ConnectionRefusedError, FileNotFoundError):
                pass
            except OSError:
                continue  # not provably dead: leave it
        shutil.rmtree(d, ignore_errors=True)
        gone += 1
    return gone
