"""Queue disciplines of the cluster simulator: which waiting job the allocator tries next.

Pure algorithms, no I/O. A discipline only *orders*: :meth:`QueueDiscipline.next_job` looks at a
:class:`QueueView` and names the next waiting job to try, or None to wait for a job to end. The
simulator (:class:`testbed.sim.cluster.ClusterSimulation`) then asks the policy's allocator,
which alone decides whether the job fits (free hosts, and for vClos an isolated set of links:
a job can be refused for fragmentation while enough GPUs are free). A refused job is in
``view.refused`` until the next job ends, so a discipline never names it twice for one state.

Expected run time
    ``expected_run_s`` is :meth:`testbed.sim.traces.TraceJob.isolated_time`: the job's
    iterations × (compute + a contention-free ring All-Reduce of its gradients at the link
    rate), i.e. its time alone on an idle non-blocking fabric. It is the scheduler's estimate,
    known before placement; the simulated run time (placement, sharing, its own collective)
    can differ. A running job is expected to end at its start + ``expected_run_s``.

The gpu-count bound (docs/vclos-paper.md, "The bound")
    Proved for ``fifo`` only: under strict head-of-line FIFO, with the same jobs and run times
    no longer under gpu-count, every job waits and completes under ``--policy gpu-count`` no
    later than under any placement. The proof rests on both schedules starting jobs in the
    same (arrival) order; a discipline that reorders or backfills starts them in an order that
    depends on the schedule itself, so there gpu-count under the same discipline is a measured
    reference, not a proven bound, and the FIFO bound does not bound it either (reordering
    can wait less than any FIFO placement). Each discipline's docstring says which holds.

A plug-in: a subclass with ``name`` and :meth:`next_job`, registered in
:data:`testbed.core.registry.QUEUES` (at run time, or as a ``fabriclab.queues`` entry point).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class WaitingJob:
    """A queued job as a discipline sees it."""

    job_id: str
    gpus: int
    arrival_s: float
    expected_run_s: float
    grad_bytes: int


@dataclass(frozen=True)
class RunningJob:
    """A running job: its GPUs and when it is expected to end."""

    gpus: int
    expected_end_s: float


@dataclass(frozen=True)
class QueueView:
    """What a discipline decides on: ``waiting`` in arrival order, the running jobs, the GPUs
    free now, and the waiting jobs the allocator refused since the last job ended."""

    now_s: float
    total_gpus: int
    free_gpus: int
    waiting: Sequence[WaitingJob]
    running: Collection[RunningJob]
    refused: Collection[str]


class QueueDiscipline:
    """Base of a discipline: ``name`` and :meth:`next_job`."""

    name = ""
    reference = False  # the discipline the others are compared against (fifo)

    def next_job(self, view: QueueView) -> WaitingJob | None:
        """The waiting job to try next, or None: nothing more starts until a job ends."""
        raise NotImplementedError


class HeadOfLine(QueueDiscipline):
    """A strict priority queue: only the waiting job first by :meth:`key` may start; while the
    allocator refuses it, every job waits (ties: arrival order)."""

    def key(self, job: WaitingJob, view: QueueView) -> float:
        raise NotImplementedError

    def next_job(self, view: QueueView) -> WaitingJob | None:
        if not view.waiting:
            return None
        head = min(view.waiting, key=lambda job: self.key(job, view))  # first of equals
        return None if head.job_id in view.refused else head


class Fifo(QueueDiscipline):
    """``fifo``, the default: arrival order, head-of-line; nothing behind a refused head starts.

    Bound: the gpu-count bound is proved for this discipline (docs/vclos-paper.md, "The
    bound"): same jobs, run times no longer under gpu-count, and gpu-count also under fifo."""

    name = "fifo"
    reference = True

    def next_job(self, view: QueueView) -> WaitingJob | None:
        if not view.waiting or view.waiting[0].job_id in view.refused:
            return None
        return view.waiting[0]


class FewestGpusFirst(HeadOfLine):
    """``fewest-gpus-first``: the waiting job with the fewest GPUs, head-of-line (RapidNetSim's
    ``few_GPU_first``). Bound: none proved; gpu-count under it is a reference only, and a
    large job can wait as long as smaller ones keep arriving."""

    name = "fewest-gpus-first"

    def key(self, job: WaitingJob, view: QueueView) -> float:
        return job.gpus


class ShortestJobFirst(HeadOfLine):
    """``shortest-job-first``: the shortest expected run time first, head-of-line. Bound: none
    proved; gpu-count under it is a reference only."""

    name = "shortest-job-first"

    def key(self, job: WaitingJob, view: QueueView) -> float:
        return job.expected_run_s


class SmallestModelFirst(HeadOfLine):
    """``smallest-model-first``: the fewest gradient bytes first, head-of-line (RapidNetSim's
    ``small_task_first``, which orders by its jobs' ``model_size``, the collective's bytes,
    not by run time). Bound: none proved; gpu-count under it is a reference only."""

    name = "smallest-model-first"

    def key(self, job: WaitingJob, view: QueueView) -> float:
        return job.grad_bytes


class DynamicMatching(HeadOfLine):
    """``dynamic-matching`` (RapidNetSim's ``dynamic_matching``): fewest GPUs first while more
    than ``threshold`` (6) jobs wait, else arrival order; head-of-line. RapidNetSim recomputes
    these keys inside its heap without restoring the heap's order, so its pick can differ from
    this exact one. Bound: with at most 6 waiting it is fifo, but the proof needs fifo
    throughout: none proved; gpu-count under it is a reference only."""

    name = "dynamic-matching"
    threshold = 6

    def key(self, job: WaitingJob, view: QueueView) -> float:
        return job.gpus if len(view.waiting) > self.threshold else 0.0


class FirstFit(QueueDiscipline):
    """``first-fit``: the first waiting job, in arrival order, that the allocator has not
    refused and that has no more GPUs than are free ("any job that fits"). Bound: none; it
    can wait less than the FIFO bound, and large jobs can starve."""

    name = "first-fit"

    def next_job(self, view: QueueView) -> WaitingJob | None:
        return next((job for job in view.waiting if job.job_id not in view.refused
                     and job.gpus <= view.free_gpus), None)


class EasyBackfill(QueueDiscipline):
    """``easy-backfill`` (EASY): the head in arrival order starts if it fits. While it is
    refused it holds a reservation at the *shadow time*, the earliest time enough GPUs are
    free for it if running jobs end when expected; a later job may start now if it fits and
    either is expected to end by the shadow time, or needs no more than the *extra* GPUs (those
    free at the shadow time beyond the head's). When the head is refused with enough GPUs
    free (fragmentation), the shadow time is now and only the extra GPUs can be used.

    The reservation counts GPUs only, with expected run times (:mod:`testbed.sim.queues`): a
    backfilled job can still delay the head where the allocator needs particular hosts or
    links (vClos, pods, whole servers) or where jobs outlast their estimate.
    Bound: none; backfill can wait less than the FIFO bound (the proof needs fifo), and
    gpu-count under easy-backfill is a reference only."""

    name = "easy-backfill"

    def next_job(self, view: QueueView) -> WaitingJob | None:
        if not view.waiting:
            return None
        head = view.waiting[0]
        if head.job_id not in view.refused:
            return head
        shadow_s, extra_gpus = reservation(head.gpus, view)
        for job in view.waiting[1:]:
            if job.job_id in view.refused or job.gpus > view.free_gpus:
                continue
            if view.now_s + job.expected_run_s <= shadow_s or job.gpus <= extra_gpus:
                return job
        return None


def reservation(gpus: int, view: QueueView) -> tuple[float, int]:
    """The shadow time for a job of ``gpus`` (the earliest time that many GPUs are free if
    running jobs end when expected) and the GPUs free then beyond it; (inf, 0) if never."""
    free = view.free_gpus
    if free >= gpus:
        return view.now_s, free - gpus
    for job in sorted(view.running, key=lambda r: r.expected_end_s):
        free += job.gpus
        if free >= gpus:
            return max(view.now_s, job.expected_end_s), free - gpus
    return math.inf, 0


FIFO = Fifo()
FEWEST_GPUS_FIRST = FewestGpusFirst()
SHORTEST_JOB_FIRST = ShortestJobFirst()
SMALLEST_MODEL_FIRST = SmallestModelFirst()
DYNAMIC_MATCHING = DynamicMatching()
FIRST_FIT = FirstFit()
EASY_BACKFILL = EasyBackfill()
