"""Predictive model of a chunked hierarchical All-Reduce (bandwidth only, event-driven).

Units: sizes are bytes; bandwidths at the API are **bit/s per host per dimension** and are
converted to bytes/s inside; times are seconds. Internally all arithmetic is exact
(:class:`fractions.Fraction`), so simultaneous events tie exactly and the schedule is
deterministic; the results are reported as floats.

Each dimension serves one chunk phase at a time. A ring phase on a dimension of ``n`` hosts
with per-host bandwidth ``B`` (bytes/s), for an input of ``s`` bytes per host, takes

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

Utilisation is ``T_ideal / T`` with ``T_ideal = 2·S·(1-1/N) / ΣB``: every host has to send
``2·S·(1-1/N)`` bytes in total whatever the order, and can send at most ``ΣB`` bytes/s.
The sum runs over dimensions with more than one host (a size-1 dimension connects a host to
nobody, so its bandwidth cannot be used). Hence utilisation is never above 1.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from testbed.core.errors import FabricLabError
from workloads.themis import ChunkPlan, plan, validate_shape

ORDERS = ("fifo", "scf")


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

    @property
    def hosts(self) -> int:
        return _prod(self.dim_sizes)


def _prod(values: Sequence[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


@dataclass(frozen=True)
class _Phase:
    chunk: int
    dim: int
    op: str
    size: Fraction  # input per host
    sent: Fraction  # bytes each host sends


def chunk_phases(chunk: ChunkPlan, dim_sizes: Sequence[int]) -> list[_Phase]:
    """The sequential phases of one chunk (RS..., AR, AG...), exact sizes."""
    order = chunk.rs_order
    if not order:
        return []
    s = Fraction(chunk.size)
    rs: list[_Phase] = []
    for d in order[:-1]:
        n = dim_sizes[d]
        rs.append(_Phase(chunk.index, d, "RS", s, s * (n - 1) / n))
        s /= n
    last = order[-1]
    n = dim_sizes[last]
    ar = _Phase(chunk.index, last, "AR", s, 2 * s * (n - 1) / n)
    ag = []
    for p in reversed(rs):
        n = dim_sizes[p.dim]
        shard = p.size / n
        ag.append(_Phase(chunk.index, p.dim, "AG", shard, shard * (n - 1)))
    return [*rs, ar, *ag]


def simulate(
    plans: Sequence[ChunkPlan],
    dim_sizes: Sequence[int],
    dim_bandwidths_bps: Sequence[float],
    order: str = "fifo",
) -> Prediction:
    """Run the event-driven model on given chunk plans (e.g. from :func:`workloads.themis.plan`).

    ``dim_bandwidths_bps`` in bit/s per host per dimension. ``policy`` in the result is
    ``"custom"``; :func:`predict` fills it in.
    """
    sizes, bandwidths = validate_shape(dim_sizes, dim_bandwidths_bps)
    if order not in ORDERS:
        raise FabricLabError(f"order {order!r} is unknown; use one of {', '.join(ORDERS)}")
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
    bytes_per_s = [Fraction(b) / 8 for b in bandwidths]

    phases = {p.index: chunk_phases(p, sizes) for p in plans}
    next_phase = dict.fromkeys(phases, 0)
    # Per-dimension waiting queue of (key, chunk, phase); key depends on the order policy.
    waiting: list[list[tuple[Fraction, int, _Phase]]] = [[] for _ in sizes]
    busy_until: list[Fraction | None] = [None] * len(sizes)  # None = free
    running: list[tuple[Fraction, int, int]] = []  # heap of (end, dim, chunk)
    runs: list[tuple[_Phase, Fraction, Fraction]] = []
    busy = [Fraction(0)] * len(sizes)
    sent = [Fraction(0)] * len(sizes)

    def enqueue(chunk: int, now: Fraction) -> None:
        i = next_phase[chunk]
        if i >= len(phases[chunk]):
            return
        ph = phases[chunk][i]
        key = now if order == "fifo" else ph.sent
        heapq.heappush(waiting[ph.dim], (key, chunk, ph))

    now = Fraction(0)
    for chunk in sorted(phases):
        enqueue(chunk, now)
    while True:
        for d in range(len(sizes)):
            if busy_until[d] is None and waiting[d]:
                _, chunk, ph = heapq.heappop(waiting[d])
                duration = ph.sent / bytes_per_s[d]
                end = now + duration
                busy_until[d] = end
                busy[d] += duration
                sent[d] += ph.sent
                runs.append((ph, now, end))
                heapq.heappush(running, (end, d, chunk))
        if not running:
            break
        now = running[0][0]
        done = []
        while running and running[0][0] == now:
            _, d, chunk = heapq.heappop(running)
            busy_until[d] = None
            done.append(chunk)
        for chunk in sorted(done):
            next_phase[chunk] += 1
            enqueue(chunk, now)

    total = Fraction(sum(p.size for p in plans))
    time_s = now
    useful_bw = sum(bytes_per_s[d] for d in range(len(sizes)) if sizes[d] > 1)
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
        PhaseRun(ph.chunk, ph.dim, ph.op, float(ph.size), float(ph.sent), float(s), float(e))
        for ph, s, e in sorted(runs, key=lambda r: (r[1], r[0].dim, r[0].chunk))
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
    )


def predict(
    dim_sizes: Sequence[int],
    dim_bandwidths_bps: Sequence[float],
    total_bytes: int,
    chunks: int,
    policy: str = "themis",
    order: str = "fifo",
    align: int = 1,
) -> Prediction:
    """Plan an All-Reduce of ``total_bytes`` (bytes) in ``chunks`` chunks and predict it.

    ``dim_bandwidths_bps``: bit/s per host per dimension. ``policy``: ``themis`` or
    ``baseline`` (see :mod:`workloads.themis`); ``order``: ``fifo`` or ``scf``.
    """
    plans = plan(dim_sizes, dim_bandwidths_bps, total_bytes, chunks, policy=policy, align=align)
    result = simulate(plans, dim_sizes, dim_bandwidths_bps, order=order)
    return replace(result, policy=policy)
