"""How much load a run offers the emulator at once, and the warning when that is more than a
calibration showed faithful.

The unit is link-Mbit/s, as ``fabriclab calibrate`` plans its rounds: every shaped link a
flow crosses costs the machine (Open vSwitch's one forwarding thread handles the packet at
every switch on the way), so a flow at ``r`` Mbit/s over 4 links offers ``4r``."""

from __future__ import annotations

from testbed.core.experiment import Experiment
from testbed.core.topology import FabricPlan, Host


def _hops(plan: FabricPlan, src: str | None, dst: str | None) -> int:
    """Links a flow crosses: host-leaf-host 2, host-leaf-spine-leaf-host 4 (a leaf-spine
    fabric, or an unknown placement on one with more than one leaf), else 2."""
    if plan.kind not in ("leaf_spine", "ocs_leaf_spine"):
        return 2
    if src is None or dst is None:
        return 4 if plan.spec.leaves > 1 else 2
    a, b = plan.node(src), plan.node(dst)
    assert isinstance(a, Host) and isinstance(b, Host)
    return 2 if a.leaf == b.leaf else 4


def offered_load_link_mbit_s(exp: Experiment, plan: FabricPlan) -> float:
    """The most the run's jobs offer together: every rank sending to the next at its host
    link's rate (a ring; the bound any collective's ranks share), summed over the links each
    flow crosses."""
    rates = [lk.mbit_s for lk in plan.links if lk.kind == "host"] or \
        [lk.mbit_s for lk in plan.links]  # a multidim host's links are its dimensions'
    host_rate = max(rates, default=0.0)
    total = 0.0
    for job in exp.jobs:
        hosts: list[str | None] = list(job.hosts) if job.hosts else \
            [None] * (job.hosts_wanted or 0)
        if len(hosts) < 2:
            continue
        total += sum(host_rate * _hops(plan, h, hosts[(i + 1) % len(hosts)])
                     for i, h in enumerate(hosts))
    return total


def load_warning(name: str, load_link_mbit_s: float,
                 limit_link_mbit_s: float | None) -> str | None:
    """One sentence when ``name`` offers more than ``limit_link_mbit_s`` (None: nothing known
    to be faithful, so nothing to compare)."""
    if limit_link_mbit_s is None or load_link_mbit_s <= limit_link_mbit_s:
        return None
    return (f"{name} offers up to {load_link_mbit_s:g} link-Mbit/s at once, more than the "
            f"{limit_link_mbit_s:g} link-Mbit/s this machine's calibration showed faithful: "
            "expect a not-faithful verdict, or use fewer jobs or lower rates")
