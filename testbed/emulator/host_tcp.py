"""The hosts' TCP congestion control (``tcp_congestion`` on a fabric).

A host namespace starts with the kernel's default congestion control, which is the machine's
setting, not the experiment's: Debian's default is cubic, this development machine's bbr. How
TCP flows share a queue depends on it. Halving-doubling's first step, four flows into one
uplink of twice a host link, ran 1.19-1.35x the simulator under bbr with one drop-tail queue
and 1.51x under bbr with per-flow fair queues, against 1.03x under cubic with fair queues
(BENCHMARKS.md, "Hosts' TCP and fair queues on halving-doubling"). So an experiment names the
algorithm its hosts use, and the run records it.

How: a namespace other than the machine's own may make its default only an algorithm the
machine allows unprivileged sockets (``net.ipv4.tcp_allowed_congestion_control``, the
machine's: "reno bbr" on a kernel whose default is bbr, so cubic is refused there with
"Operation not permitted"). So where the machine allows it, the namespace's default is set;
where it does not, each of the host's routes names the algorithm (``ip route change ...
congctl NAME``: a connection over a route takes its algorithm, whatever the default), which
leaves the machine's own setting as it was and goes with the namespace.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError
from testbed.core.topology import FabricPlan
from testbed.emulator.netns_batch import run_batch

SYSCTL = "net.ipv4.tcp_congestion_control"
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


def _names(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def available() -> list[str]:
    """The congestion controls this kernel has loaded (empty where unreadable)."""
    return _names(AVAILABLE)


def allowed() -> list[str]:
    """The congestion controls a namespace may make its default (empty where unreadable)."""
    return _names(ALLOWED)


# what `ip route change` needs to name a route again, from `ip -j route show`: (JSON key,
# ip's keyword); a route with next hops of its own (multipath) is not one of a host's here
_ROUTE_FIELDS = (("gateway", "via"), ("dev", "dev"), ("protocol", "proto"), ("scope", "scope"),
                 ("prefsrc", "src"), ("metric", "metric"))


def route_changes(routes: list[dict[str, Any]], name: str) -> list[list[str]]:
    """``ip`` argument lists that give each of ``routes`` (``ip -j route show``) the
    congestion control ``name``; FabricLabError for a route they cannot name again."""
    out = []
    for r in routes:
        metrics = {k for m in r.get("metrics", []) for k in m} - {"congestion"}
        if "nexthops" in r or "dst" not in r or metrics:  # change would drop the metrics
            raise FabricLabError(
                f"fabric.tcp_congestion: this machine does not let a host namespace make "
                f"{name} its default, and the route {json.dumps(r)} cannot name it (it has "
                f"metrics or next hops of its own): add {name} to the machine's "
                f"net.ipv4.tcp_allowed_congestion_control")
        args = ["route", "change", r["dst"]]
        for key, word in _ROUTE_FIELDS:
            if key in r:
                args += [word, str(r[key])]
        out.append([*args, "congctl", name])
    return out


def loadable(name: str) -> bool:
    """Whether the kernel has ``name`` loaded, or a module ``tcp_<name>`` it can load when a
    namespace asks for it (``modprobe --dry-run``: nothing is loaded here)."""
    if name in available():
        return True
    if shutil.which("modprobe") is None:
        return False
    out = subprocess.run(["modprobe", "--dry-run", "--quiet", f"tcp_{name}"],
                         capture_output=True, text=True)
    return out.returncode == 0


def check(plan: FabricPlan) -> None:
    """Refuse, in one sentence and before anything is made, a ``tcp_congestion`` this kernel
    cannot give its hosts."""
    name = plan.spec.tcp_congestion
    if name is not None and not loadable(name):
        have = " ".join(available()) or "none readable"
        raise FabricLabError(f"fabric.tcp_congestion: this kernel has no TCP congestion "
                             f"control named {name!r} (it has: {have})")


def apply(plan: FabricPlan, host_pids: dict[str, int]) -> None:
    """Give each host the fabric's congestion control (nothing where it names none), before
    the workers open their sockets, and check that it took: as the namespace's default where
    the machine allows that, else on each of its routes (:func:`route_changes`)."""
    name = plan.spec.tcp_congestion
    if name is None:
        return
    by_default = name in allowed()
    for host, pid in host_pids.items():
        if by_default:
            out = subprocess.run(["nsenter", "-t", str(pid), "-n", "sysctl", "-n", "-w",
                                  f"{SYSCTL}={name}"], capture_output=True, text=True)
            if out.returncode != 0 or out.stdout.strip() != name:
                raise FabricLabError(f"could not set {host}'s TCP congestion control to "
                                     f"{name}: {(out.stderr or out.stdout).strip()}")
            continue
        changes = [" ".join(args) for args in route_changes(_routes(pid), name)]
        if problem := run_batch(pid, ["ip", "-batch", "-"], changes):
            raise FabricLabError(f"could not set {host}'s TCP congestion control to {name} "
                                 f"on its routes: {problem}")
        if missing := [r.get("dst") for r in _routes(pid) if route_congestion(r) != name]:
            raise FabricLabError(f"{host}'s routes {missing} did not take the TCP congestion "
                                 f"control {name}")


def route_congestion(route: dict[str, Any]) -> str | None:
    """The congestion control a route (``ip -j route show``) names, if any."""
    return next((m["congestion"] for m in route.get("metrics", []) if "congestion" in m), None)


def _routes(pid: int) -> list[dict[str, Any]]:
    """The main routing table of the namespace ``pid`` is in, as ``ip -j -d`` gives it."""
    out = subprocess.run(["nsenter", "-t", str(pid), "-n", "ip", "-j", "-d", "route", "show"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise FabricLabError(f"could not read the routes of a host (pid {pid}): "
                             f"{out.stderr.strip()}")
    return json.loads(out.stdout or "[]")
