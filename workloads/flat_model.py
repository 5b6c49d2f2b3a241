"""The α-β model of a flat All-Reduce (one group of all the job's ranks: ring,
halving-doubling, ...) on a leaf-spine fabric, with each step's busiest link.

A collective is a list of steps (:meth:`workloads.collectives.Collective.transfers`: each
``(src, dst, bytes)`` between positions), run as the simulator runs it: rank by rank where
the algorithm says its workers do (ring, halving-doubling: a position starts a step once what
was sent to it in the step before has arrived, so a ring pays the delays of the hops its
chain crosses, not each step's slowest path), else in lock step. Each transfer

* pays its path's one-way delay once (α: the sum of its links' delays,
  :func:`testbed.core.link_model.path_delay_s`);
* moves its bytes at its share of the busiest link it crosses (β): a link carrying ``k`` of
  the step's transfers gives each ``1/k`` of its rate, times :data:`TCP_GOODPUT` (the data a
  shaped link delivers, as the simulator and the job invariant count it), and a lossy path
  holds it to the Mathis et al. rate (:func:`testbed.core.link_model.lossy_rate_bit_s`).

A path is the source's host link, then, between leaves, one uplink up and one down, and the
destination's host link. The transfers between leaves spread evenly over a leaf's uplinks (as
vClos places them, and as ECMP's hash would if it never collided: a collision is the
simulator's to see, not this model's). This is what makes halving-doubling lose to a ring on
an oversubscribed fabric at large sizes: its far rounds send all of a leaf's hosts over the
uplinks at once, where a ring sends one flow each way, while its ``2·log2 n`` steps against
the ring's ``2(n-1)`` win where the delays dominate (``experiments/latency.yaml``).

Times are as emulated (the plan's rates and delays); the model of a chunk schedule on a
multidim fabric is :mod:`workloads.model`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from testbed.core.formulas import TCP_GOODPUT
from testbed.core.link_model import lossy_rate_bit_s, path_delay_s, path_loss
from testbed.core.topology import FabricPlan, Link
from workloads.collectives import Collective

# A directed link of a path: the link and which way it is crossed (a→b: True).
Hop = tuple[Link, bool]


def leaf_spine_path(plan: FabricPlan, src: str, dst: str) -> list[Hop]:
    """The hops from host ``src`` to host ``dst`` on a leaf-spine ``plan``: its host link up,
    the uplinks up and down when the two hosts sit under different leaves (the first of each
    leaf's: all of a leaf's uplinks stand for one, see :func:`step_time_s`), the destination's
    host link down."""
    up, down = _host_link(plan, src), _host_link(plan, dst)
    hops: list[Hop] = [(up, True)]
    if up.b != down.b:
        hops += [(_uplinks(plan, up.b)[0], True), (_uplinks(plan, down.b)[0], False)]
    return [*hops, (down, False)]


def _host_link(plan: FabricPlan, host: str) -> Link:
    return next(lk for lk in plan.links if lk.kind == "host" and lk.a == host)


def _uplinks(plan: FabricPlan, leaf: str) -> list[Link]:
    return [lk for lk in plan.links if lk.kind == "uplink" and lk.a == leaf]


def transfer_times_s(plan: FabricPlan, hosts: Sequence[str],
                     step: Sequence[tuple[int, int, float]]) -> list[float]:
    """How long each of one synchronous step's ``(src position, dst position, bytes)``
    transfers among ``hosts`` takes (position p runs on ``hosts[p]``): its path's delay plus
    its bytes over its share of its busiest link (see the module docstring)."""
    paths = [leaf_spine_path(plan, hosts[s], hosts[d]) for s, d, _ in step]
    load = Counter((lk.name, way) for path in paths for lk, way in path)
    times = []
    for (_, _, size), path in zip(step, paths, strict=True):
        share = min(_rate_bit_s(plan, lk) / _sharing(plan, lk, load[(lk.name, way)])
                    for lk, way in path)
        delay = path_delay_s(lk.delay_us * 1e-6 for lk, _ in path)
        rate = lossy_rate_bit_s(share * TCP_GOODPUT, delay, path_loss(lk.loss for lk, _ in path))
        times.append(delay + float(size) * 8 / rate)
    return times


def _rate_bit_s(plan: FabricPlan, lk: Link) -> float:
    """A link's rate (bit/s): an uplink stands for all of its leaf's, the slowest of them."""
    if lk.kind != "uplink":
        return lk.mbit_s * 1e6
    return min(u.mbit_s for u in _uplinks(plan, lk.a)) * 1e6


def _sharing(plan: FabricPlan, lk: Link, transfers: int) -> int:
    """How many transfers share one link when ``transfers`` cross it (or, for an uplink, its
    leaf's uplinks, over which they spread evenly)."""
    return math.ceil(transfers / len(_uplinks(plan, lk.a))) if lk.kind == "uplink" else transfers


def flat_allreduce_s(plan: FabricPlan, hosts: Sequence[str], collective: Collective,
                     size_bytes: int, step_latency_s: float = 0.0) -> float:
    """The model's time (s, as emulated) of an All-Reduce of ``size_bytes`` per rank by
    ``collective`` over ``hosts`` of a leaf-spine ``plan``, run as the simulator runs it
    (:meth:`~workloads.collectives.Collective.sim_slices`): rank by rank, a position starts a
    step once every transfer sent to it in the step before has arrived
    (:func:`transfer_times_s`); in lock step, once every transfer of the step before has.
    The collective ends with the last position's last step. Where every path is alike both
    are the sum of the steps' slowest transfers. ``step_latency_s`` is added to every
    transfer: the workers' own latency per step, where a run measured it
    (:mod:`testbed.emulator.step_latency`)."""
    lock_step = collective.sim_slices(len(hosts), size_bytes) is None
    ready_s = [0.0] * len(hosts)  # when each position has what its next step needs
    for step in collective.transfers("AR", len(hosts), size_bytes):
        if lock_step:
            ready_s = [max(ready_s)] * len(hosts)
        arrived_s = list(ready_s)
        for (src, dst, _), took_s in zip(step, transfer_times_s(plan, hosts, step),
                                         strict=True):
            arrived_s[dst] = max(arrived_s[dst], ready_s[src] + took_s + step_latency_s)
        ready_s = arrived_s
    return max(ready_s)
