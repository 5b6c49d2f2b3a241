"""Which server each host and switch of a fabric runs on (issue #43), and the links that cross
between servers: pure, decided once from the plan and the servers file.

The rule keeps the busiest links on one machine, so that only one kind of link crosses:

- **Leaf-spine and OCS fabrics**: whole leaves (a leaf with all its hosts) per server, in
  contiguous blocks (leaf0, leaf1, … on the first server, the next block on the second), so
  host and leaf links never cross. Spines, and OCS switches, are spread the same way: in
  contiguous balanced blocks (spine0, spine1 on the first server, …; not round-robin), so each
  server forwards a share of the uplinks in proportion to its share of the leaves. Only
  leaf-spine links (on an OCS fabric, leaf-OCS and spine-OCS links) cross.
- **Multidim fabrics**: whole groups of one dimension per server, in contiguous blocks of
  groups: the dimension's switch (or ring, or mesh) with its hosts stays together, so only the
  other dimensions' links cross. The dimension kept whole is dimension 0 (the first of size
  above 1). Why: by the convention of ASTRA-sim and the Themis paper's systems it is the
  innermost, fastest one (a node's NVLink domain), and the one the baseline hierarchical
  All-Reduce sends the most bytes on (its fixed order starts there with the whole chunk; the
  next dimensions carry a share of it). And
  since host ids count dimension 0 fastest, its groups' blocks are contiguous ranges of hosts
  (h0…h31, h32…h63), which also keep whole every lower dimension a block spans: the cut runs
  along the last dimensions, usually the slowest, as docs/scale-out.md ("Where to cut")
  designs it (the 4x4x4 on two servers: only 32 dimension-2 links of 192 cross). Another
  dimension's switch goes to the server holding most of its hosts (a tie: the server with
  fewer such switches so far, then the first), so its links cross only from the others.

Blocks are balanced by count: the largest share over a server's weight is as small as it can
be, a server's weight being its ``cores`` when every server gives them, else 1 (then shares
differ by at most one, the earlier servers taking the extra). A leaf-spine fabric needs at
least as many leaves as servers, a multidim one as many groups; one server holds everything
and nothing crosses.

Each crossing link gets a tunnel id (the VXLAN VNI), 1, 2, … in the plan's link order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from testbed.core.errors import SpecError
from testbed.core.servers import ServersSpec
from testbed.core.spec import MultidimSpec
from testbed.core.topology import FabricPlan, Link, group_of


@dataclass(frozen=True)
class Crossing:
    """A plan link whose ends are on different servers, carried by tunnel ``vni``."""

    link: Link
    vni: int  # the VXLAN network identifier, 1-based
    a_server: str  # the server of link.a
    b_server: str  # the server of link.b

    def to_json(self) -> dict[str, Any]:
        return {"link": self.link.name, "a": self.link.a, "a_intf": self.link.a_intf,
                "a_server": self.a_server, "b": self.link.b, "b_intf": self.link.b_intf,
                "b_server": self.b_server, "kind": self.link.kind, "vni": self.vni}


@dataclass(frozen=True)
class Placement:
    """The fabric on its servers: ``server_of`` every host and switch (in the plan's order:
    hosts, then switches), the links that cross, and how they are carried."""

    servers: tuple[str, ...]  # the servers' names, in the file's order
    server_of: dict[str, str]  # host or switch name -> server name
    crossing: tuple[Crossing, ...]  # in the plan's link order, VNIs 1, 2, …
    rule: str  # how the fabric was split, one phrase
    tunnel: str  # the servers file's tunnel kind: what carries each crossing link
    mtu: int  # the servers file's MTU: the emulated interfaces' when a link crosses
    kept_dim: int | None = None  # multidim: the dimension whose groups stay whole
    _vni: dict[str, int] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._vni.update({c.link.name: c.vni for c in self.crossing})

    def nodes_on(self, server: str) -> list[str]:
        """The hosts and switches on ``server``, in the plan's order (hosts first)."""
        return [node for node, s in self.server_of.items() if s == server]

    def is_crossing(self, link: Link) -> bool:
        """Whether ``link``'s ends are on different servers."""
        return link.name in self._vni

    def vni_of(self, link: Link) -> int | None:
        """The tunnel id carrying ``link``, None if it stays on one server."""
        return self._vni.get(link.name)

    def to_json(self) -> dict[str, Any]:
        """What a run records (summary.json) and ``fabriclab topo --servers --json`` prints."""
        return {"servers": list(self.servers), "rule": self.rule, "kept_dim": self.kept_dim,
                "tunnel": self.tunnel, "mtu": self.mtu, "server_of": dict(self.server_of),
                "crossing": [c.to_json() for c in self.crossing]}


