"""Path counters: where each flow of a job actually went, counted by the spines themselves.

On an electrical leaf-spine fabric a job's cross-leaf traffic crosses exactly one spine. Which
one is the policy's choice (vClos pins it) or Open vSwitch's (ECMP's SELECT group hashes each
flow onto a bucket, with a hash the controller cannot predict). So every placed job gets, on
every spine, one rule per ordered pair of its hosts on different leaves: it matches the pair's
MAC addresses and forwards exactly as the spine's delivery rule would, and the switch counts
the bytes it matched. Reading those counters (``ovs-ofctl dump-flows``) tells, per host pair,
which spine its bytes crossed: the paths the job invariant predicts each job's time on.

Pure: the rules and the parsing of a dump; :mod:`testbed.emulator.path_reader` reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sdn_app.allocation.ledger import Allocation
from sdn_app.static_routes import FlowRule, leaf_spine_view
from testbed.core.spec import LeafSpineSpec
from testbed.core.topology import FabricPlan

PRIO_COUNT = 160  # above a job's own leaf rules (150), below local delivery (200)


@dataclass(frozen=True)
class PairBytes:
    """Bytes one ordered host pair sent through one spine."""

    spine: int
    src: str
    dst: str
    bytes: int


def counted(plan: FabricPlan) -> bool:
    """Whether ``plan`` gets path counters: an electrical leaf-spine fabric (on an OCS fabric
    the circuits a job's controller installs are its paths)."""
    return plan.kind == "leaf_spine" and type(plan.spec) is LeafSpineSpec


def counter_rules(plan: FabricPlan, alloc: Allocation, cookie: int,
                  taken: set[str] = frozenset()) -> list[FlowRule]:
    """One counting rule per spine and ordered pair of the job's hosts on different leaves,
    forwarding as the spine's delivery rule does; none on a spine in ``taken`` (where the
    job's policy put rules of its own, which a counter must not override)."""
    if not counted(plan):
        return []
    view = leaf_spine_view(plan, [])
    hosts = [plan.host_at(leaf, slot) for leaf, slot in alloc.hosts]
    rules = []
    for (leaf, spine), port in sorted(view.down_port.items()):
        name = f"spine{spine}"
        if name in taken:
            continue
        for dst in hosts:
            if dst.leaf != leaf:
                continue
            for src in hosts:
                if src.leaf != dst.leaf:
                    rules.append(FlowRule(name, PRIO_COUNT, port, eth_src=src.nics[0].mac,
                                          eth_dst=dst.nics[0].mac, cookie=cookie))
    return rules


_FIELD = re.compile(r"(n_bytes|priority|dl_src|dl_dst)=([0-9a-fA-F:x]+)")


def parse_dump(spine: int, text: str, host_of_mac: dict[str, str]) -> list[PairBytes]:
    """The counting rules' bytes in one ``ovs-ofctl dump-flows`` text of ``spine``."""
    out = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if fields.get("priority") != str(PRIO_COUNT) or "n_bytes" not in fields:
            continue
        src = host_of_mac.get(fields.get("dl_src", "").lower())
        dst = host_of_mac.get(fields.get("dl_dst", "").lower())
        if src and dst:
            out.append(PairBytes(spine, src, dst, int(fields["n_bytes"])))
    return out


def macs(plan: FabricPlan) -> dict[str, str]:
    """MAC address (lower case) → host name, for every host's first NIC."""
    return {h.nics[0].mac.lower(): h.name for h in plan.hosts}
