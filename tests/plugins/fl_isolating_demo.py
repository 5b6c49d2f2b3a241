"""An isolating routing policy from outside fabriclab: ``spine-per-job`` places a job as vClos
does (spines of its own) and pins its hosts' cross-leaf traffic to them, and says so
(``isolates_jobs``), which is all the job invariant needs to judge its jobs. The tests
register it through the registry's API."""

from __future__ import annotations

from sdn_app.policies import vclos
from sdn_app.policies.base import RoutingPolicy
from sdn_app.policies.ecmp import ecmp_program


class SpinePerJob(RoutingPolicy):
    name = "spine-per-job"
    allocates_as = "vclos"
    isolates_jobs = True

    def base_program(self, plan, down=frozenset()):
        return ecmp_program(plan, down)

    def job_program(self, plan, alloc):
        return vclos.POLICY.job_program(plan, alloc)

    def path(self, alloc, src, dst, spines, sport=0):
        return vclos.POLICY.path(alloc, src, dst, spines, sport)


POLICY = SpinePerJob()