def place(plan: FabricPlan, servers: ServersSpec) -> Placement:
    """Every host and switch of ``plan`` on one of ``servers`` by the module's rule; SpecError
    (one sentence) when the fabric cannot be split so."""
    names, weights = servers.names, servers.weights()
    kept_dim = None
    if len(names) == 1:
        server_of = {n: names[0] for n in _node_names(plan)}
        rule = "everything on one server"
    elif isinstance(plan.spec, MultidimSpec):
        kept_dim = next((d for d, n in enumerate(plan.spec.sizes) if n > 1), 0)
        server_of = _multidim(plan, kept_dim, names, weights)
        rule = f"whole groups of dimension {kept_dim} per server"
    else:
        server_of = _leaf_spine(plan, names, weights)
        rule = ("whole leaves per server, spines and OCS switches in balanced blocks"
                if plan.switches_with_role("ocs") else
                "whole leaves per server, spines in balanced blocks")
    crossing = []
    for lk in plan.links:
        a, b = server_of[lk.a], server_of[lk.b]
        if a != b:
            crossing.append(Crossing(lk, len(crossing) + 1, a, b))
    return Placement(tuple(names), server_of, tuple(crossing), rule, servers.tunnel,
                     servers.mtu, kept_dim)


def shares(count: int, weights: list[int], least: int = 0) -> list[int]:
    """``count`` items over servers of ``weights``, each taking at least ``least``: the
    largest ``share / weight`` as small as it can be, ties to the earlier server."""
    out = [least] * len(weights)
    for _ in range(count - least * len(weights)):
        k = min(range(len(weights)), key=lambda k: ((out[k] + 1) / weights[k], k))
        out[k] += 1
    return out


def _blocks(items: list[str], weights: list[int], names: list[str], least: int = 0
            ) -> dict[str, str]:
    """``items`` in order, in contiguous blocks of :func:`shares` over the servers ``names``."""
    out, start = {}, 0
    for name, n in zip(names, shares(len(items), weights, least), strict=True):
        out.update(dict.fromkeys(items[start:start + n], name))
        start += n
    return out


def _node_names(plan: FabricPlan) -> list[str]:
    return [h.name for h in plan.hosts] + [s.name for s in plan.switches]


def _leaf_spine(plan: FabricPlan, names: list[str], weights: list[int]) -> dict[str, str]:
    leaves = [s.name for s in plan.switches_with_role("leaf")]
    if len(leaves) < len(names):
        noun = "leaf" if len(leaves) == 1 else "leaves"
        raise SpecError(f"servers: {len(names)} servers for a fabric of {len(leaves)} {noun}; "
                        "each server holds whole leaves with their hosts, so give at most "
                        f"{len(leaves)} servers or more leaves")
    leaf_server = _blocks(leaves, weights, names, least=1)
    server_of = {h.name: leaf_server[f"leaf{h.leaf}"] for h in plan.hosts}
    for s in plan.switches:  # in the plan's order: leaves, spines, OCS switches
        if s.role == "leaf":
            server_of[s.name] = leaf_server[s.name]
    for role in ("spine", "ocs"):
        server_of |= _blocks([s.name for s in plan.switches_with_role(role)], weights, names)
    return {n: server_of[n] for n in _node_names(plan)}


def _multidim(plan: FabricPlan, kept: int, names: list[str], weights: list[int]
              ) -> dict[str, str]:
    sizes = plan.spec.sizes
    groups = len(plan.hosts) // sizes[kept]
    if groups < len(names):
        noun = "group" if groups == 1 else "groups"
        raise SpecError(f"servers: {len(names)} servers for a fabric of {groups} {noun} of "
                        f"dimension {kept} (size {sizes[kept]}); each server holds whole "
                        f"groups of dimension {kept}, so give at most {groups} servers")
    group_server = _blocks([str(g) for g in range(groups)], weights, names, least=1)
    server_of = {h.name: group_server[str(group_of(h.index, kept, sizes))] for h in plan.hosts}
    members: dict[str, list[str]] = {}
    for lk in plan.links:
        if lk.kind == "dim":  # host -> its dimension's switch
            members.setdefault(lk.b, []).append(server_of[lk.a])
    switches_on = dict.fromkeys(names, 0)
    for s in plan.switches:
        if s.dim == kept:
            server_of[s.name] = group_server[str(s.index)]
            continue
        on = members[s.name]
        best = max(names, key=lambda n: (on.count(n), -switches_on[n], -names.index(n)))
        server_of[s.name] = best
        switches_on[best] += 1
    return server_of
