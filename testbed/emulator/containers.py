"""Hosts that are Docker containers, attached to the emulated fabric the way Containernet does.

A container is created with ``--network none`` (Docker gives it a network namespace with only
a loopback), labelled with the run's mark. The host's Mininet shell then runs in that
namespace (``nsenter --net``, from the root filesystem, so ``ip``/``tc`` need not exist in the
image), and Mininet moves the fabric's veths into it exactly as into a namespace host: same
names, addresses, static ARP, routes and shaping.

Processes a job starts in a container host are confined as Docker confines the container
(:mod:`testbed.emulator.confine`): they join its cgroups, so Docker's ``cpus`` and
``mem_limit`` hold for them; enter its cgroup, IPC, UTS, network, PID and mount namespaces and
its root; keep only the capabilities its init has (Docker's default set, without
``CAP_NET_ADMIN`` or ``CAP_SYS_ADMIN``, so nothing in a container can change its own link's
shaping, mount, enter other namespaces or load modules); run with ``no_new_privs`` and the
seccomp filter Docker gave the container. What the run starts and records is the supervisor
of each such process, on the host's PID namespace; the process dies with it.

Ownership: a container carries the label ``fabriclab-run=<run id>`` from its creation, its
namespace is pinned like a namespace host's, and ``fabriclab clean`` removes only containers
with the label of a dead run (:mod:`testbed.emulator.cleanup`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError
from testbed.core.host_runtime import TORCH_IMAGE, HostRuntime
from testbed.emulator.cleanup import MARK, RunState
from testbed.emulator.confine import Confinement, container_confinement
from testbed.emulator.mn_nodes import OwnedHost

log = logging.getLogger(__name__)

CONFINE = Path(__file__).with_name("confine.py")
_said: set[str] = set()  # each confinement problem is said once per process


def container_name(state: RunState, host: str) -> str:
    """The container of ``host`` in this run (run ids and host names are plain tokens)."""
    return f"{state.run_id}-{host}"


def cgroup_procs_files(proc_cgroup: str, mountinfo: str) -> list[str]:
    """The ``cgroup.procs`` files that put a process in the cgroups ``proc_cgroup`` lists (the
    text of ``/proc/PID/cgroup``), found through the cgroup mounts in ``mountinfo`` (the text
    of ``/proc/self/mountinfo``): cgroup v1 hierarchies by their controllers, v2 by its type."""
    v1: list[tuple[set[str], str, str]] = []  # (controllers, mount root, mount point)
    v2: list[tuple[str, str]] = []
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        if not sep:
            continue
        fields, rest = head.split(), tail.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        root, point, fstype = fields[3], fields[4], rest[0]
        if fstype == "cgroup":
            v1.append((set(rest[2].split(",")), root, point))
        elif fstype == "cgroup2":
            v2.append((root, point))
    files = []
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers:
            want = set(controllers.split(","))
            mounts = [(r, p) for c, r, p in v1 if want <= c]
        else:
            mounts = v2
        for root, point in mounts[:1]:
            rel = path[len(root):] if root != "/" and path.startswith(root) else path
            files.append(f"{point.rstrip('/')}/{rel.strip('/')}/cgroup.procs".replace("//", "/"))
    return files


def enter_command(container_pid: int, cgroup_files: list[str], confinement: Confinement,
                  argv: list[str]) -> list[str]:
    """The argument list that runs ``argv`` inside a container, confined like it
    (:mod:`testbed.emulator.confine`, run by this Python with ``-I``). Nothing here goes
    through a shell's parser."""
    cgroups = [a for f in cgroup_files for a in ("--cgroup", f)]
    return [sys.executable, "-I", str(CONFINE), "--target", str(container_pid),
            *confinement.argv(), *cgroups, "--", *argv]


def image_error(client: Any, image: str) -> str | None:
    """None if ``image`` is on this machine, else one sentence saying how to get it."""
    import docker

    try:
        client.images.get(image)
        return None
    except docker.errors.ImageNotFound:
        command = "fabriclab images --torch" if image.startswith(TORCH_IMAGE + ":") \
            else "fabriclab images"
        return (f"the container image {image} is not on this machine: build the project's "
                f"images with `{command}` (no registry is reachable from here)")


class ContainerHost(OwnedHost):
    """A fabric host that is a Docker container (see the module docstring)."""

    def __init__(self, name: str, state: RunState, runtime: HostRuntime, image: str,
                 run_dir: Path, client: Any, **params: Any) -> None:
        self.runtime = runtime
        self.image = image
        mounts = {str(run_dir.resolve()): {"bind": str(run_dir.resolve()), "mode": "rw"}}
        limits: dict[str, Any] = {}
        if runtime.cpus is not None:
            limits["nano_cpus"] = int(runtime.cpus * 1e9)
        if runtime.mem_limit is not None:
            limits["mem_limit"] = runtime.mem_limit
        self.container = client.containers.run(
            image, ["sleep", "infinity"], detach=True, name=container_name(state, name),
            hostname=name, network_mode="none", labels={MARK: state.run_id},
            volumes=mounts, **limits)
        self.container.reload()
        self.container_pid = int(self.container.attrs["State"]["Pid"])
        if self.container_pid <= 0:
            raise FabricLabError(f"container {self.container.name} did not start: "
                                 f"{self.container.attrs['State'].get('Error') or 'no process'}")
        self.container_env = dict(e.split("=", 1) for e in self.container.attrs["Config"]["Env"]
                                  if "=" in e)
        self.cgroup_files = cgroup_procs_files(
            Path(f"/proc/{self.container_pid}/cgroup").read_text(),
            Path("/proc/self/mountinfo").read_text())
        self.confinement = container_confinement(self.container_pid)
        for problem in set(self.confinement.problems) - _said:  # said once, not per host
            _said.add(problem)
            log.warning(problem)
        super().__init__(name, state, **params)

    def _popen(self, cmd: list[str], **params: Any) -> Any:
        # The host's shell (Mininet starts it as `mnexec -cdn env ... bash`) goes into the
        # container's network namespace rather than a new one of its own.
        if getattr(self, "shell", None) is None and cmd[:2] == ["mnexec", "-cdn"]:
            cmd = ["mnexec", "-cd", "nsenter", f"--net=/proc/{self.container_pid}/ns/net",
                   *cmd[2:]]
        return super()._popen(cmd, **params)

    def popen(self, *args: Any, **kwargs: Any) -> Any:
        """A process inside the container (argument list). ``sys.executable`` stands for "the
        Python that has fabriclab", which in the project's images is ``python3`` on PATH.
        The environment is the container's, plus what the caller set beyond its own (what it
        merely inherited, such as this machine's PATH, would not fit the image)."""
        argv = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)
        if argv and argv[0] == sys.executable:
            argv[0] = "python3"
        given = kwargs.get("env") or {}
        kwargs["env"] = self.container_env | {k: v for k, v in given.items()
                                              if os.environ.get(k) != v}
        kwargs["mncmd"] = ["mnexec", "-d", *enter_command(
            self.container_pid, self.cgroup_files, self.confinement, [])]
        return super().popen(argv, **kwargs)

    def terminate(self) -> None:
        super().terminate()
        with contextlib.suppress(Exception):  # cleanup.remove() finds it by label, retries
            self.container.remove(force=True)
