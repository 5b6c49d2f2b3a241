"""The workers' own latency per step of a flat collective, measured on the fabric before the
jobs (an experiment's ``measure_step_latency: true``).

The α-β model and the simulator give a step its path's link delays and its bytes at the
link's rate. The emulator adds what neither sees: each worker's send and receive overhead
(Python, the socket calls, the reduction), the switch's forwarding, and waits for a CPU when
more workers than cores wake at once. At small sizes that is most of a collective (on 8 hosts
of this 2-core machine, a 4 KiB ring took 14–22 ms more than predicted, with or without link
delays: BENCHMARKS.md, "`experiments/latency.yaml` on the emulator").

So each flat All-Reduce job first runs :data:`PROBE_BYTES` per rank, :data:`PROBE_ITERATIONS`
times, on its own hosts, with its own algorithm, alone. Its time beyond the model's for that
size, over the steps of its longest chain (a transfer waits for the one before it on the same
rank), is the job's latency per step. The run's figure is the median over the jobs; the
simulator's replay adds it before every step (or slice) a rank sends, and the jobs' model to
every transfer. It is the run's own figure, measured at its start, on its machine: a run on
an idle 64-core server measures less than one on 2 shared cores.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from testbed.core.experiment import AllReduceWorkload
from testbed.core.jobs import JobRun, ResolvedJob
from testbed.core.topology import FabricPlan
from workloads.model import job_model_s

PROBE_BYTES = 1024  # per rank: a step's bytes take microseconds, its delays and software ms
PROBE_ITERATIONS = 10


def probe_job(job: ResolvedJob) -> ResolvedJob | None:
    """The probe of ``job``: the same hosts and algorithm, :data:`PROBE_BYTES` per rank, as
    ``<name>-step-latency``; None for a job that is not a flat All-Reduce of two or more."""
    if job.workload.kind != "allreduce" or not job.flat or job.world < 2:
        return None
    return job.model_copy(update={
        "name": f"{job.name}-step-latency",
        "workload": AllReduceWorkload(sizes=[PROBE_BYTES], iterations=PROBE_ITERATIONS)})


def chain_steps(job: ResolvedJob) -> int:
    """The steps one rank goes through in an All-Reduce of ``job`` (each waits for the one
    before): its collective's steps."""
    collective = job.plugin(job.algorithm)
    return len(collective.transfers("AR", job.world, PROBE_BYTES))


def per_step_s(measured_s: float, model_s: float, steps: int) -> float:
    """What a step took beyond the model, on average over ``steps`` (never below 0)."""
    return max(0.0, (measured_s - model_s) / steps)


def measure(plan: FabricPlan, jobs: list[JobRun],
            run: Callable[[ResolvedJob], float]) -> dict[str, Any] | None:
    """Run each job's probe (``run(probe)`` gives its measured time in seconds) where the
    model covers it (:func:`workloads.model.job_model_s`: a leaf-spine ``plan``) and return
    ``{"per_job_s": {job: s}, "step_latency_s": median}``, or None when no job has one."""
    per_job = {}
    for job in jobs:
        if job.resolved is None or (probe := probe_job(job.resolved)) is None:
            continue
        model_s = job_model_s(probe, plan)
        if model_s is None:  # a fabric the flat model does not cover
            continue
        per_job[job.name] = per_step_s(run(probe), model_s[str(PROBE_BYTES)],
                                       chain_steps(probe))
    if not per_job:
        return None
    return {"per_job_s": {k: round(v, 6) for k, v in per_job.items()},
            "step_latency_s": round(statistics.median(per_job.values()), 6),
            "probe_bytes": PROBE_BYTES, "probe_iterations": PROBE_ITERATIONS}
