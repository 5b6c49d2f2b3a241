"""The hosts' TCP congestion control (``tcp_congestion`` on a fabric).

A host namespace starts with the kernel's default congestion control, which is the machine's
setting, not the experiment's: Debian's default is cubic, this development machine's bbr. How
TCP flows share a queue depends on it. Halving-doubling's first step, four flows into one
uplink of twice a host link, ran 1.19-1.35x the simulator under bbr with one drop-tail queue
and 1.51x under bbr with per-flow fair queues, against 1.03x under cubic with fair queues
(BENCHMARKS.md, "Hosts' TCP and fair queues on halving-doubling"). So an experiment names the
algorithm its hosts use, and the run records it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from testbed.core.errors import FabricLabError
from testbed.core.topology import FabricPlan

SYSCTL = "net.ipv4.tcp_congestion_control"
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


def available() -> list[str]:
    """The congestion controls this kernel has loaded (empty where unreadable)."""
    try:
        return AVAILABLE.read_text().split()
    except OSError:
        return []


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
    """Set each host namespace's default congestion control to the fabric's (nothing where it
    names none), before the workers open their sockets, and check that it took."""
    name = plan.spec.tcp_congestion
    if name is None:
        return
    for host, pid in host_pids.items():
        out = subprocess.run(["nsenter", "-t", str(pid), "-n", "sysctl", "-n", "-w",
                              f"{SYSCTL}={name}"], capture_output=True, text=True)
        if out.returncode != 0 or out.stdout.strip() != name:
            raise FabricLabError(f"could not set {host}'s TCP congestion control to {name}: "
                                 f"{(out.stderr or out.stdout).strip()}")
