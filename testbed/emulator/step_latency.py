"""The workers' own latency per step of a flat collective, measured on the fabric before the
jobs (an experiment's ``measure_step_latency: true``).

The α-β model and the simulator give a step its path's link delays and its bytes at the
link's rate. The emulator adds what neither sees: each worker's send and receive overhead
(Python, the socket calls, the reduction), the switch's forwarding, and waits for a CPU when
more workers than cores wake at once. At small sizes that is most of a collective (on 8 hosts
of this 2-core machine, a 4 KiB ring took 14–22 ms more than predicted, with or without link
delays: BENCHMARKS.md, "`experiments/latency.yaml` on the emulator").

So each All-Reduce job first runs :data:`PROBE_BYTES` per rank, :data:`PROBE_ITERATIONS`
times, on its own hosts, with its own algorithm, alone. For a flat job, its time beyond the
model's for that size, over the steps of its longest chain (a transfer waits for the one
before it on the same rank), is the job's latency per step. A chunk-scheduled job (Themis),
which the model does not cover on a leaf-spine, gets the latency at which the simulator's time
for the same probe equals the measured one (:func:`calibrated_s`). The run's figure is the
median over the jobs; the simulator's replay adds it before every step (or slice) a rank
sends, and the jobs' model to every transfer. It is the run's own figure, measured at its
start, on its machine: a run on an idle 64-core server measures less than one on 2 shared
cores.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

from testbed.core.experiment import AllReduceWorkload
from testbed.core.jobs import JobRun, ResolvedJob
from testbed.core.topology import FabricPlan
from workloads.model import job_model_s

PROBE_BYTES = 1024  # per rank: a step's bytes take microseconds, its delays and software ms
PROBE_ITERATIONS = 10
CALIBRATION_S = 1e-3  # the second latency the simulator is run with, to find its slope

# (the job, its probe, a latency per step in s) -> the simulator's time for the probe, s
Simulate = Callable[[JobRun, ResolvedJob, float], float]


def probe_job(job: ResolvedJob) -> ResolvedJob | None:
    """The probe of ``job``: the same hosts and algorithm (and chunks, order, dimensions),
    :data:`PROBE_BYTES` per rank, as ``<name>-step-latency``; None for a job that is not an
    All-Reduce of two or more."""
    if job.workload.kind != "allreduce" or job.world < 2:
        return None
    return job.model_copy(update={
        "name": f"{job.name}-step-latency",
        "workload": AllReduceWorkload(sizes=[PROBE_BYTES], iterations=PROBE_ITERATIONS)})


def chain_steps(job: ResolvedJob) -> int:
    """The steps one rank goes through in an All-Reduce of ``job`` (each waits for the one
    before): its collective's steps."""
    return job.plugin(job.algorithm).step_count("AR", job.world)


def per_step_s(measured_s: float, model_s: float, steps: int) -> float:
    """What a step took beyond the model, on average over ``steps`` (never below 0)."""
    return max(0.0, (measured_s - model_s) / steps)


def calibrated_s(measured_s: float, simulate: Callable[[float], float]) -> float:
    """The latency per step at which ``simulate(latency_s)``, the simulator's time for a probe,
    equals its ``measured_s`` (never below 0). Each step of the probe's longest chain pays the
    latency once, so the simulated time grows in a line with it: two runs give the line."""
    base_s = simulate(0.0)
    slope = (simulate(CALIBRATION_S) - base_s) / CALIBRATION_S
    return max(0.0, (measured_s - base_s) / slope) if slope > 0 else 0.0


def measure(plan: FabricPlan, jobs: list[JobRun], run: Callable[[ResolvedJob], float],
            simulate: Simulate | None = None) -> dict[str, Any] | None:
    """Run each job's probe (``run(probe)`` gives its measured time in seconds) and return
    ``{"per_job_s": {job: s}, "step_latency_s": median, "against": {job: "model" or
    "simulator"}}``, or None when no job has one. A flat job is measured against the model
    (:func:`workloads.model.job_model_s`: a leaf-spine ``plan``); a job the model does not
    cover (a chunk-scheduled one), against the simulator (``simulate``), on a leaf-spine only;
    without ``simulate``, not measured."""
    per_job, against = {}, {}
    for job in jobs:
        if job.resolved is None or (probe := probe_job(job.resolved)) is None:
            continue
        model_s = job_model_s(probe, plan) if probe.flat else None
        if model_s is not None:
            per_job[job.name] = per_step_s(run(probe), model_s[str(PROBE_BYTES)],
                                           chain_steps(probe))
            against[job.name] = "model"
        elif simulate is not None and plan.kind == "leaf_spine":
            per_job[job.name] = calibrated_s(run(probe), partial(simulate, job, probe))
            against[job.name] = "simulator"
    if not per_job:
        return None
    return {"per_job_s": {k: round(v, 6) for k, v in per_job.items()},
            "step_latency_s": round(statistics.median(per_job.values()), 6),
            "against": against,
            "probe_bytes": PROBE_BYTES, "probe_iterations": PROBE_ITERATIONS}
