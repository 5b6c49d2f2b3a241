"""How large the packets are that hosts hand their interfaces: 64 KiB TSO/GSO segments (the
kernel's default), segments capped to a time at their path's rate (``segment_max_ms``), or
wire-sized packets (``segmentation_offload: false``, and any lossy fabric).

Why it matters: a shaped queue (HTB, :mod:`testbed.emulator.shaping`) sends a whole segment
whenever its class has tokens, so a transfer that starts on an idle link sends its first
segment at once. At 100 Mbit/s a 64 KiB segment is 5.2 ms of the link, and a transfer of one
or two segments arrived at 0.55-0.66 of the time its rate allows (BENCHMARKS.md, "Training on
the emulator ... per dimension"). Capping the segment at ``segment_max_ms`` of the slowest
link it may cross bounds that credit to ``segment_max_ms`` per transfer, at a fraction of the
packets wire-sized segments cost.
"""

from __future__ import annotations

import subprocess

from testbed.core.errors import FabricLabError
from testbed.core.topology import FabricPlan, Nic
from testbed.emulator.netns_batch import run_batch

KERNEL_SEGMENT_BYTES = 65536  # the kernel's default gso_max_size
MTU_BYTES = 1500  # the hosts' interfaces: without offload, the largest packet a host sends
# The smallest cap set: two full frames (TCP sends at least tcp_min_tso_segs = 2 MSS per
# segment whatever the device allows).
MIN_SEGMENT_BYTES = 3000


def wire_sized(plan: FabricPlan) -> bool:
    """Whether hosts send wire-sized packets: any link loses packets (netem and netfilter
    judge each packet they see, and a 64 KiB TSO packet lost whole would be some forty
    segments lost at once), or the fabric asks for it (``segmentation_offload: false``)."""
    return not plan.spec.segmentation_offload or any(lk.loss for lk in plan.links)


def slowest_path_mbit_s(plan: FabricPlan, nic: Nic) -> float:
    """The slowest link a packet sent from ``nic`` may cross: on a multi-dimensional fabric
    the links of the NIC's dimension, on a leaf-spine fabric any link."""
    return min(lk.mbit_s for lk in plan.links if lk.dim == nic.dim)


def segment_cap_bytes(mbit_s: float, segment_max_ms: float) -> int | None:
    """The gso_max_size giving segments of at most ``segment_max_ms`` at ``mbit_s`` (at least
    :data:`MIN_SEGMENT_BYTES`), or None where the kernel's 64 KiB already is."""
    cap = int(mbit_s * 1e6 / 8 * segment_max_ms / 1000)
    return None if cap >= KERNEL_SEGMENT_BYTES else max(MIN_SEGMENT_BYTES, cap)


def segment_caps(plan: FabricPlan) -> dict[tuple[str, str], int]:
    """Per (host, interface): the segment cap ``segment_max_ms`` asks for (none where hosts
    send wire-sized packets, or no cap is asked)."""
    max_ms = plan.spec.segment_max_ms
    if max_ms is None or wire_sized(plan):
        return {}
    caps = {}
    for h in plan.hosts:
        for nic in h.nics:
            cap = segment_cap_bytes(slowest_path_mbit_s(plan, nic), max_ms)
            if cap is not None:
                caps[(h.name, nic.intf)] = cap
    return caps


def largest_segment_bytes(plan: FabricPlan) -> int:
    """The largest packet any host hands its interfaces, without its frame: one IP packet of
    :data:`MTU_BYTES` where hosts send wire-sized packets, else the largest of the
    NICs' caps, or the kernel's 64 KiB where a NIC has none."""
    if wire_sized(plan):
        return MTU_BYTES
    caps = segment_caps(plan)
    return max((caps.get((h.name, nic.intf), KERNEL_SEGMENT_BYTES)
                for h in plan.hosts for nic in h.nics), default=KERNEL_SEGMENT_BYTES)


def apply(plan: FabricPlan, host_pids: dict[str, int]) -> None:
    """TSO and GSO off on every host interface where hosts send wire-sized packets
    (:func:`wire_sized`), else each capped interface's gso_max_size set
    (:func:`segment_caps`). Before the workers connect: a socket takes its segment size
    from its interface when it connects."""
    if wire_sized(plan):
        for h in plan.hosts:
            for nic in h.nics:
                out = subprocess.run(["nsenter", "-t", str(host_pids[h.name]), "-n", "ethtool",
                                      "-K", nic.intf, "tso", "off", "gso", "off"],
                                     capture_output=True, text=True)
                if out.returncode != 0:
                    raise FabricLabError(f"could not turn segmentation offload off on "
                                         f"{nic.intf}: {out.stderr.strip()}")
        return
    lines: dict[str, list[str]] = {}
    for (host, intf), cap in segment_caps(plan).items():
        lines.setdefault(host, []).append(f"link set dev {intf} gso_max_size {cap}")
    for host, batch in lines.items():  # one ip -batch per host, not one process per NIC
        if problem := run_batch(host_pids[host], ["ip", "-batch", "-"], batch):
            raise FabricLabError(f"could not cap the segments on {host}: {problem}")
