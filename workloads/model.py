"""Predictive model of a chunked hierarchical All-Reduce (bandwidth only, event-driven).

Units: sizes are bytes; bandwidths at the API are **bit/s per host per dimension** and are
converted to bytes/s inside; times are seconds. Internally all arithmetic is exact
(:class:`fractions.Fraction`), so simultaneous events tie exactly and the schedule is
deterministic; the results are reported as floats.

Each dimension serves ``max_active`` chunk phases at a time (1 by default), in the order of the
chunk-schedule engine (:mod:`workloads.schedule_engine`) under the chosen *semantics*:
``astra-sim-1.0`` (the default) reproduces ASTRA-sim 1.0's analytical backend (per-dimension
insertion queues, balanced chunks with a separate Reduce-Scatter and All-Gather on their last
dimension), ``fabriclab`` is this project's earlier model; ``docs/themis-semantics.md`` says
where they differ and why. The paragraphs below describe ``fabriclab``.

A phase of the dimension's collective (ring or halving-doubling alike, both bandwidth
optimal: :meth:`workloads.collectives.Collective.sent_bytes`) on a dimension of ``n``
hosts with per-host bandwidth ``B`` (bytes/s), for an input of ``s`` bytes per host, takes
(plus α per step of the collective: ``step_latency_s``, 0 by default, plus the dimension's
one-way hop delay ``dim_delays_s[d]``, 0 by default: the α-β model with the links' delay in α)

* Reduce-Scatter ``RS``: ``(n-1)·s/(n·B)``, output ``s/n``;
* All-Gather ``AG``: ``(n-1)·s/B`` where ``s`` is the input shard, output ``n·s``;
* All-Reduce ``AR``: ``2(n-1)·s/(n·B)``, output ``s``.

A chunk runs RS on ``rs_order[0]``, ..., RS on ``rs_order[-2]``, AR on ``rs_order[-1]``,
then AG on ``rs_order[-2]``, ..., ``rs_order[0]``, each phase after the previous one. A
phase starts once the chunk's previous phase is done and its dimension is free; the
dimension never idles while a phase waits for it. Among waiting phases a dimension picks by

* ``fifo``: earliest readiness time first, ties by chunk index;
* ``scf``: smallest phase first, ties by chunk index. The size of a phase is the bytes
  each host sends in it (``(n-1)·s/n`` for RS, ``(n-1)·s`` for AG, twice the RS amount for
  AR), which on one dimension is proportional to its duration.

Dimension kinds (``dim_kinds``, default all ``switch``): on a ``fully_connected`` dimension
the host's bandwidth ``B`` is split evenly over its ``n-1`` links, as ASTRA-sim splits an FC
NPU's, so a phase runs at ``B·k/(n-1)`` where ``k`` is how many of those links the
dimension's collective uses at once (``direct``, ASTRA-sim's choice there: all, so ``B``;
ring or halving-doubling: one). ``dim_algorithm`` may name one collective for every
dimension or one per dimension.

A lossy dimension (``dim_losses[d]``, the fraction of packets one hop loses) holds ``B`` to
the Mathis et al. TCP rate at an RTT of twice its hop delay
(:func:`testbed.core.link_model.lossy_rate_bit_s`, whose docstring states the model's limits).

Utilisation is ``T_ideal / T`` with ``T_ideal = 2·S·(1-1/N) / ΣB``: every host has to send
``2·S·(1-1/N)`` bytes in total whatever the order, and can send at most ``ΣB`` bytes/s.
The sum runs over dimensions with more than one host (a size-1 dimension connects a host to
nobody, so its bandwidth cannot be used). Hence utilisation is never above 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from testbed.core.errors import FabricLabError
from testbed.core.formulas import link_share
from testbed.core.jobs import ResolvedJob
from testbed.core.link_model import hop_delay_us, hop_loss, lossy_rate_bit_s
from testbed.core.presets import DIM_ALGORITHM_OF_KIND
from testbed.core.registry import COLLECTIVES
from testbed.core.topology import FabricPlan
from workloads.astra1_clock import tie_ns
from workloads.collectives import Collective
from workloads.flat_model import flat_allreduce_s
from workloads.schedule_engine import (
    ASTRA_SIM_1_0,
    DEFAULT_SEMANTICS,
    ORDERS,
    SEMANTICS,
    ChunkEngine,
    Phase,
    check_order,
    check_semantics,
    chunk_phases,
    run_analytic,
)
from workloads.themis import ChunkPlan, plan, validate_shape

__all__ = ["DEFAULT_SEMANTICS", "ORDERS", "SEMANTICS", "DimStats", "PhaseRun", "Prediction",
           "predict", "predict_on_fabric", "simulate"]


@dataclass(frozen=True)
class PhaseRun:
    """One chunk phase as scheduled: ``bytes`` is the input per host, ``sent`` what each
    host sends during it; ``start``/``end`` in seconds from the start of the collective."""

    chunk: int
    dim: int
    op: str  # "RS", "AR" or "AG"
    bytes: float
    sent: float
    start: float
    end: float


@dataclass(frozen=True)
class DimStats:
    """Per-dimension totals: ``busy_s`` seconds serving phases, ``utilisation`` = busy/T."""

    index: int
    size: int
    bandwidth_bps: float
    sent_bytes: float
    busy_s: float
    utilisation: float


@dataclass(frozen=True)
class Prediction:
    """Predicted time ``time_s`` (s) of the collective and how well it uses the links."""

    dim_sizes: tuple[int, ...]
    dim_bandwidths_bps: tuple[float, ...]
    total_bytes: int
    chunks: int
    policy: str
    order: str
    time_s: float
    ideal_time_s: float
    utilisation: float
    dims: tuple[DimStats, ...]
    schedule: tuple[PhaseRun, ...]
    plans: tuple[ChunkPlan, ...]
    semantics: str = DEFAULT_SEMANTICS
    max_active: int = 1

    @property
    def hosts(self) -> int:
        return _prod(self.dim_sizes)


def _prod(values: Sequence[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def dim_collectives(dim_algorithm: str | Sequence[str], n_dims: int) -> list[Collective]:
    """The collective of every dimension: one name for all, or one per dimension."""
    names = [dim_algorithm] * n_dims if isinstance(dim_algorithm, str) else list(dim_algorithm)
    if len(names) != n_dims:
        raise FabricLabError(f"dim_algorithm names {len(names)} collectives for {n_dims} "
                             "dimensions")
    return [COLLECTIVES.get(name) for name in names]


def dim_shares(dim_kinds: Sequence[str] | None, sizes: Sequence[int],
               collectives: Sequence[Collective]) -> list[Fraction]:
    """Per dimension, the fraction of its bandwidth its collective uses (:func:`link_share`)."""
    kinds = list(dim_kinds) if dim_kinds is not None else ["switch"] * len(sizes)
    if len(kinds) != len(sizes):
        raise FabricLabError(f"dim_kinds has {len(kinds)} kinds for {len(sizes)} dimensions")
    return [link_share(k, n, c) for k, n, c in zip(kinds, sizes, collectives, strict=True)]


def simulate(
    plans: Sequence[ChunkPlan],
    dim_sizes: Sequence[int],
    dim_bandwidths_bps: Sequence[float],
    order: str = "fifo",
    dim_algorithm: str | Sequence[str] = "ring",
    step_latency_s: float = 0.0,
    semantics: str = DEFAULT_SEMANTICS,
    max_active: int = 1,
    dim_kinds: Sequence[str] | None = None,
    dim_delays_s: Sequence[float] | None = None,
    dim_losses: Sequence[float] | None = None,
) -> Prediction:
    """Run the event-driven model on given chunk plans (e.g. from :func:`workloads.themis.plan`).

    ``dim_bandwidths_bps`` in bit/s per host per dimension; every dimension runs the
    collective ``dim_algorithm``, a phase lasting its bytes sent over the bandwidth plus
    ``step_latency_s`` per step. ``semantics``: how dimensions queue phases (see the module
    docstring); ``max_active``: phases a dimension serves at once, each at full bandwidth
    (ASTRA-sim's ``active-chunks-per-dimension`` on its congestion-unaware network; only 1
    keeps every dimension within its bandwidth). ``dim_delays_s``: each dimension's one-way
    hop delay (s), paid once per step; ``dim_losses``: the fraction of packets a hop loses
    (default none). ``policy`` in the result is ``"custom"``; :func:`predict` fills it in.
    """
    sizes, bandwidths = validate_shape(dim_sizes, dim_bandwidths_bps)
    check_order(order)
    check_semantics(semantics)
    if not plans:
        raise FabricLabError("plans must hold at least one chunk")
    hosts = _prod(sizes)
    if hosts == 1:
        raise FabricLabError("dim_sizes describes a single host, so there is nothing to all-reduce")
    if len({p.index for p in plans}) != len(plans):
        raise FabricLabError("plans must give every chunk a different index")
    for p in plans:
        if any(d < 0 or d >= len(sizes) or sizes[d] == 1 for d in p.rs_order) or len(
            set(p.rs_order)
        ) != len(p.rs_order):
            raise FabricLabError(
                f"plans[{p.index}] has rs_order {p.rs_order} which is not a set of "
                f"dimensions with more than one host"
            )
    collectives = dim_collectives(dim_algorithm, len(sizes))
    for n, collective in zip(sizes, collectives, strict=True):
        if reason := collective.group_size_error(n):
            raise FabricLabError(f"dim_sizes: {reason}")
    shares = dim_shares(dim_kinds, sizes, collectives)
    delays = _per_dim(dim_delays_s, len(sizes), "dim_delays_s")
    losses = _per_dim(dim_losses, len(sizes), "dim_losses")
    bytes_per_s = [Fraction(lossy_rate_bit_s(float(b * share), delay, loss)) / 8
                   if loss else Fraction(b) / 8 * share
                   for b, share, delay, loss in zip(bandwidths, shares, delays, losses,
                                                    strict=True)]
    alpha = [Fraction(step_latency_s) + Fraction(d) for d in delays]

    chunks = [_phases(p, sizes, collectives) for p in plans]
    engine = ChunkEngine(chunks, len(sizes), order, max_active, semantics=semantics)
    tie = tie_ns(collectives, sizes, bytes_per_s) if semantics == ASTRA_SIM_1_0 else None
    runs = run_analytic(engine,
                        lambda ph: ph.sent / bytes_per_s[ph.dim] + ph.steps * alpha[ph.dim], tie)
    busy = [Fraction(0)] * len(sizes)
    sent = [Fraction(0)] * len(sizes)
    for r in runs:
        busy[r.phase.dim] += r.end - r.start
        sent[r.phase.dim] += r.phase.sent

    total = Fraction(sum(p.size for p in plans))
    time_s = max(r.end for r in runs)
    useful_bw = sum(Fraction(bandwidths[d]) / 8 for d in range(len(sizes)) if sizes[d] > 1)
    ideal = 2 * total * (1 - Fraction(1, hosts)) / useful_bw
    dims = tuple(
        DimStats(
            index=d,
            size=sizes[d],
            bandwidth_bps=float(bandwidths[d]),
            sent_bytes=float(sent[d]),
            busy_s=float(busy[d]),
            utilisation=float(busy[d] / time_s),
        )
        for d in range(len(sizes))
    )
    schedule = tuple(
        PhaseRun(r.phase.chunk, r.phase.dim, r.phase.op, float(r.phase.size),
                 float(r.phase.sent), float(r.start), float(r.end))
        for r in sorted(runs, key=lambda r: (r.start, r.phase.dim, r.phase.chunk))
    )
    return Prediction(
        dim_sizes=sizes,
        dim_bandwidths_bps=tuple(float(b) for b in bandwidths),
        total_bytes=int(total),
        chunks=len(plans),
        policy="custom",
        order=order,
        time_s=float(time_s),
        ideal_time_s=float(ideal),
        utilisation=float(ideal / time_s),
        dims=dims,
        schedule=schedule,
        plans=tuple(plans),
        semantics=semantics,
        max_active=max_active,
    )


def _per_dim(values: Sequence[float] | None, n_dims: int, name: str) -> list[float]:
    """One value per dimension (0 for all when None), else one sentence naming ``name``."""
    if values is None:
        return [0.0] * n_dims
    if len(values) != n_dims or any(not v >= 0 for v in values):
        raise FabricLabError(f"{name} must give one value >= 0 per dimension ({n_dims}); "
                             f"got {list(values)}")
    return [float(v) for v in values]


def _phases(chunk: ChunkPlan, sizes: Sequence[int], collectives: Sequence[Collective]
            ) -> list[Phase]:
    """A chunk's phases, each with the bytes sent and steps of its dimension's collective."""
    phases = chunk_phases(chunk, sizes, collectives[0])
    if all(c is collectives[0] for c in collectives):
        return phases
    return [replace(ph, sent=collectives[ph.dim].sent_bytes(ph.op, sizes[ph.dim], ph.size),
                    steps=collectives[ph.dim].step_count(ph.op, sizes[ph.dim]))
            for ph in phases]


def predict(
    dim_sizes: Sequence[int],
    dim_bandwidths_bps: Sequence[float],
    total_bytes: int,
    chunks: int,
    policy: str = "themis",
    order: str = "fifo",
    align: int = 1,
    dim_algorithm: str | Sequence[str] = "ring",
    step_latency_s: float = 0.0,
    semantics: str = DEFAULT_SEMANTICS,
    max_active: int = 1,
    dim_kinds: Sequence[str] | None = None,
    dim_delays_s: Sequence[float] | None = None,
    dim_losses: Sequence[float] | None = None,
) -> Prediction:
    """Plan an All-Reduce of ``total_bytes`` (bytes) in ``chunks`` chunks and predict it.

    ``dim_bandwidths_bps``: bit/s per host per dimension. ``policy``: a chunk schedule
    (``themis``, ``baseline``: :mod:`workloads.themis`); ``order``: ``fifo`` or ``scf``;
    ``semantics``: ``astra-sim-1.0`` (default) or ``fabriclab``; ``dim_algorithm``,
    ``step_latency_s``, ``max_active``, ``dim_kinds``, ``dim_delays_s`` and ``dim_losses``:
    see :func:`simulate`. The plan sees each dimension's bandwidth as its collective can use
    it there.
    """
    check_semantics(semantics)
    collectives = dim_collectives(dim_algorithm, len(dim_sizes))
    shares = dim_shares(dim_kinds, dim_sizes, collectives)
    usable = [float(b * share) for b, share in zip(dim_bandwidths_bps, shares, strict=True)]
    plans = plan(dim_sizes, usable, total_bytes, chunks, policy=policy, align=align,
                 semantics=semantics)
    result = simulate(plans, dim_sizes, dim_bandwidths_bps, order=order,
                      dim_algorithm=dim_algorithm, step_latency_s=step_latency_s,
                      semantics=semantics, max_active=max_active, dim_kinds=dim_kinds,
                      dim_delays_s=dim_delays_s, dim_losses=dim_losses)
    return replace(result, policy=policy)


def best_chunk_count(
    dim_sizes: Sequence[int],
    dim_bandwidths_bps: Sequence[float],
    total_bytes: int,
    candidates: Sequence[int] | None = None,
    **kwargs: Any,
) -> tuple[int, float]:
    """The chunk count among ``candidates`` (at most one per byte) whose :func:`predict`
    time is least, and that time (the first of equal ones: fewer chunks). More chunks
    pipeline the dimensions better but pay each dimension's per-step α once per chunk, so
    the links' delays (``dim_delays_s``) move the best count down. ``kwargs``: the rest of
    :func:`predict`'s."""
    return _least(lambda chunks: predict(dim_sizes, dim_bandwidths_bps, total_bytes, chunks,
                                         **kwargs).time_s, total_bytes,
                  candidates or CHUNK_CANDIDATES)


