"""A job's training workload on its fabric: the replay's inputs from a resolved job, and the
iteration rows both backends write.

The job's logical dimensions become ASTRA-sim dimensions at the rate its hosts really have in
each (the fabric's ``mbit_s`` × ``goodput``, converted exactly to ASTRA-sim's GB/s of 2**30
bytes) with ``step_latency_s`` paid once per message (the system's ``endpoint-delay``); its
knobs become the system: ``chunks`` the dataset splits, ``order`` the intra-dimension policy,
``algorithm`` (a chunk schedule of the registry, as the job configured it; a flat job's none)
the inter-dimension one, ``dim_algorithms`` each
dimension's All-Reduce, Reduce-Scatter and All-Gather (All-to-All: direct on every dimension,
as all of the Themis artifact's systems run it), the workload's ``scheduling`` the policy
between collectives.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from testbed.core.astra_formats import AstraDim
from testbed.core.astra_units import ASTRA_GBYTE_S_IN_BIT_S
from testbed.core.jobs import ResolvedJob
from workloads.training.chakra import TraceResult, replay_trace
from workloads.training.exposure import exposed_per_dim
from workloads.training.library import ChakraTrace, comm_bytes, load, scaled
from workloads.training.model import ALLGATHER, ALLREDUCE, ALLTOALL, REDUCESCATTER, Workload
from workloads.training.platform import ReplaySystem
from workloads.training.replay import ReplayResult, replay

NS = 1e-9


def job_workload(job: ResolvedJob) -> Workload | ChakraTrace:
    """The job's training workload, scaled as its spec says."""
    w = job.workload
    return scaled(load(model=w.model, file=w.file), w.size_scale, w.compute_scale)


def job_platform(job: ResolvedJob, goodput: float = 1.0, step_latency_s: float = 0.0
                 ) -> tuple[tuple[AstraDim, ...], ReplaySystem]:
    """The network (one dimension per logical dimension of ``job``: its kind, and what a host
    has in it, as the job records them) and the system the job's replay runs on."""
    kinds = job.dim_kinds
    network = tuple(
        AstraDim(kind, size, rate_bps * goodput / ASTRA_GBYTE_S_IN_BIT_S)
        for kind, size, rate_bps in zip(kinds, job.dims, job.dim_host_rates_bps, strict=True))
    per_dim = tuple(job.dim_algorithms)
    alltoall = ("direct",) * len(kinds)
    system = ReplaySystem(
        splits=job.chunks, intra=job.order,
        inter=None if job.flat else job.algorithm,
        schedule=None if job.flat else job.plugin(job.algorithm),
        lifo=job.workload.scheduling == "lifo", localbw=True,
        endpoint_delay_ns=step_latency_s * 1e9,
        implementations={ALLREDUCE: per_dim, REDUCESCATTER: per_dim, ALLGATHER: per_dim,
                         ALLTOALL: alltoall})
    return network, system


def replay_job(job: ResolvedJob, goodput: float = 1.0, step_latency_s: float = 0.0,
               workload: Workload | ChakraTrace | None = None) -> ReplayResult | TraceResult:
    """Replay ``job``'s passes on its platform (:func:`job_platform`); a Chakra trace is
    replayed once (it is its own iteration). ``workload``: the job's, if already loaded
    (:func:`job_workload`)."""
    network, system = job_platform(job, goodput, step_latency_s)
    if workload is None:
        workload = job_workload(job)
    if isinstance(workload, ChakraTrace):
        return replay_trace(workload.nodes, network, system, workload.source)
    return replay(workload, network, system, passes=job.workload.passes)


def iteration_rows(result: ReplayResult | TraceResult, job: ResolvedJob,
                   workload: Workload | ChakraTrace, origin_s: float = 0.0
                   ) -> list[dict[str, Any]]:
    """One ``iterations`` row per pass (testbed.core.traces.ITERATION_SCHEMA, without the
    rank), times from ``origin_s``: the pass's time, its compute, and the communication it
    waited for, in all and per logical dimension (``exposed_dim``:
    :func:`workloads.training.exposure.exposed_per_dim`).

    A pass runs from the end of the one before to the end of its own backward pass, so it
    counts the communication its forward pass waits for (the previous pass's gradients); the
    last pass's own trailing collectives are the run's drain, not an iteration. A single
    pass is the whole run, to ASTRA-sim's ``all passes finished`` time; so is a Chakra
    trace, whose per-dimension breakdown is not made (``exposed_dim`` None)."""
    if isinstance(result, TraceResult):
        return [_trace_row(result, job, workload, origin_s)]
    ends = list(result.pass_end_ns)
    if len(ends) <= 1:
        ends = [result.finish_ns]
    computes = list(result.pass_compute_ns) or [result.compute_ns]
    rows = []
    start, done = Fraction(0), Fraction(0)
    name = job.workload.model or job.workload.file or "training"
    warmup = job.workload.warmup
    for i, (end, compute_total) in enumerate(zip(ends, computes, strict=True)):
        seconds = float(end - start) * NS
        compute = float(compute_total - done) * NS
        comm = sum(float(r.finished_ns - r.issued_ns) for r in result.collectives
                   if r.finished_ns is not None and start <= r.issued_ns < end) * NS
        rows.append({
            "iteration": i - warmup, "warmup": i < warmup, "model": name,
            "algorithm": job.algorithm, "transport": job.transport, "world": job.world,
            "buckets": sum(1 for r in result.collectives if start <= r.issued_ns < end),
            "bytes": comm_bytes(workload), "start": origin_s + float(start) * NS,
            "end": origin_s + float(end) * NS, "time": seconds, "compute": compute,
            "nominal_compute": compute, "backward_end": origin_s + float(end) * NS,
            "comm": comm, "exposed_comm": max(0.0, seconds - compute),
            "compute_share": compute / seconds if seconds > 0 else 0.0, "correct": True,
            "exposed_dim": [float(t) * NS for t in exposed_per_dim(
                result.waits, result.dim_spans, start, end)]})
        start, done = end, compute_total
    return rows


def _trace_row(result: TraceResult, job: ResolvedJob, workload: Workload | ChakraTrace,
               origin_s: float) -> dict[str, Any]:
    seconds, compute = float(result.finish_ns) * NS, float(result.compute_ns) * NS
    return {
        "iteration": 0, "warmup": False, "model": job.workload.model or job.workload.file,
        "algorithm": job.algorithm, "transport": job.transport, "world": job.world,
        "buckets": len(result.collectives), "bytes": comm_bytes(workload), "start": origin_s,
        "end": origin_s + seconds, "time": seconds, "compute": compute,
        "nominal_compute": compute, "backward_end": origin_s + seconds,
        "comm": sum(float(r.finished_ns - r.issued_ns) for r in result.collectives
                    if r.finished_ns is not None) * NS,
        "exposed_comm": max(0.0, seconds - compute),
        "compute_share": compute / seconds if seconds > 0 else 0.0, "correct": True,
        "exposed_dim": None}
