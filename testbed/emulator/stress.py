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
import time
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


def not_realtime(pid: int) -> contextlib.AbstractContextManager[None]:
    """``pid``'s real-time threads (ovs-vswitchd's forwarding thread) on the normal policy
    while the block runs, then as they were: the switch taken off real-time."""
    return _not_realtime(pid)


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


def connected(pid: int) -> bool:
    """Whether a TCP connection is established in ``pid``'s network namespace (a worker has
    started talking to its peers: a fault held from then on misses its start-up)."""
    try:
        with open(f"/proc/{pid}/net/tcp") as f:
            return any(line.split()[3] == "01" for line in list(f)[1:])
    except OSError:
        return False


@contextlib.contextmanager
def host_loss(host_pid: int, probability: float) -> Iterator[dict[str, int]]:
    """Every TCP packet that reaches a host dropped with ``probability`` (iptables
    ``statistic`` match on INPUT in the host's own namespace, entered through ``host_pid``, a
    process the fabric started in it): lost packets no queue of the fabric counts. (On OUTPUT
    the sender's TCP would see the drop and send again at once: no loss on the wire.) Yields
    a dict that holds, once the block ends, the packets the rule ``dropped``; the rule is
    deleted then."""
    rule = ["INPUT", "-p", "tcp", "-m", "statistic", "--mode", "random",
            "--probability", f"{probability:.6f}", "-j", "DROP"]
    ns = ["nsenter", "-t", str(host_pid), "-n", "iptables-legacy", "-w"]
    subprocess.run([*ns, "-A", *rule], check=True, capture_output=True)
    landed = {"dropped": 0}
    try:
        yield landed
    finally:
        out = subprocess.run([*ns, "-L", "INPUT", "-v", "-n", "-x"], capture_output=True,
                             text=True).stdout
        landed["dropped"] = sum(int(ln.split()[0]) for ln in out.splitlines()
                                if "DROP" in ln and "statistic" in ln)
        subprocess.run([*ns, "-D", *rule], capture_output=True)


FLOOD_NAMES = ("fl-flood", "fl-fl0", "fl-fl1", "fl-fl2", "fl-fl3")


@contextlib.contextmanager
def flood(seconds: float = 600.0) -> Iterator[list[int]]:
    """Unshaped TCP between two network namespaces of this function's own, through an Open
    vSwitch bridge of its own (``fl-flood``, on the userspace datapath like the fabric's):
    traffic unrelated to the run that the same ovs-vswitchd forwards. The namespaces are held
    by two child processes (yielded: their PIDs); the bridge, the veths and the children go
    when the block ends."""
    bridge, a_root, a_ns, b_root, b_ns = FLOOD_NAMES
    existing = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    if any(f" {n}:" in existing or f" {n}@" in existing for n in FLOOD_NAMES[1:]):
        raise FabricLabError("interfaces named fl-fl* exist already: not flooding")
    holders = [subprocess.Popen(["unshare", "--net", "sleep", str(seconds + 60)],
                                start_new_session=True) for _ in range(2)]
    children: list[subprocess.Popen] = []
    try:
        for ns_end, root_end, holder, ip in ((a_ns, a_root, holders[0], "198.18.0.1"),
                                             (b_ns, b_root, holders[1], "198.18.0.2")):
            _wait_own_netns(holder.pid)
            subprocess.run(["ip", "link", "add", root_end, "type", "veth", "peer", "name",
                            ns_end], check=True)
            subprocess.run(["ip", "link", "set", ns_end, "netns", str(holder.pid)], check=True)
            subprocess.run(["ip", "link", "set", root_end, "up"], check=True)
            enter = ["nsenter", "-t", str(holder.pid), "-n"]
            subprocess.run([*enter, "ip", "addr", "add", f"{ip}/24", "dev", ns_end], check=True)
            subprocess.run([*enter, "ip", "link", "set", ns_end, "up"], check=True)
            subprocess.run([*enter, "ethtool", "-K", ns_end, "tx", "off"], capture_output=True)
        subprocess.run(["ovs-vsctl", "--timeout=10", "add-br", bridge, "--", "set", "bridge",
                        bridge, "datapath_type=netdev", "--", "add-port", bridge, a_root,
                        "--", "add-port", bridge, b_root], check=True)
        a, b = (["nsenter", "-t", str(h.pid), "-n"] for h in holders)
        children.append(subprocess.Popen([*a, "iperf3", "-s", "-1"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        children.append(subprocess.Popen([*b, "iperf3", "-c", "198.18.0.1", "-t", str(seconds)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield [h.pid for h in holders]
    finally:
        for p in children + holders:
            p.kill()
        for p in children + holders:
            p.wait()
        subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", bridge],
                       capture_output=True)
        for root_end in (a_root, b_root):
            subprocess.run(["ip", "link", "del", root_end], capture_output=True)


def _wait_own_netns(pid: int, timeout_s: float = 10.0) -> None:
    """Until ``pid`` (an ``unshare --net`` child) is in a network namespace of its own."""
    from testbed.emulator import procs
    from testbed.emulator.faults import wait_until

    own = procs.own_netns()
    if not wait_until(lambda: procs.netns_of(pid) not in (None, own), timeout_s, 0.02):
        raise FabricLabError("the flood's namespace holder never entered its namespace")
