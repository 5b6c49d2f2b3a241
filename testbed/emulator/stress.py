"""Load the machine on purpose, for the tests and benchmarks of the verdict: busy loops beside a
run, and a CPU quota on ovs-vswitchd. Each is undone when its ``with`` block ends, also on an
error or Ctrl-C.

Busy loops are this process's own children, ended through their Popen objects. The quota moves
only ovs-vswitchd's PID into a cgroup made here (cgroup v2: a child of this process's own
cgroup; v1: a child of the ``cpu`` hierarchy's root), and moves it back to the cgroup it came
from before removing the one made here; ovs-vswitchd itself is never signalled. A real-time
thread of it (its forwarding thread, scripts/start-ovs.sh) runs under the normal policy while
the quota holds, as a quota binds only those, and gets its own policy back after.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from testbed.core.errors import FabricLabError
from testbed.emulator.schedstat import REALTIME, policy_of

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


@contextlib.contextmanager
def busy_loops(count: int, cpus: list[int] | None = None, nice: int = 0
               ) -> Iterator[list[int]]:
    """``count`` processes spinning in Python (pinned to ``cpus`` if given, at ``nice``: below
    0, which needs root, they outweigh the run's processes, which run at 0); their PIDs."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(count):
            p = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            procs.append(p)
            if cpus:
                os.sched_setaffinity(p.pid, cpus)
            if nice:
                os.setpriority(os.PRIO_PROCESS, p.pid, nice)
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def _cgroup_of(pid: int) -> tuple[Path, Path]:
    """(the hierarchy's mount, the cgroup ``pid`` is in) for the CPU controller."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    v1 = CGROUP_ROOT / "cpu"
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") and (v1 / "cpu.cfs_quota_us").exists():
            return v1, Path(path.lstrip("/"))
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        path = next(p for _, c, p in (ln.split(":", 2) for ln in lines) if c == "")
        return CGROUP_ROOT, Path(path.lstrip("/"))
    raise FabricLabError("no cgroup CPU controller found under /sys/fs/cgroup")


@contextlib.contextmanager
def cpu_quota(pid: int, cores: float, period_us: int = PERIOD_US) -> Iterator[Path]:
    """``pid`` (a whole process, all its threads) held to ``cores`` of CPU in every period of
    ``period_us`` (a longer period holds it back for longer at a time); the cgroup."""
    mount, home = _cgroup_of(pid)
    v2 = mount == CGROUP_ROOT
    parent = mount / (_cgroup_of(os.getpid())[1] if v2 else Path())
    group = parent / f"fabriclab-quota-{os.getpid()}"
    group.mkdir()
    try:
        quota = str(round(cores * period_us))
        if v2:
            (group / "cpu.max").write_text(f"{quota} {period_us}\n")
        else:
            (group / "cpu.cfs_period_us").write_text(f"{period_us}\n")
            (group / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        with _not_realtime(pid):
            (group / "cgroup.procs").write_text(f"{pid}\n")
            try:
                yield group
            finally:
                with contextlib.suppress(ProcessLookupError):  # it may have ended meanwhile
                    (mount / home / "cgroup.procs").write_text(f"{pid}\n")
    finally:
        group.rmdir()


@contextlib.contextmanager
def _not_realtime(pid: int) -> Iterator[None]:
    """``pid``'s real-time threads (ovs-vswitchd's forwarding thread, as scripts/start-ovs.sh
    sets it) under the normal policy while the block runs, then as they were: a CPU quota holds
    back only normal threads."""
    held: dict[int, tuple[int, int]] = {}
    try:
        for tid in map(int, os.listdir(f"/proc/{pid}/task")):
            with contextlib.suppress(ProcessLookupError):
                policy = os.sched_getscheduler(tid)  # with its reset-on-fork flag, if set
                if policy_of(tid) in REALTIME:
                    held[tid] = (policy, os.sched_getparam(tid).sched_priority)
                    os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        yield
    finally:
        for tid, (policy, priority) in held.items():
            with contextlib.suppress(ProcessLookupError):
                os.sched_setscheduler(tid, policy, os.sched_param(priority))
