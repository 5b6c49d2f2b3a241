"""Run a collective job's (All-Reduce or all-to-all) worker processes inside the hosts of a
live fabric.

Rank r runs in host ``job.hosts[r]`` and, for every dimension, listens on that host's NIC of
the dimension (multidim) or its one NIC (leaf-spine), so each dimension's traffic crosses the
links the fabric shaped for it. A ring or fully connected dimension's NICs share one address
and the host routes of :mod:`testbed.emulator.fabric` send to each peer over its own link,
so a rank needs only that address per dimension. Everything else — waiting, root-cause
errors, killing every worker on failure, nccl-tests style results — is the local launcher's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError, SpecError
from testbed.core.experiment import Experiment, JobSpec
from testbed.core.formulas import ALLTOALL
from testbed.core.jobs import ResolvedJob, logical_dims, resolve
from testbed.core.spec import validate
from testbed.core.topology import FabricPlan
from workloads.launcher import (
    LaunchResult,
    launch_workers,
    size_results,
    split_options,
    worker_configs,
    workload_of,
)
from workloads.training import library
from workloads.training.emulated import emulator_problem

BASE_PORT = 7100  # dimension d listens on BASE_PORT + d (each host has its own addresses)


def check_training(exp: Experiment, plan: FabricPlan) -> None:
    """Every training job's workload loads and is one the emulator replays on its
    dimensions (:func:`workloads.training.emulated.emulator_problem`), else one sentence,
    before any fabric comes up."""
    for i, job in enumerate(exp.jobs):
        w = job.workload
        if w.kind != "training":
            continue
        where = f"jobs.{i}.workload"
        try:
            workload = library.scaled(library.load(model=w.model, file=w.file), w.size_scale,
                                      w.compute_scale)
        except FabricLabError as exc:
            raise SpecError(f"{where}: {exc}") from None
        size = len(job.hosts) if job.hosts else job.hosts_wanted
        dims = logical_dims(job, plan, size or len(plan.hosts))
        if problem := emulator_problem(workload, dims, job.chunks, f"{where} ({job.name})"):
            raise SpecError(problem)


def fabric_configs(plan: FabricPlan, job: ResolvedJob, *, out_dir: Path, run_id: str = "run",
                   **runtime: Any) -> list[dict]:
    """Worker configs (dicts) for ``job`` on ``plan``: rank r listens on ``job.hosts[r]``'s
    NIC of each dimension (see :func:`workloads.launcher.worker_configs`)."""
    multidim = plan.kind == "multidim"
    addresses = []
    for name in job.hosts:
        h = plan.node(name)
        addresses.append([{"ip": (h.nic(d) if multidim and n > 1 else h.nics[0]).ip,
                           "port": BASE_PORT + d} for d, n in enumerate(job.dims)])
    return worker_configs(addresses, job=job, out_dir=out_dir, run_id=run_id, **runtime)


def fabric_job(plan: FabricPlan, hosts: list[str], *, job_id: str = "job0",
               dims: list[int] | None = None, **options: Any) -> ResolvedJob:
    """The resolved job of an ad-hoc job on ``hosts`` (tests, benchmarks): ``options`` are
    :class:`~testbed.core.experiment.CollectiveOptions` knobs and
    :func:`workloads.launcher.workload_of`'s workload options."""
    work = {k: options.pop(k) for k in ("sizes", "dnn", "kind", "iterations", "warmup",
                                       "training")
            if k in options}
    spec = validate(JobSpec, {**options, "name": job_id, "hosts": hosts, "dims": dims,
                              "workload": workload_of(**work)}, f"job {job_id}")
    return resolve(spec, plan, hosts)


def run_job(fab, job: ResolvedJob, *, out_dir: Path, wall_timeout: float | None = None,
            run_id: str | None = None, on_spawn: Callable[[int, int], object] | None = None,
            **runtime: Any) -> LaunchResult:
    """Start one worker per host of ``job``, wait for all, return per-size results (raises
    the root-cause worker error as a FabricLabError; every worker is gone when it returns).
    ``on_spawn(rank, pid)`` hears of each worker as it starts (the scheduler sampler)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    configs = fabric_configs(fab.plan, job, out_dir=out_dir,
                             run_id=run_id or uuid.uuid4().hex[:12], **runtime)
    # mnexec -d gives each worker its own session, so no start_new_session here
    def spawn(rank: int, args: list[str], **kw: Any):
        proc = fab.popen(job.hosts[rank], args, **kw)
        if on_spawn is not None:
            on_spawn(rank, proc.pid)
        return proc

    launch_workers(dict(enumerate(configs)), out_dir, spawn, wall_timeout)
    errors = sorted(out_dir.glob("error-rank*.json"))
    if errors:  # a worker that reported an error failed, whatever its exit code said
        raise FabricLabError(json.loads(errors[0].read_text()).get("message", "worker error"))
    result = LaunchResult(out_dir, size_results(out_dir))
    if not result.rows:
        raise FabricLabError("the workers finished without recording a single collective")
    wrong = [r.size for r in result.rows if not r.correct]
    if wrong and job.collective_kind == ALLTOALL:
        raise FabricLabError(f"the all-to-all of {wrong[0]} bytes per rank delivered a wrong "
                             "block on some rank")
    if wrong:
        raise FabricLabError(f"the All-Reduce of {wrong[0]} bytes gave a wrong sum on some rank")
    return result


def run_on_fabric(fab, hosts: list[str], *, out_dir: Path, wall_timeout: float | None = None,
                  run_id: str | None = None, **options: Any) -> LaunchResult:
    """:func:`run_job` for an ad-hoc job on ``hosts`` (:func:`fabric_job`'s ``options``, and
    the workers' runtime options)."""
    job_options, runtime = split_options(options)
    return run_job(fab, fabric_job(fab.plan, hosts, **job_options), out_dir=out_dir,
                   wall_timeout=wall_timeout, run_id=run_id, **runtime)
