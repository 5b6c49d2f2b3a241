"""``source-routing`` and ``source-routing-flat``: RapidNetSim's baseline in the vClos paper.

Placement: :func:`sdn_app.allocation.source_routing.place_source_routing` (4 pods of leaves,
whole idle leaves for jobs larger than a leaf, the best-fit leaf for the others; the ``-flat``
variant without pods). No spine link is reserved, so jobs share the fabric; the simulator
hashes each flow onto a spine as ``ecmp`` does (RapidNetSim's own routing never lets two flows
slow each other down, see docs/vclos-paper.md, so its paths do not bear on its figures). On a
real fabric it runs ECMP's rules.
"""

from __future__ import annotations

from functools import partial

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import Allocation
from sdn_app.allocation.source_routing import RAPIDNETSIM_PODS, place_source_routing
from sdn_app.policies.ecmp import Ecmp


class SourceRouting(Ecmp):
    name = "source-routing"
    reference = False
    isolates_jobs = False  # no spine link is reserved: flows hash onto spines as ECMP's
    pods = RAPIDNETSIM_PODS

    def allocate(self, cluster: Cluster, job_id: str, hosts_wanted: int) -> Allocation:
        return cluster.place(job_id, hosts_wanted, self.name,
                             partial(place_source_routing, pods=self.pods))


class SourceRoutingFlat(SourceRouting):
    name = "source-routing-flat"
    pods = 1


POLICY = SourceRouting()
FLAT = SourceRoutingFlat()