CHUNK_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _least(time_s: Any, total_bytes: int, candidates: Sequence[int] = CHUNK_CANDIDATES
           ) -> tuple[int, float]:
    """The first of ``candidates`` (at most ``total_bytes``) with the least ``time_s``."""
    best: tuple[int, float] | None = None
    for chunks in candidates:
        if chunks > total_bytes:
            break
        t = time_s(chunks)
        if best is None or t < best[1]:
            best = (chunks, t)
    if best is None:
        raise FabricLabError(f"no candidate chunk count fits {total_bytes} bytes")
    return best


def predict_on_fabric(
    fabric_dims: Sequence[Mapping[str, Any]],
    total_bytes: int,
    chunks: int,
    policy: str = "themis",
    order: str = "fifo",
    dim_algorithm: str | Sequence[str] | None = None,
    semantics: str = DEFAULT_SEMANTICS,
    max_active: int = 1,
) -> Prediction:
    """:func:`predict` on the dimensions of a multidim ``fabric:`` block, each ``{size,
    mbit_s, kind}`` and optionally ``delay_us`` and ``loss`` of each of its links: ``mbit_s``
    is the host's total rate in the dimension (on a ``fully_connected`` one, over all its
    links), ``kind`` defaults to ``switch``; a hop crosses two links of a switch dimension,
    one of the others (:func:`testbed.core.link_model.hop_links`).
    ``dim_algorithm`` None: each kind's collective (ASTRA-sim's choice). The one model behind
    ``fabriclab model`` and the model figure in a report's headlines."""
    sizes = [int(d["size"]) for d in fabric_dims]
    kinds = [str(d.get("kind") or "switch") for d in fabric_dims]
    if dim_algorithm is None:
        dim_algorithm = [DIM_ALGORITHM_OF_KIND[k] for k in kinds]
    delays = [hop_delay_us(k, float(d.get("delay_us") or 0)) * 1e-6
              for d, k in zip(fabric_dims, kinds, strict=True)]
    losses = [hop_loss(k, float(d.get("loss") or 0)) for d, k in zip(fabric_dims, kinds,
                                                                      strict=True)]
    return predict(sizes, [float(d["mbit_s"]) * 1e6 for d in fabric_dims], total_bytes, chunks,
                   policy=policy, order=order, dim_algorithm=dim_algorithm,
                   semantics=semantics, max_active=max_active, dim_kinds=kinds,
                   dim_delays_s=delays, dim_losses=losses)


