"""Running jobs of one fabric: placement through the allocator, the rules each job adds, and
the saved state a restarted controller reloads. Pure: the controller does the OpenFlow I/O."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import (
    Allocation,
    AllocationRefused,
    AllocationRequestError,
    allocation_from_dict,
)
from sdn_app.api import ApiError, JobRequest
from sdn_app.program import Program, job_cookie, job_program, ocs_circuits
from testbed.core.atomic import write_json
from testbed.core.registry import POLICIES
from testbed.core.topology import FabricPlan


class JobManager:
    def __init__(self, plan: FabricPlan, policy: str, state_file: Path | None = None) -> None:
        self.plan = plan
        self.policy = policy
        self.state_file = state_file
        self.cluster = None
        if plan.kind != "multidim":
            self.cluster = Cluster.for_fabric(plan.spec)
        self.flat_jobs: dict[str, list[str]] = {}  # multidim: job -> host names

    # -- queries -----------------------------------------------------------------------------

    def allocations(self) -> list[Allocation]:
        return list(self.cluster.jobs.values()) if self.cluster else []

    def describe(self, alloc: Allocation) -> dict[str, Any]:
        d = alloc.to_dict()
        d["host_names"] = [self._name(leaf, slot) for leaf, slot in alloc.hosts]
        d["cookie"] = job_cookie(alloc.job_id)
        d["ocs_ports"] = [
            {"ocs": c.ocs, "port_a": c.port_a, "port_b": c.port_b}
            for c in ocs_circuits(self.plan, alloc)
        ]
        return d

    def list_jobs(self) -> list[dict[str, Any]]:
        jobs = [self.describe(a) for a in self.allocations()]
        jobs += [{"job_id": j, "policy": self.policy, "host_names": hosts}
                 for j, hosts in self.flat_jobs.items()]
        return jobs

    def circuits(self) -> list[dict[str, Any]]:
        return [{"job_id": a.job_id, "ocs": c.ocs, "port_a": c.port_a, "port_b": c.port_b}
                for a in self.allocations() for c in ocs_circuits(self.plan, a)]

    # -- changes -----------------------------------------------------------------------------

    def create(self, req: JobRequest) -> tuple[dict[str, Any], Program]:
        """Place a job; return its description and the rules it adds. Raises ApiError."""
        policy = req.policy or self.policy
        if self.cluster is None:
            return self._create_flat(req), Program()
        allowed = POLICIES.get(self.policy).allowed_for_jobs()
        if policy not in allowed:
            raise ApiError(400, f"policy: this fabric runs {self.policy}; a job may ask for "
                                f"{' or '.join(allowed)}")
        if req.job_id in self.cluster.jobs:
            raise ApiError(409, f"job {req.job_id} is already running")
        try:
            if req.hosts is not None:
                alloc = POLICIES.get(policy).claim(self.cluster, req.job_id,
                                                   [self._slot(h) for h in req.hosts])
            else:
                alloc = POLICIES.get(policy).allocate(self.cluster, req.job_id,
                                                      req.hosts_wanted)
        except AllocationRequestError as exc:
            raise ApiError(400, str(exc)) from None
        except AllocationRefused as exc:  # valid, but cannot be placed now
            raise ApiError(409, str(exc)) from None
        self.save()
        return self.describe(alloc), job_program(self.plan, alloc)

    def delete(self, job_id: str) -> tuple[dict[str, Any], int]:
        """Release a job; return its description and the cookie of its rules."""
        if job_id in self.flat_jobs:
            hosts = self.flat_jobs.pop(job_id)
            self.save()
            return {"job_id": job_id, "host_names": hosts}, job_cookie(job_id)
        if self.cluster is None or job_id not in self.cluster.jobs:
            raise ApiError(404, f"no running job {job_id}")
        alloc = self.cluster.release(job_id)
        self.save()
        return self.describe(alloc), job_cookie(job_id)

    def _create_flat(self, req: JobRequest) -> dict[str, Any]:
        if req.job_id in self.flat_jobs:
            raise ApiError(409, f"job {req.job_id} is already running")
        busy = {h for hosts in self.flat_jobs.values() for h in hosts}
        free = [h.name for h in self.plan.hosts if h.name not in busy]
        if req.hosts is not None:
            unknown = [h for h in req.hosts if not self.plan.is_host(h)]
            if unknown:
                raise ApiError(400, f"hosts: {unknown[0]} is not a host of this fabric")
            taken = [h for h in req.hosts if h in busy]
            if taken:
                raise ApiError(409, f"host {taken[0]} is held by another job")
            hosts = list(req.hosts)
        else:
            if req.hosts_wanted > len(free):
                raise ApiError(409, f"not enough free hosts: the job wants "
                                    f"{req.hosts_wanted}, {len(free)} are free")
            hosts = free[:req.hosts_wanted]
        self.flat_jobs[req.job_id] = hosts
        self.save()
        return {"job_id": req.job_id, "policy": self.policy, "host_names": hosts}

    # -- persistence -------------------------------------------------------------------------

    def save(self) -> None:
        if self.state_file is None:
            return
        data = {"jobs": [a.to_dict() for a in self.allocations()], "flat": self.flat_jobs}
        write_json(self.state_file, data, indent=None)

    def load(self) -> None:
        """Take back the jobs a previous controller run had placed."""
        if self.state_file is None or not self.state_file.exists():
            return
        data = json.loads(self.state_file.read_text())
        for d in data.get("jobs", []):
            if self.cluster is not None:
                self.cluster.adopt(allocation_from_dict(d))
        self.flat_jobs.update(data.get("flat", {}))

    # -- names -------------------------------------------------------------------------------

    def _name(self, leaf: int, slot: int) -> str:
        return self.plan.host_at(leaf, slot).name

    def _slot(self, name: str) -> tuple[int, int]:
        if not self.plan.is_host(name):
            raise ApiError(400, f"hosts: {name} is not a host of this fabric")
        h = self.plan.node(name)
        return h.leaf, h.slot
