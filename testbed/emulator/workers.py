"""Run a collective job's (All-Reduce or all-to-all) worker processes inside the hosts of a
live fabric.

Rank r runs in host ``hosts[r]`` and, for every dimension, listens on that host's NIC of
the dimension (multidim) or its one NIC (leaf-spine), so each dimension's traffic crosses the
links the fabric shaped for it. A ring or fully connected dimension's NICs share one address
and the host routes of :mod:`testbed.emulator.fabric` send to each peer over its own link,
so a rank needs only that address per dimension. Everything else — waiting, root-cause
errors, killing every worker on failure, nccl-tests style results — is the local launcher's.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from testbed.core.errors import FabricLabError
from testbed.core.formulas import ALLTOALL
from testbed.core.jobs import job_dims
from testbed.core.registry import COLLECTIVES
from testbed.core.topology import FabricPlan
from workloads.collectives import link_share
from workloads.launcher import LaunchResult, launch_workers, summarise, worker_configs

BASE_PORT = 7100  # dimension d listens on BASE_PORT + d (each host has its own addresses)


def fabric_configs(plan: FabricPlan, hosts: list[str], *, algorithm: str, out_dir: Path,
                   dims: list[int] | None = None, run_id: str = "run", job_id: str = "job0",
                   **options) -> list[dict]:
    """Worker configs (dicts) for a job on ``hosts`` of a fabric: rank r listens on
    ``hosts[r]``'s NIC of each dimension (see :func:`workloads.launcher.worker_configs`)."""
    dims = job_dims(plan, hosts, dims)
    multidim = plan.kind == "multidim"
    addresses = []
    for name in hosts:
        h = plan.node(name)
        row = []
        for d, n in enumerate(dims):
            nic = h.nic(d) if multidim and n > 1 else h.nics[0]
            row.append({"ip": nic.ip, "port": BASE_PORT + d})
        addresses.append(row)
    if multidim:  # as each dimension's collective can use it (a mesh: links at once)
        collective = COLLECTIVES.get(options.get("dim_algorithm", "ring"))
        bandwidths = [float(d.mbit_s) * 1e6 * float(link_share(d.kind, d.size, collective))
                      for d in plan.spec.dims]
    else:
        bandwidths = [float(plan.spec.host_link_mbit_s) * 1e6] * len(dims)
    options.setdefault("dim_bandwidths", bandwidths)
    return worker_configs(addresses, dims=dims, algorithm=algorithm, out_dir=out_dir,
                          run_id=run_id, job_id=job_id, **options)


def run_on_fabric(fab, hosts: list[str], *, out_dir: Path, wall_timeout: float | None = None,
                  **config) -> LaunchResult:
    """Start one worker per host, wait for all, return per-size results (raises the
    root-cause worker error as a FabricLabError; every worker is gone when it returns)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config.setdefault("run_id", uuid.uuid4().hex[:12])
    configs = fabric_configs(fab.plan, hosts, out_dir=out_dir, **config)
    # mnexec -d gives each worker its own session, so no start_new_session here
    launch_workers(dict(enumerate(configs)), out_dir,
                   lambda rank, args, **kw: fab.popen(hosts[rank], args, **kw), wall_timeout)
    errors = sorted(out_dir.glob("error-rank*.json"))
    if errors:  # a worker that reported an error failed, whatever its exit code said
        raise FabricLabError(json.loads(errors[0].read_text()).get("message", "worker error"))
    result = LaunchResult(out_dir, summarise(out_dir))
    if not result.rows:
        raise FabricLabError("the workers finished without recording a single collective")
    wrong = [r.size for r in result.rows if not r.correct]
    if wrong and config.get("kind") == ALLTOALL:
        raise FabricLabError(f"the all-to-all of {wrong[0]} bytes per rank delivered a wrong "
                             "block on some rank")
    if wrong:
        raise FabricLabError(f"the All-Reduce of {wrong[0]} bytes gave a wrong sum on some rank")
    return result
