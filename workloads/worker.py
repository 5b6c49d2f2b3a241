"""One collective worker process: ``python -m workloads.worker CONFIG.json``.

The worker listens on its address of every dimension, connects to its ring neighbours
(rendezvous with retries until ``timeout``), then runs the workload on those persistent
connections: for every size, ``warmup`` + ``iterations`` All-Reduces of a float32 buffer.
The All-Reduce is in place; with the workload's ``out_of_place`` every size first runs out of
place too (the input stays in its own buffer, the result lands in a second one), as
nccl-tests does: the input is copied into the result buffer and reduced there in place, the
copy inside the timed region, and the check also asks that the input was left untouched.

Algorithms: a collective of the registry (``ring``, ``halving-doubling``) runs flat over all
ranks, positions in rank order, carried on every rank's dimension-0 address (``dims`` only
names the addresses then); a chunk schedule (``baseline``, ``themis``) runs the chunked
hierarchical All-Reduce of :mod:`workloads.hierarchical` with that chunk plan, every dimension
running the collective ``dim_algorithm``.

All-to-all mode (``workload.kind: alltoall``, ``algorithm`` one of
:data:`testbed.core.registry.ALLTOALLS`): every size is the per-rank buffer in bytes, split
into ``world_size`` equal blocks; every iteration fills the send buffer with
:func:`workloads.alltoall.fill_blocks` (block ``j`` of rank ``i`` encodes ``(i, j)``), runs the
algorithm into a second buffer (out of place: the local block's copy is timed) and checks
every received block against what its sender put there. Its barrier is a one-element-per-rank
all-to-all (every rank hears from every other before leaving).

Data: rank ``r`` holds ``(r+1)·(i mod 251 + 1)`` at index ``i``, so the exact result is
``W(W+1)/2·(i mod 251 + 1)``, exact in float32 for any realistic world size ``W``; every
iteration is checked. On failure the worker writes ``error-rank{r}.json`` (kind, message,
time) to ``out_dir``, prints the message and exits 1.

DNN mode (``dnn`` set; it takes precedence over ``workload``, whose sizes are then ignored and
whose ``iterations``/``warmup`` apply unless ``dnn`` sets its own): replay a model's training
iterations (:mod:`workloads.dnn`): forward compute, then per gradient bucket its backward
compute and an asynchronous All-Reduce of the bucket on a communication thread (FIFO, one
collective at a time, the same order on every rank), overlapping with the following compute
as DDP does; the iteration ends when every bucket is reduced. Each iteration adds a row to
``iterations-rank{r}.parquet`` and each bucket one to ``buckets-rank{r}.parquet``, besides the
usual phase and collective rows.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import sys
import threading
import time
import traceback
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from testbed.core.errors import FabricLabError
from testbed.core.formulas import ALLTOALL, TCP_GOODPUT
from testbed.core.jobs import ResolvedJob
from testbed.core.ports import seeded_source_ports
from testbed.core.traces import bandwidths
from workloads.alltoall import PATTERN_PERIOD, AllToAll, fill_blocks, received_correctly
from workloads.collectives import Collective, Group
from workloads.dnn import DnnWorkload
from workloads.hierarchical import (
    PhaseRecord,
    Schedule,
    Topology,
    group_links,
    run_hierarchical,
    schedule,
    trace_sent_bytes,
)
from workloads.themis import ChunkPlan, plan_with, split_sizes
from workloads.traces import TraceWriter
from workloads.training.emulated import BYTES_PER_VALUE, PassPlan, plan_pass
from workloads.training.exposure import exposed_per_dim, phase_spans
from workloads.training.jobs import job_platform, job_workload
from workloads.training.library import ChakraTrace
from workloads.training.model import Workload
from workloads.training.realtime import Compute, PassLoop, RealTime, ThreadEngine, TraceRealTime
from workloads.transports import (
    CollectiveTimeout,
    Endpoint,
    LinkSpec,
    Transport,
)

CHECK_BLOCK = 1 << 20


class Address(BaseModel):
    """Where a rank listens for one dimension."""

    model_config = ConfigDict(extra="forbid")
    ip: str
    port: int = Field(ge=1, le=65535)


class WorkerConfig(BaseModel):
    """Everything one rank needs: the job it belongs to (the :class:`ResolvedJob` the run
    recorded; every rank of a job gets the same one), where every rank listens, and this
    worker's own runtime options."""

    model_config = ConfigDict(extra="forbid")
    run_id: str
    rank: int = Field(ge=0)
    job: ResolvedJob
    addresses: list[list[Address]]  # [rank][dimension]
    max_active: int = Field(default=1, ge=1)  # chunk phases in flight per dimension
    out_of_place: bool = False  # every All-Reduce size also out of place first (nccl-tests)
    timeout: float = Field(default=30.0, gt=0)  # any single wait (rendezvous, transfer)
    collective_timeout: float = Field(default=600.0, gt=0)  # one whole collective
    out_dir: str
    stall: bool = False  # testing: connect, then never take part

    @model_validator(mode="after")
    def _shape(self) -> WorkerConfig:
        job = self.job
        if self.rank >= job.world:
            raise ValueError(f"rank {self.rank} is not below the job's {job.world} ranks")
        if len(self.addresses) != job.world or any(
            len(a) != len(job.dims) for a in self.addresses
        ):
            raise ValueError("addresses must list, for every rank, one address per dimension")
        if job.workload.kind == "command":
            raise ValueError("job.workload: a command job runs its own program, not workers")
        return self

    @property
    def dnn(self) -> DnnWorkload | None:
        """The DNN workload the worker replays, or None for sizes."""
        w = self.job.workload
        return DnnWorkload.model_validate(w.model_dump()) if w.kind == "dnn" else None

    def collective(self) -> Collective:
        """The collective of the flat group, or of every dimension under a schedule."""
        job = self.job
        return job.plugin(job.algorithm if job.flat else job.uniform_dim_algorithm())

    def alltoall_algorithm(self) -> AllToAll:
        """The all-to-all algorithm of an ``alltoall`` worker."""
        return self.job.plugin(self.job.algorithm)

    def flat_roles(self) -> list[tuple[int, int]]:
        """This rank's link roles in the flat group (its all-to-all's or its collective's)."""
        algo = (self.alltoall_algorithm() if self.job.collective_kind == ALLTOALL
                else self.collective())
        return algo.link_roles(self.rank, self.job.world)

    def endpoint(self, rank: int, dim: int) -> Endpoint:
        a = self.addresses[rank][dim]
        return Endpoint(a.ip, a.port)


