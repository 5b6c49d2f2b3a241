"""A job of a run, on either backend: its record in ``jobs.json``, the checks only a built plan
can make, and its logical dimensions (the job -> worker contract)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from testbed.core.algorithms import default_dims, groups_error, is_flat, ring_dimension_error
from testbed.core.errors import FabricLabError, SpecError
from testbed.core.experiment import Experiment, JobSpec
from testbed.core.formulas import ALLTOALL
from testbed.core.registry import SCHEDULES
from testbed.core.topology import FabricPlan


@dataclass
class JobRun:
    """One job of a run (or the solo baseline of one)."""

    name: str
    spec: JobSpec
    hosts: list[str] = field(default_factory=list)
    allocation: dict[str, Any] = field(default_factory=dict)
    solo_of: str | None = None
    status: str = "pending"  # pending | running | ok | failed | incomplete
    start: float | None = None
    end: float | None = None
    error: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    command: dict[str, Any] | None = None  # a command job's exit codes and iteration counts

    def record(self) -> dict[str, Any]:
        s = self.spec
        ours = s.workload.kind != "command"  # a command's collectives are its own business
        reduces = ours and s.workload.kind != ALLTOALL  # the All-Reduce knobs mean something
        return {
            "name": self.name, "hosts": self.hosts, "solo_of": self.solo_of,
            "policy": self.allocation.get("policy"), "spines": self.allocation.get("spines", []),
            "circuits": self.allocation.get("ocs_ports", []),
            "algorithm": s.algorithm if ours else None,
            "dim_algorithm": s.dim_algorithm if reduces else None,
            "order": s.order if reduces else None,
            "semantics": s.semantics if reduces else None,
            "chunks": s.chunks if reduces else None, "transport": s.transport if ours else None,
            "workload": s.workload.model_dump(), "start": self.start, "end": self.end,
            "status": self.status, "error": self.error, "results": self.rows,
            **({"command": self.command} if self.command is not None else {}),
        }


def check_against_fabric(exp: Experiment, plan: FabricPlan) -> None:
    """What only the built plan can tell: hosts exist and jobs fit. (Whether the policy
    routes this fabric is ``sdn_app.policies.policy_for``'s to say.)"""
    names = {h.name for h in plan.hosts}
    for i, job in enumerate(exp.jobs):
        for h in job.hosts or []:
            if h not in names:
                raise SpecError(f"jobs.{i}.hosts: {h} is not a host of this fabric "
                                f"(h0..h{len(names) - 1})")
        size = len(job.hosts) if job.hosts else job.hosts_wanted
        if job.workload.kind == "command" and plan.kind == "multidim":
            raise SpecError(f"jobs.{i}.workload: a command job needs one fabric interface per "
                            "host; run it on a leaf_spine or ocs_leaf_spine fabric")
        if job.workload.kind == ALLTOALL and plan.kind == "multidim":
            raise SpecError(f"jobs.{i}.workload.kind: an alltoall job needs one fabric "
                            "interface per host; run it on a leaf_spine or ocs_leaf_spine "
                            "fabric")
        if size > len(names):
            raise SpecError(f"jobs.{i}.hosts_wanted: {size} hosts, the fabric has {len(names)}")
        if job.workload.kind == "command":
            continue  # the rest is about fabriclab's own collectives
        if plan.kind == "multidim" and size != len(names):
            raise SpecError(f"jobs.{i}: a job on a multidim fabric spans all {len(names)} hosts")
        flat = is_flat(job.algorithm)
        if flat and plan.kind == "multidim":
            raise SpecError(f"jobs.{i}.algorithm: a flat {job.algorithm} needs a leaf-spine "
                            f"fabric; use a chunk schedule ({', '.join(SCHEDULES.names())}) "
                            "on multidim")
        dims = job.dims
        if plan.kind == "multidim":
            dims = [d.size for d in plan.spec.dims]
        elif dims is None and not flat:
            dims = default_dims(size, job.algorithm)
        if bad := groups_error(job.algorithm, job.dim_algorithm, size, dims):
            raise SpecError(f"jobs.{i}.{bad[0]}: {bad[1]} (job {job.name})")
        for d, dim in enumerate(plan.spec.dims if plan.kind == "multidim" else []):
            if dim.kind == "ring" and (
                    bad_ring := ring_dimension_error(job.dim_algorithm, dim.size)):
                raise SpecError(f"jobs.{i}.dim_algorithm: {bad_ring} (job {job.name}, "
                                f"fabric.dims.{d})")


def job_dims(plan: FabricPlan, hosts: list[str], dims: list[int] | None) -> list[int]:
    """The logical dimensions of a job: the fabric's own on a multidim fabric, else the
    given split (or one flat dimension) over the hosts' single NICs."""
    if plan.kind == "multidim":
        sizes = list(plan.spec.sizes)
        if hosts != [h.name for h in plan.hosts]:
            raise FabricLabError("a multidim job spans every host of the fabric, in host order")
        if dims and list(dims) != sizes:
            raise FabricLabError(f"dims must be the fabric's own, {'x'.join(map(str, sizes))}")
        return sizes
    dims = list(dims) if dims else [len(hosts)]
    if math.prod(dims) != len(hosts):
        raise FabricLabError(f"dims {'x'.join(map(str, dims))} do not multiply to "
                             f"{len(hosts)} hosts")
    return dims