def best_chunks_on_fabric(fabric_dims: Sequence[Mapping[str, Any]], total_bytes: int,
                          **kwargs: Any) -> tuple[int, float]:
    """:func:`best_chunk_count` on a multidim ``fabric:`` block's dimensions, as
    :func:`predict_on_fabric` reads them (``kwargs``: its keywords but ``chunks``)."""
    return _least(lambda chunks: predict_on_fabric(fabric_dims, total_bytes, chunks,
                                                   **kwargs).time_s, total_bytes)


def job_model_s(job: ResolvedJob, plan: FabricPlan, step_latency_s: float = 0.0
                ) -> dict[str, float] | None:
    """The model's time of each All-Reduce size of ``job`` on ``plan``: a chunk-scheduled
    job's as ``fabriclab model`` predicts it (each dimension's per-host rate and kind, as the job
    records them, the job's chunks, order, collective and semantics), keyed by the size in
    bytes as text (the JSON key the summary uses); None for a job the model does not cover
    (DNN and command jobs, and chunk-scheduled jobs on a leaf-spine ``plan``, whose logical
    dimensions share one NIC, which the model does not see). A flat All-Reduce on a
    leaf-spine ``plan`` gets :func:`workloads.flat_model.flat_allreduce_s`, with
    ``step_latency_s`` added to each transfer (a run's measured latency per step). The backends
    record it in jobs.json (``model_s``) for the analysis."""
    if job.workload.kind != "allreduce" or not (job.flat or plan.kind == "multidim"):
        return None
    if job.flat:
        if plan.kind != "leaf_spine":
            return None
        collective = job.plugin(job.algorithm)
        return {str(size): flat_allreduce_s(plan, job.hosts, collective, size, step_latency_s)
                for size in job.workload.sizes}
    return {str(size): predict(job.dims, job.dim_host_rates_bps, size, job.chunks,
                               policy=job.algorithm, order=job.order,
                               dim_algorithm=job.dim_algorithms, semantics=job.semantics,
                               dim_kinds=job.dim_kinds, dim_delays_s=job.dim_delays_s,
                               dim_losses=job.dim_hop_losses).time_s
            for size in job.workload.sizes}