def link_plan(cfg: WorkerConfig) -> tuple[dict[int, Endpoint], list[LinkSpec]]:
    """The channels this rank listens on and the links its collective needs (see
    :func:`_links`), each connecting from its seeded source port if the job has a
    ``source_port_seed``."""
    listen, specs = _links(cfg)
    seed = cfg.job.source_port_seed
    if seed is None or not specs:
        return listen, specs
    ports = seeded_source_ports(seed, cfg.job.name, cfg.rank, len(specs))
    return listen, [replace(s, sport=p) for s, p in zip(specs, ports, strict=True)]


def _links(cfg: WorkerConfig) -> tuple[dict[int, Endpoint], list[LinkSpec]]:
    """The channels this rank listens on and the links its collective needs: one per
    :meth:`~workloads.collectives.Collective.link_roles` entry, in the flat group (channel 0,
    positions = ranks) or in every dimension's group, for each of ``max_active`` slots
    (link slot ``slot·k + i`` for role ``i`` of ``k``)."""
    me = cfg.rank
    if cfg.job.flat:
        roles = cfg.flat_roles()
        if not roles:
            return {}, []
        local = cfg.endpoint(me, 0)
        return {0: local}, [LinkSpec(0, i, nxt, prev, local, cfg.endpoint(nxt, 0))
                            for i, (nxt, prev) in enumerate(roles)]
    coll = cfg.collective()
    topo = Topology(tuple(cfg.job.dims))
    listen: dict[int, Endpoint] = {}
    specs = []
    for d, n in enumerate(cfg.job.dims):
        if n == 1:
            continue
        listen[d] = local = cfg.endpoint(me, d)
        pos = topo.coords(me)[d]
        roles = [(topo.member(me, d, nxt), topo.member(me, d, prev))
                 for nxt, prev in coll.link_roles(pos, n)]
        for slot in range(cfg.max_active):
            specs.extend(LinkSpec(d, slot * len(roles) + i, nxt, prev, local,
                                  cfg.endpoint(nxt, d))
                         for i, (nxt, prev) in enumerate(roles))
    return listen, specs


