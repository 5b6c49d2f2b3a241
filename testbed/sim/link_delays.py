"""The delay and loss of the simulator's directed links, read from the fabric plan's links
(:class:`testbed.core.topology.Link`: as emulated, so simulated times are at the emulated
rates as before, and convert to real ones by ``rate_scale`` alike).

Leaf-spine link ids are the routing policies' (:mod:`sdn_app.policies.base`): a host link
``hu``/``hd`` and a leaf-spine link ``ls``/``sl`` are one plan link each; an OCS circuit
(``cu``, ``cd``, ``cl``) crosses two, leaf to OCS and OCS to spine (or to the other leaf), and
pays both. Multidim link ids are :class:`testbed.sim.collectives.MultidimFabric`'s: on a
``switch`` dimension ``up`` and ``down`` are the two hosts' links to the group's switch; on a
``ring`` dimension the hop to the next host is one link, which ``up`` pays (``down`` pays
nothing); ``fc`` is the pair's own link.
"""

from __future__ import annotations

from testbed.core.link_model import path_loss
from testbed.core.topology import FabricPlan, Link, spine_ocs_port
from testbed.sim.flows import LinkId, Network

NO_IMPAIRMENT = (0.0, 0.0)


class LinkImpairments:
    """``of(link_id)``: the (one-way delay in s, loss fraction) of a simulator link of
    ``plan``; ``apply(net, link_ids)`` records them on a network."""

    def __init__(self, plan: FabricPlan) -> None:
        self.plan = plan
        self._between: dict[tuple[frozenset[str], int | None], Link] = {}
        self._at_port: dict[tuple[str, int], Link] = {}
        self._of_host: dict[tuple[str, int | None], list[Link]] = {}  # its own (a side) first
        for lk in plan.links:
            self._between.setdefault((frozenset((lk.a, lk.b)), lk.dim), lk)
            self._at_port[(lk.a, lk.a_port)] = lk
            self._at_port[(lk.b, lk.b_port)] = lk
            self._of_host.setdefault((lk.a, lk.dim), []).insert(0, lk)
            self._of_host.setdefault((lk.b, lk.dim), []).append(lk)
        self._hosts_per_leaf = getattr(plan.spec, "hosts_per_leaf", 0)

    def _link(self, a: str, b: str, dim: int | None = None) -> Link | None:
        return self._between.get((frozenset((a, b)), dim))

    def _links(self, link: LinkId) -> list[Link | None]:
        kind, *at = link
        if kind in ("hu", "hd"):
            leaf, slot = at
            return [self._link(f"h{leaf * self._hosts_per_leaf + slot}", f"leaf{leaf}")]
        if kind == "ls":
            return [self._link(f"leaf{at[0]}", f"spine{at[1]}")]
        if kind == "sl":
            return [self._link(f"leaf{at[1]}", f"spine{at[0]}")]
        if kind in ("cu", "cd"):
            ocs, leaf, spine, port = ((at[0], at[1], at[2], at[3]) if kind == "cu"
                                      else (at[0], at[3], at[1], at[2]))
            return [self._link(f"leaf{leaf}", f"ocs{ocs}"),
                    self._at_port.get((f"spine{spine}", spine_ocs_port(ocs, port)))]
        if kind == "cl":
            ocs, la, lb = at
            return [self._link(f"leaf{la}", f"ocs{ocs}"), self._link(f"leaf{lb}", f"ocs{ocs}")]
        if kind in ("up", "down"):
            dim, host = at
            own = self._of_host.get((f"h{host}", dim), [])
            if own and own[0].kind == "ring":  # the hop to the next host: its link out
                return own[:1] if kind == "up" else []
            return own[:1]
        if kind == "fc":
            dim, a, b = at
            return [self._link(f"h{a}", f"h{b}", dim)]
        return []

    def of(self, link: LinkId) -> tuple[float, float]:
        """(one-way delay in s, loss fraction) of the simulator link ``link``."""
        found = [lk for lk in self._links(link) if lk is not None]
        if not found:
            return NO_IMPAIRMENT
        return (sum(lk.delay_us for lk in found) * 1e-6, path_loss(lk.loss for lk in found))

    def apply(self, net: Network, links: list[LinkId]) -> None:
        """Record the delay and loss of each of ``links`` not yet known on ``net``."""
        for link in links:
            if link not in net.delays_s:
                delay, loss = self.of(link)
                net.delays_s[link] = delay
                if loss:
                    net.losses[link] = loss


def impairments_of(plan: FabricPlan) -> LinkImpairments | None:
    """The plan's link impairments, or None when every link is a perfect wire (the
    simulator then runs exactly as without them)."""
    return LinkImpairments(plan) if any(lk.impaired for lk in plan.links) else None

