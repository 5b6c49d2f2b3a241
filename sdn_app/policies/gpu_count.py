"""``gpu-count``: the reference no network can beat, for the cluster simulator only.

A job starts as soon as enough GPUs are free, wherever they are (the ``ecmp`` allocator refuses
only for free hosts), and its flows cross only the hosts' own links, as on one non-blocking
switch: its run time is its time alone on any fabric at best. Under strict FIFO (the cluster
simulator's ``--queue fifo``) this waits no longer than any placement (the proof:
docs/vclos-paper.md, "The bound"); under a discipline that reorders or backfills it is a
reference, not a bound (docs/vclos-paper.md, "Queue disciplines"). A real fabric cannot route
it.
"""

from __future__ import annotations

from sdn_app.policies.base import LeafSlot, LinkId, RoutingPolicy
from sdn_app.program import Program, Uplink
from testbed.core.errors import SpecError
from testbed.core.topology import FabricPlan


class GpuCount(RoutingPolicy):
    name = "gpu-count"
    simulator_only = True
    isolates_jobs = True  # its flows cross only its own hosts' links

    def base_program(self, plan: FabricPlan, down: frozenset[Uplink] = frozenset()) -> Program:
        raise SpecError("policy gpu-count is the simulator's bound (one non-blocking switch); "
                        "a real fabric cannot route it: use ecmp, vclos or ocs-vclos")

    def path(self, alloc, src: LeafSlot, dst: LeafSlot, spines: int,
             sport: int = 0) -> list[LinkId]:
        (la, sa), (lb, sb) = src, dst
        return [("hu", la, sa), ("hd", lb, sb)]


POLICY = GpuCount()