# A barrier's start time travels as float32 elements that every rank but rank 0 leaves at 0,
# so their sum is exact: whole seconds in 65536-second parts, then microseconds (each part
# below 2**24, which float32 holds exactly).
START_PARTS = ("seconds_high", "seconds_low", "microseconds")
BARRIER_SLACK_S = 0.001
MAX_START_WAIT_S = 10.0  # a start further ahead than this is not waited for


def start_time_parts(t_s: float) -> np.ndarray:
    """``t_s`` (seconds on the monotonic clock) as :data:`START_PARTS`."""
    seconds, micro = divmod(round(t_s * 1e6), 1_000_000)
    return np.array([seconds // 65536, seconds % 65536, micro], dtype=np.float32)


def start_time_of(parts: np.ndarray) -> float:
    """The time :func:`start_time_parts` encoded (0.0 from all zeros: no start set)."""
    high, low, micro = (int(x) for x in parts)
    return high * 65536 + low + micro / 1e6


def wait_until(t_s: float) -> None:
    """Sleep until ``t_s`` on the monotonic clock (at once if it is past or implausibly far)."""
    if t_s - time.monotonic() > MAX_START_WAIT_S:
        return
    while (left := t_s - time.monotonic()) > 0:
        time.sleep(left)


def fill(buf: np.ndarray, rank: int, base: np.ndarray) -> None:
    """Rank ``rank``'s input: ``(rank+1)·base``."""
    np.multiply(base[: buf.size], rank + 1, out=buf)


def matches(buf: np.ndarray, factor: int, base: np.ndarray, tmp: np.ndarray) -> bool:
    """Whether ``buf`` is exactly ``factor·base`` (compared block by block in ``tmp``)."""
    for lo in range(0, buf.size, CHECK_BLOCK):
        hi = min(lo + CHECK_BLOCK, buf.size)
        want = tmp[: hi - lo]
        np.multiply(base[lo:hi], factor, out=want)
        if not np.array_equal(buf[lo:hi], want):
            return False
    return True


def check(buf: np.ndarray, world: int, base: np.ndarray, tmp: np.ndarray) -> bool:
    """Whether ``buf`` is exactly the sum of every rank's input."""
    return matches(buf, world * (world + 1) // 2, base, tmp)


class Worker:
    """A connected rank that can run All-Reduces on its persistent links."""

    def __init__(self, cfg: WorkerConfig) -> None:
        self.cfg = cfg
        self.topo = Topology(tuple(cfg.job.dims))
        self.transport: Transport = cfg.job.plugin(cfg.job.transport)(cfg.rank, cfg.timeout)
        self.coll = 0
        self._listening = False
        self._schedules: dict[int, tuple[list, Schedule]] = {}
        self._barrier_s: float | None = None  # rank 0: how long its last barrier took

    def listen(self) -> None:
        """Listen on this rank's address of every dimension it uses."""
        self.transport.listen(link_plan(self.cfg)[0])
        self._listening = True

    def connect(self) -> None:
        """Rendezvous with the ring neighbours (raises RendezvousError at the deadline)."""
        if not self._listening:
            self.listen()
        self.transport.connect(link_plan(self.cfg)[1], time.monotonic() + self.cfg.timeout)

    def _plan(self, count: int, chunks: int) -> tuple[list, Schedule]:
        key = (count, chunks)
        if key not in self._schedules:
            cfg = self.cfg
            bws = cfg.job.dim_rates_bps  # one per dimension: the job contract checks it
            plans = plan_with(cfg.job.plugin(cfg.job.algorithm), cfg.job.dims, bws, count * 4,
                              cfg.job.chunk_count(count, chunks), align=4,
                              semantics=cfg.job.semantics)
            self._schedules[key] = (plans, schedule(plans, cfg.job.dims, bws, cfg.job.order,
                                                    cfg.max_active, cfg.collective(),
                                                    semantics=cfg.job.semantics))
        return self._schedules[key]

    def allreduce(self, buf: np.ndarray, chunks: int | None = None, record=None,
                  variables: list[tuple[int, int, int]] | None = None) -> int:
        """All-Reduce ``buf`` (float32) in place across all ranks; returns the collective id.
        ``variables`` (a DNN bucket's: global index, first, end element) go to a flat job's
        collective, which may place them (``ps``)."""
        cfg = self.cfg
        coll = self.coll
        self.coll += 1
        links = self.transport.links
        collective = cfg.collective()
        if cfg.job.flat:
            world = cfg.job.world
            group = Group(cfg.rank, world, group_links(links, 0, 0, collective.link_count(world)))
            start = time.monotonic()
            if variables is None:
                collective.all_reduce(group, buf, coll)
            else:
                collective.all_reduce_variables(group, buf, coll, variables)
            if record is not None and world > 1:
                record(PhaseRecord(coll, 0, 0, 0, "AR", buf.nbytes, start, time.monotonic(),
                                   world, trace_sent_bytes(collective, "AR", world, buf.nbytes)))
            return coll
        plans, sched = self._plan(buf.size, chunks or cfg.job.chunks)
        run_hierarchical(
            buf, coll, plans, sched, self.topo, cfg.rank, links,
            deadline=time.monotonic() + cfg.collective_timeout,
            abort=self.transport.abort, record=record, collective=collective,
        )
        return coll

    def alltoall(self, send: np.ndarray, recv: np.ndarray, record=None) -> int:
        """All-to-all across all ranks: block ``j`` of ``send`` to rank ``j``, rank ``j``'s
        block for this rank into block ``j`` of ``recv``; returns the collective id."""
        cfg = self.cfg
        coll = self.coll
        self.coll += 1
        algo = cfg.alltoall_algorithm()
        world = cfg.job.world
        group = Group(cfg.rank, world,
                      group_links(self.transport.links, 0, 0, algo.link_count(world)))
        start = time.monotonic()
        algo.run(group, send, recv, coll)
        if record is not None and world > 1:
            record(PhaseRecord(coll, 0, 0, 0, "A2A", send.nbytes, start, time.monotonic(),
                               world, round(algo.sent_bytes(world, send.nbytes))))
        return coll

    def barrier(self) -> None:
        """No rank leaves before every rank has entered, and every rank leaves at one moment.

        An All-Reduce worker's barrier is a small All-Reduce that carries rank 0's start time
        (:func:`start_time_parts`); every rank then waits for that time on the monotonic clock,
        which every emulated host shares (one kernel). Without it the ranks would start when
        the barrier's own collective let each go: on a ring with 40 ms a hop, up to 50 ms
        apart, all of it counted in the next collective's time. Rank 0 sets the start at its
        entry plus twice its previous barrier's time (its first barrier sets none). An
        all-to-all worker's barrier is a one-element-per-rank all-to-all."""
        if self.cfg.job.collective_kind == ALLTOALL:
            n = self.cfg.job.world
            self.alltoall(np.zeros(n, dtype=np.float32), np.empty(n, dtype=np.float32))
            return
        entered = time.monotonic()
        parts = np.zeros(len(START_PARTS), dtype=np.float32)
        if self.cfg.rank == 0 and self._barrier_s is not None:
            parts[:] = start_time_parts(entered + 2 * self._barrier_s + BARRIER_SLACK_S)
        self.allreduce(parts, chunks=1)
        self._barrier_s = time.monotonic() - entered
        wait_until(start_time_of(parts))

    def run(self, trace: TraceWriter) -> float:
        """Run this worker's workload (its DNN, training or collective loop), then meet every
        rank at a last barrier; return when it left that barrier (monotonic seconds).

        Without the last barrier, a rank done first writes its traces and exits while the
        others still run the last collective, and on a host with fewer cores than ranks that
        work is counted in their time: a step-latency probe's last 1 KiB All-Reduce took
        30-40 ms where the nine before it took 3-8 (8 ranks on 2 cores, BENCHMARKS.md)."""
        if self.cfg.dnn is not None:
            self.run_dnn(trace)
        elif self.cfg.job.workload.kind == "training":
            self.run_training(trace)
        else:
            self.run_workload(trace)
        self.barrier()
        return time.monotonic()

    def run_workload(self, trace: TraceWriter) -> None:
        """Run every size of the workload, recording phases and collectives in ``trace``."""
        cfg = self.cfg
        w = cfg.job.workload
        assert w.kind != "dnn", "this worker has a dnn workload: use run_dnn"
        if w.kind == ALLTOALL:
            self.run_alltoall(trace)
            return
        max_count = max(w.sizes) // 4
        base = (np.arange(max_count) % PATTERN_PERIOD + 1).astype(np.float32)
        region = np.empty(max_count, dtype=np.float32)  # registered once, reused for all sizes
        inputs = np.empty(max_count if cfg.out_of_place else 0, dtype=np.float32)
        tmp = np.empty(min(max_count, CHECK_BLOCK), dtype=np.float32)
        for size in w.sizes:
            count = size // 4
            buf, src = region[:count], inputs[:count]
            for in_place in (False, True) if cfg.out_of_place else (True,):
                for it in range(w.warmup + w.iterations):
                    fill(buf if in_place else src, cfg.rank, base)
                    self.barrier()
                    phases: list[PhaseRecord] = []
                    cost = self._cost()
                    start = time.monotonic()
                    if not in_place:
                        np.copyto(buf, src)
                    coll = self.allreduce(buf, record=phases.append)
                    seconds = time.monotonic() - start
                    cost = self._cost(cost)
                    ok = check(buf, cfg.job.world, base, tmp) and (
                        in_place or matches(src, cfg.rank + 1, base, tmp))
                    self._trace_collective(trace, coll, it - w.warmup, it < w.warmup, phases,
                                           count, start, seconds, ok, in_place, cost)
                    trace.maybe_flush()

    def run_alltoall(self, trace: TraceWriter) -> None:
        """Every size of an all-to-all workload, ``warmup + iterations`` times, each checked
        block by block (see the module docstring)."""
        cfg = self.cfg
        w = cfg.job.workload
        assert w.kind == ALLTOALL
        max_count = max(w.sizes) // 4
        send_region = np.empty(max_count, dtype=np.float32)  # registered once, reused
        recv_region = np.empty(max_count, dtype=np.float32)
        n = cfg.job.world
        for size in w.sizes:
            count = size // 4
            send, recv = send_region[:count], recv_region[:count]
            fill_blocks(send, cfg.rank, n)
            for it in range(w.warmup + w.iterations):
                recv.fill(-1.0)  # no block passes the check unless it arrived
                self.barrier()
                phases: list[PhaseRecord] = []
                cost = self._cost()
                start = time.monotonic()
                coll = self.alltoall(send, recv, record=phases.append)
                seconds = time.monotonic() - start
                cost = self._cost(cost)
                ok = received_correctly(recv, cfg.rank, n)
                self._trace_collective(trace, coll, it - w.warmup, it < w.warmup, phases,
                                       count, start, seconds, ok, False, cost)
                trace.maybe_flush()

    def _cost(self, since: tuple[float, int] | None = None) -> tuple[float, int]:
        """This process's CPU seconds and its transport's copied bytes so far, or (``since``
        given) since then."""
        now = (time.process_time(), self.transport.copied_bytes())
        return now if since is None else (now[0] - since[0], now[1] - since[1])

    def _trace_collective(self, trace: TraceWriter, coll: int, iteration: int, warm: bool,
                          phases: list[PhaseRecord], count: int, start: float, seconds: float,
                          ok: bool, in_place: bool = True,
                          cost: tuple[float, int] | None = None) -> None:
        """One collective's phase rows and its collective row (``cost``: its CPU seconds and
        copied bytes, where measured)."""
        cfg = self.cfg
        common = {"run_id": cfg.run_id, "job_id": cfg.job.name, "rank": cfg.rank,
                  "coll": coll, "iteration": iteration, "warmup": warm}
        for p in phases:
            trace.phases.append({
                **common, "chunk": p.chunk, "phase": p.phase, "dim": p.dim,
                "op": p.op, "bytes": p.nbytes, "start": p.start, "end": p.end,
                "group": p.group, "sent_bytes": p.sent_bytes,
            })
        algbw, busbw = bandwidths(count * 4, seconds, cfg.job.world, cfg.job.collective_kind)
        trace.collectives.append({
            **common, "size": count * 4, "count": count, "world": cfg.job.world,
            "collective": cfg.job.collective_kind, "algorithm": cfg.job.algorithm,
            "transport": cfg.job.transport,
            "chunks": cfg.job.chunk_count(count),
            "start": start, "time": seconds, "algbw": algbw, "busbw": busbw,
            "correct": ok, "in_place": in_place,
            "cpu": cost[0] if cost else None, "copied_bytes": cost[1] if cost else None,
        })

    def run_dnn(self, trace: TraceWriter) -> None:
        """Replay the configured model's training iterations (see the module docstring).

        Per iteration: every bucket is filled with this rank's input and the ranks meet at a
        barrier (neither is timed); then forward compute, then per bucket its backward compute
        and its hand-over to the communication thread; the iteration ends when the last bucket
        is reduced. Every bucket's sum is checked after the iteration.
        """
        cfg = self.cfg
        d = cfg.dnn
        assert d is not None, "this worker has no dnn workload"
        iterations, warmup = d.iterations, d.warmup
        prof = d.profile()
        counts = [b.bytes // 4 for b in prof.buckets]
        max_count = max(counts)
        base = (np.arange(max_count) % PATTERN_PERIOD + 1).astype(np.float32)
        region = np.empty(sum(counts), dtype=np.float32)  # all gradients, bucket after bucket
        bounds = np.cumsum([0, *counts]).tolist()
        bufs = [region[lo:hi] for lo, hi in itertools.pairwise(bounds)]
        variables = [b.variable_bounds(n) for b, n in zip(prof.buckets, counts, strict=True)]
        tmp = np.empty(min(max_count, CHECK_BLOCK), dtype=np.float32)
        nominal = prof.compute_s
        comm = _BucketComm(self)
        try:
            for it in range(warmup + iterations):
                warm = it < warmup
                iteration = it - warmup
                for buf in bufs:
                    fill(buf, cfg.rank, base)
                self.barrier()
                start = time.monotonic()
                clock = Compute(d.compute)
                clock.spend(prof.forward_s)
                ready = []
                for i, bucket in enumerate(prof.buckets):
                    clock.spend(bucket.backward_s)
                    ready.append(time.monotonic())
                    comm.submit(i, bufs[i], variables[i])
                backward_end = time.monotonic()
                done = sorted((comm.result() for _ in bufs), key=lambda r: r.index)
                end = max(backward_end, *(r.end for r in done))
                oks = [check(buf, cfg.job.world, base, tmp) for buf in bufs]
                for r, ok, t_ready, bucket in zip(done, oks, ready, prof.buckets, strict=True):
                    self._trace_collective(trace, r.coll, iteration, warm, r.phases,
                                           counts[r.index], r.start, r.end - r.start, ok)
                    trace.buckets.append({
                        "run_id": cfg.run_id, "job_id": cfg.job.name, "rank": cfg.rank,
                        "iteration": iteration, "warmup": warm, "bucket": r.index,
                        "coll": r.coll, "bytes": bucket.bytes, "backward": bucket.backward_s,
                        "ready": t_ready, "start": r.start, "end": r.end, "correct": ok,
                    })
                seconds = end - start
                compute = clock.spent
                trace.iterations.append({
                    "run_id": cfg.run_id, "job_id": cfg.job.name, "rank": cfg.rank,
                    "iteration": iteration, "warmup": warm, "model": prof.name,
                    "algorithm": cfg.job.algorithm, "transport": cfg.job.transport,
                    "world": cfg.job.world, "buckets": len(bufs), "bytes": prof.total_bytes,
                    "start": start, "end": end, "time": seconds, "compute": compute,
                    "nominal_compute": nominal, "backward_end": backward_end,
                    "comm": sum(r.end - r.start for r in done),
                    "exposed_comm": max(0.0, seconds - compute),
                    "compute_share": compute / seconds if seconds > 0 else 0.0,
                    "correct": all(oks),
                })
                trace.maybe_flush()
        except BaseException:
            comm.stop(wait=False)
            raise
        comm.stop(wait=True)

    def training_plan(self) -> tuple[Workload | ChakraTrace, PassPlan]:
        """The job's training workload (or Chakra trace), scaled, and the pass the model plans
        for it (:mod:`workloads.training.emulated`); every rank computes the same."""
        cfg = self.cfg
        job = cfg.job
        assert job.workload.kind == "training", "this worker has no training workload"
        workload = job_workload(job)
        network, system = job_platform(job, TCP_GOODPUT)
        return workload, plan_pass(workload, network, system)

    def run_training(self, trace: TraceWriter) -> None:
        """Replay the job's training workload, pass by pass (docs/workload-replay.md).

        Per pass: every collective's buffer is filled with this rank's input and the ranks
        meet at a barrier (neither is timed); then the workload's loop runs in real time
        (:class:`~workloads.training.realtime.RealTime`; a Chakra trace's nodes:
        :class:`~workloads.training.realtime.TraceRealTime`) while a communication thread runs
        every collective's chunks over the job's dimensions in the model's order; the pass
        ends when its last collective is done. Every collective's sum is checked after it.
        """
        cfg = self.cfg
        w = cfg.job.workload
        workload, plan = self.training_plan()
        counts = [c.size_bytes // BYTES_PER_VALUE for c in plan.collectives]
        region = np.empty(sum(counts), dtype=np.float32)
        bounds = np.cumsum([0, *counts]).tolist()
        bufs = [region[lo:hi] for lo, hi in itertools.pairwise(bounds)]
        base = (np.arange(max(counts, default=1)) % PATTERN_PERIOD + 1).astype(np.float32)
        tmp = np.empty(min(max(counts, default=1), CHECK_BLOCK), dtype=np.float32)
        chunks: list[ChunkPlan] = []
        for c, count in zip(plan.collectives, counts, strict=True):
            sizes = split_sizes(count * BYTES_PER_VALUE, len(c.chunk_ids), BYTES_PER_VALUE)
            chunks += [ChunkPlan(cid, size, ()) for cid, size in zip(c.chunk_ids, sizes,
                                                                     strict=True)]
        sched = Schedule(plan.chunks, plan.sequences)
        factors = [self._group_sum(c.dims) for c in plan.collectives]
        name = w.model or Path(w.file or "workload").name
        dims = len(plan.model.dim_busy_ns)  # the job's logical dimensions
        for it in range(w.passes):
            warm, iteration = it < w.warmup, it - w.warmup
            for buf in bufs:
                fill(buf, cfg.rank, base)
            self.barrier()
            tag = self.coll
            ids = list(range(tag + 1, tag + 1 + len(counts)))
            self.coll = tag + 1 + len(counts)
            engine = ThreadEngine(plan, partial(
                run_hierarchical, region, tag, chunks, sched, self.topo, cfg.rank,
                self.transport.links, time.monotonic() + cfg.collective_timeout,
                self.transport.abort, collective=cfg.collective()))
            timeout_s = cfg.collective_timeout + cfg.timeout
            runner: PassLoop = (
                TraceRealTime(workload.nodes, plan, engine, Compute(w.compute),
                              timeout_s=timeout_s) if isinstance(workload, ChakraTrace)
                else RealTime(workload, plan, engine, Compute(w.compute), timeout_s=timeout_s))
            engine.start(runner)
            try:
                res = runner.run()
            except BaseException:
                self.transport.abort()  # the engine's thread stops at once; this error counts
                engine.thread.join(cfg.timeout)
                raise
            engine.join(cfg.collective_timeout + cfg.timeout)
            oks = [matches(buf, f, base, tmp) for buf, f in zip(bufs, factors, strict=True)]
            for key, times in enumerate(res.collectives):
                phases = [replace(p, coll=ids[key]) for p in engine.phases[key]]
                start = times.issued if times.issued is not None else res.start
                end = times.finished if times.finished is not None else start
                self._trace_collective(trace, ids[key], iteration, warm, phases, counts[key],
                                       start, end - start, oks[key])
            seconds = res.time_s
            trace.iterations.append({
                "run_id": cfg.run_id, "job_id": cfg.job.name, "rank": cfg.rank,
                "iteration": iteration, "warmup": warm, "model": name,
                "algorithm": cfg.job.algorithm, "transport": cfg.job.transport,
                "world": cfg.job.world, "buckets": len(counts), "bytes": plan.total_bytes,
                "start": res.start, "end": res.end, "time": seconds,
                "compute": res.compute_s,
                "nominal_compute": float(plan.model.compute_ns) / 1e9,
                "backward_end": res.compute_end,
                "comm": sum((t.finished or 0.0) - (t.issued or 0.0) for t in res.collectives),
                "exposed_comm": res.exposed_s,
                "compute_share": res.compute_s / seconds if seconds > 0 else 0.0,
                "correct": all(oks),
                "exposed_dim": None if isinstance(workload, ChakraTrace) else exposed_per_dim(
                    res.waits, phase_spans((p for ps in engine.phases for p in ps), dims),
                    res.start, res.end),
            })
            trace.maybe_flush()

    def _group_sum(self, dims: tuple[int, ...]) -> int:
        """Σ (r+1) over the ranks of this rank's group on ``dims`` (an All-Reduce there)."""
        coords = list(self.topo.coords(self.cfg.rank))
        total = 0
        for r in range(self.topo.world):
            c = self.topo.coords(r)
            if all(c[d] == coords[d] for d in range(len(coords)) if d not in dims):
                total += r + 1
        return total

    def close(self) -> None:
        self.transport.close()


class _Reduced:
    """One bucket's All-Reduce as the communication thread did it."""

    __slots__ = ("coll", "end", "error", "index", "phases", "start")

    def __init__(self, index: int, coll: int, start: float, end: float,
                 phases: list[PhaseRecord], error: BaseException | None = None) -> None:
        self.index, self.coll, self.start, self.end = index, coll, start, end
        self.phases, self.error = phases, error


class _BucketComm:
    """The communication thread: All-Reduces handed-over buckets one at a time, in order."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.todo: queue.Queue = queue.Queue()
        self.done: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name=f"comm-rank{worker.cfg.rank}")
        self.thread.start()

    def submit(self, index: int, buf: np.ndarray,
               variables: list[tuple[int, int, int]]) -> None:
        self.todo.put((index, buf, variables))

    def _loop(self) -> None:
        while (item := self.todo.get()) is not None:
            index, buf, variables = item
            phases: list[PhaseRecord] = []
            start = time.monotonic()
            try:
                coll = self.worker.allreduce(buf, record=phases.append, variables=variables)
            except BaseException as exc:
                self.done.put(_Reduced(index, -1, start, time.monotonic(), phases, exc))
                return  # the links are unusable now
            self.done.put(_Reduced(index, coll, start, time.monotonic(), phases))

    def result(self) -> _Reduced:
        """The next finished bucket; raises its error, or a timeout if none comes."""
        wait = self.worker.cfg.collective_timeout + self.worker.cfg.timeout
        try:
            r = self.done.get(timeout=wait)
        except queue.Empty:
            raise CollectiveTimeout(
                f"rank {self.worker.cfg.rank}: no gradient bucket finished its All-Reduce "
                f"within {wait:g} s") from None
        if r.error is not None:
            raise r.error
        return r

    def stop(self, wait: bool) -> None:
        """End the thread after its queue; ``wait`` for it (not after a failure: it may be
        stuck in a collective until the transport is aborted)."""
        self.todo.put(None)
        if wait:
            self.thread.join(timeout=self.worker.cfg.timeout)


def _write_error(out_dir: Path, rank: int, kind: str, message: str, peer: int | None) -> None:
    path = out_dir / f"error-rank{rank}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"rank": rank, "kind": kind, "message": message, "peer": peer,
                               "time": time.time()}))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m workloads.worker CONFIG.json", file=sys.stderr)
        return 2
    try:
        cfg = WorkerConfig.model_validate_json(Path(argv[0]).read_text())
    except (OSError, ValidationError) as exc:
        if isinstance(exc, ValidationError):
            err = exc.errors()[0]
            detail = f"{'.'.join(map(str, err['loc'])) or 'config'}: {err['msg']}"
        else:
            detail = str(exc)
        print(f"worker config {argv[0]} is unusable: {detail}", file=sys.stderr, flush=True)
        return 2
    out_dir = Path(cfg.out_dir)
    trace = TraceWriter(out_dir, cfg.rank, dnn=cfg.job.workload.kind in ("dnn", "training"))
    worker = Worker(cfg)
    try:
        worker.connect()
        if cfg.stall:
            time.sleep(cfg.timeout * 20)
            raise FabricLabError(f"rank {cfg.rank} was told to stall and did")
        worker.run(trace)
        trace.finish()
    except FabricLabError as exc:
        kind, message, peer = getattr(exc, "kind", "error"), str(exc), getattr(exc, "peer", None)
    except Exception as exc:
        kind, message = "internal", f"rank {cfg.rank} crashed: {type(exc).__name__}: {exc}"
        peer = None
        traceback.print_exc()
    else:
        worker.close()
        return 0
    worker.transport.abort()
    try:
        trace.flush_partial()
    finally:
        _write_error(out_dir, cfg.rank, kind, message, peer)
        print(message, file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
