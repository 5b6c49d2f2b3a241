"""Collectives as sequences of synchronous steps of flows on a simulated :class:`Network`.

A step is a set of flows ``(path, bytes)`` started together; it ends when its slowest flow
ends, and the next step starts then. Algorithms:

* any collective of :data:`~testbed.core.registry.COLLECTIVES` (ring, halving-doubling, ...):
  its :meth:`~workloads.collectives.Collective.transfers`, positions mapped to ranks, each
  transfer a flow on the path between them;
* hierarchical (baseline) and Themis chunked All-Reduce on a multi-dimensional fabric,
  with chunk plans from :func:`workloads.themis.plan`, dispatched by the chunk-schedule engine
  the model and the workers use (:mod:`workloads.schedule_engine`): every dimension serves
  one chunk phase at a time, queued as the engine's semantics says (``astra-sim-1.0`` by
  default, or ``fabriclab``; ``order`` ``fifo`` or ``scf``). A phase is a Reduce-Scatter,
  All-Reduce or All-Gather of the dimension's collective (ring unless given) run in every
  group of that dimension at once, step by step.

A multi-dimensional fabric gives every host, in every dimension ``d``, one NIC link up to its
group's switch and one down from it, both of ``B_d`` bit/s; the switch itself is non-blocking.
A ``fully_connected`` dimension instead gives every ordered pair of peers a link of its own of
``B_d / (n-1)`` bit/s: a collective there gets what its links at once can carry.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from testbed.core.errors import FabricLabError
from testbed.core.formulas import link_share
from testbed.core.registry import COLLECTIVES
from testbed.core.topology import coords_of, dim_peers
from testbed.sim.flows import LinkId, Network
from workloads.astra1_clock import tie_ns
from workloads.collectives import Collective
from workloads.schedule_engine import (
    DEFAULT_SEMANTICS,
    ChunkEngine,
    Phase,
    check_order,
    chunk_phases,
)
from workloads.themis import ChunkPlan, validate_shape
from workloads.themis import plan as themis_plan

Step = list[tuple[Sequence[LinkId], float]]
# Float event times this close tie (relative, absolute): ties then go to the lower chunk.
SIM_TOLERANCE = (1e-9, 1e-12)
PathFn = Callable[[Hashable, Hashable], Sequence[LinkId]]


def collective_steps(collective: Collective, op: str, ranks: Sequence[Hashable], size: float,
                     path: PathFn) -> list[Step]:
    """Phase ``op`` of ``collective`` over ``ranks`` (position i = ``ranks[i]``) as steps of
    flows; ``size`` is the input per rank (for AG the shard each holds)."""
    return [[(path(ranks[a], ranks[b]), nbytes) for a, b, nbytes in step]
            for step in collective.transfers(op, len(ranks), size)]


def checked_collective(name: str, n: int) -> Collective:
    """The collective called ``name``, if a group of ``n`` ranks suits it (else one sentence)."""
    collective = COLLECTIVES.get(name)
    if reason := collective.group_size_error(n):
        raise FabricLabError(reason)
    return collective


def run_steps(
    net: Network,
    steps: Iterable[Step],
    on_done: Callable[[float], None] | None = None,
    owner: Hashable = None,
    tag: object = None,
    latency: float = 0.0,
) -> None:
    """Issue ``steps`` one after the other on ``net``; call ``on_done(time)`` at the end.

    Each step's flows start together (as separate max-min flows), ``latency`` seconds after
    the previous step ended (the alpha of an alpha-beta model: per-message software and
    switching delay); the step ends when the last of them ends. Empty steps and zero-byte
    flows are skipped.
    """
    remaining = iter(steps)

    def start(flows: list[tuple[list, float]]) -> None:
        left = [len(flows)]

        def one_done(_f: object) -> None:
            left[0] -= 1
            if left[0] == 0:
                next_step()

        for p, b in flows:
            net.add_flow(p, b, tag=tag, owner=owner, on_done=one_done)

    def next_step(_flow: object = None) -> None:
        for step in remaining:
            flows = [(p, b) for p, b in step if b > 0 and p]
            if not flows:
                continue
            if latency > 0:
                net.at(net.now + latency, lambda flows=flows: start(flows))
            else:
                start(flows)
            return
        if on_done is not None:
            on_done(net.now)

    next_step()


def allreduce_time(
    net: Network, ranks: Sequence[Hashable], size: float, path: PathFn, algorithm: str = "ring"
) -> float:
    """Run one All-Reduce alone on ``net`` (from its current time) and return its duration."""
    collective = checked_collective(algorithm, len(ranks))
    start = net.now
    finished: list[float] = []
    run_steps(net, collective_steps(collective, "AR", ranks, size, path), finished.append)
    net.run()
    if not finished:
        raise FabricLabError("the All-Reduce did not finish")
    return finished[0] - start


# ---------------------------------------------------------------- multi-dimensional


class MultidimFabric:
    """Hosts ``0..N-1`` on a ``dim_sizes`` grid; per dimension one non-blocking switch per
    group, every host linked to it by an up and a down link of ``dim_bandwidths_bps[d]``."""

    def __init__(self, dim_sizes: Sequence[int], dim_bandwidths_bps: Sequence[float],
                 dim_kinds: Sequence[str] | None = None) -> None:
        self.sizes, self.bandwidths = validate_shape(dim_sizes, dim_bandwidths_bps)
        self.kinds = tuple(dim_kinds) if dim_kinds is not None else ("switch",) * len(self.sizes)
        if len(self.kinds) != len(self.sizes):
            raise FabricLabError(f"dim_kinds has {len(self.kinds)} kinds for "
                                 f"{len(self.sizes)} dimensions")
        self.hosts = 1
        for n in self.sizes:
            self.hosts *= n

    def _mesh(self, dim: int) -> bool:
        return self.kinds[dim] == "fully_connected"

    def capacities(self) -> dict[LinkId, float]:
        caps: dict[LinkId, float] = {}
        for d, bw in enumerate(self.bandwidths):
            if self._mesh(d):
                per_link = float(bw) / max(1, self.sizes[d] - 1)
                for h in range(self.hosts):
                    for peer in dim_peers(h, d, self.sizes):
                        if peer != h:
                            caps[("fc", d, h, peer)] = per_link
                continue
            for h in range(self.hosts):
                caps[("up", d, h)] = float(bw)
                caps[("down", d, h)] = float(bw)
        return caps

    def network(self) -> Network:
        return Network(self.capacities())

    def path(self, dim: int, src: int, dst: int) -> list[LinkId]:
        if self._mesh(dim):
            return [("fc", dim, src, dst)]
        return [("up", dim, src), ("down", dim, dst)]

    def groups(self, dim: int) -> list[list[int]]:
        """Every group of dimension ``dim``, each as host ids in ring (coordinate) order."""
        return [
            dim_peers(h, dim, self.sizes)
            for h in range(self.hosts)
            if coords_of(h, self.sizes)[dim] == 0
        ]

    def phase_steps(self, dim: int, op: str, size: float,
                    collective: Collective | None = None) -> list[Step]:
        """Steps of one chunk phase of ``collective`` (default ring) in every group of
        ``dim`` at once; ``size`` is the phase input per host (for AG, the shard it holds)."""
        collective = collective or COLLECTIVES.get("ring")
        groups = self.groups(dim)
        return [[(self.path(dim, g[a], g[b]), nbytes) for g in groups for a, b, nbytes in step]
                for step in collective.transfers(op, self.sizes[dim], size)]


@dataclass(frozen=True)
class PhaseSpan:
    chunk: int
    dim: int
    op: str
    start: float
    end: float


@dataclass
class HierarchicalResult:
    time_s: float
    schedule: list[PhaseSpan] = field(default_factory=list)


class HierarchicalRun:
    """One chunked hierarchical All-Reduce on ``net`` (other jobs may share it), its phases
    dispatched by the shared chunk-schedule engine (:mod:`workloads.schedule_engine`): a
    dispatched phase runs as steps of flows in every group of its dimension and finishes when
    its last step ends. ``on_end(runs)`` when every chunk is done, ``runs`` being
    ``(phase, start, end)`` in the order the phases ended."""

    def __init__(self, net: Network, fabric: MultidimFabric, plans: Sequence[ChunkPlan],
                 order: str, collective: Collective | Sequence[Collective],
                 on_end: Callable[[list], None], owner: Hashable = None,
                 latency: float = 0.0, semantics: str = DEFAULT_SEMANTICS) -> None:
        per_dim = (list(collective) if isinstance(collective, Sequence)
                   else [collective] * len(fabric.sizes))
        self.net, self.fabric, self.collectives = net, fabric, per_dim
        self.on_end, self.owner, self.latency = on_end, owner, latency
        # every built-in collective sends the same bytes per phase: the engine's phase sizes
        chunks = [chunk_phases(p, fabric.sizes, per_dim[0]) for p in plans]
        self.engine = ChunkEngine(chunks, len(fabric.sizes), order, tolerance=SIM_TOLERANCE,
                                  semantics=semantics)
        self.runs: list[tuple[Phase, float, float]] = []
        # eager (astra-sim-1.0) engine: the phases that ended this instant, handled together
        # in the model's order (earliest tie clock, then lower dimension, then start order:
        # workloads.schedule_engine.run_analytic), each phase's tie clock summed as the model's
        self._ended: list[tuple[Fraction, int, int, Phase, int, float]] = []
        self._started = 0
        self._tie_now = Fraction(0)
        rates = [Fraction(b) / 8 * link_share(k, n, c) for b, k, n, c in
                 zip(fabric.bandwidths, fabric.kinds, fabric.sizes, per_dim, strict=True)]
        self._tie = tie_ns(per_dim, fabric.sizes, rates) if self.engine.eager else None

    def start(self) -> None:
        self.engine.begin(self.net.now)
        if self.engine.done:
            self.on_end([])
            return
        self._dispatch()

    def _dispatch(self) -> None:
        for phase, slot in self.engine.dispatch():
            began = self.net.now
            self._started += 1
            tie_end = self._tie_now + self._tie(phase) if self._tie else Fraction(0)

            def end(_t: float, phase: Phase = phase, slot: int = slot, began: float = began,
                    seq: int = self._started, tie_end: Fraction = tie_end) -> None:
                if self.engine.eager:
                    if not self._ended:
                        self.net.defer(self._finish_ended)
                    self._ended.append((tie_end, phase.dim, seq, phase, slot, began))
                    return
                self.runs.append((phase, began, self.net.now))
                self.engine.finish(phase, slot, self.net.now)
                if self.engine.done:
                    self.on_end(self.runs)
                self.net.defer(self._dispatch)

            steps = self.fabric.phase_steps(phase.dim, phase.op, float(phase.size),
                                            self.collectives[phase.dim])
            run_steps(self.net, steps, end, owner=self.owner, tag=(phase.chunk, phase.dim),
                      latency=self.latency)

    def _finish_ended(self) -> None:
        ended, self._ended = sorted(self._ended, key=lambda e: e[:3]), []
        for tie_end, _dim, _seq, phase, slot, began in ended:
            self.runs.append((phase, began, self.net.now))
            self._tie_now = tie_end
            self.engine.finish(phase, slot, self.net.now)  # refills the freed slot at once
            self._dispatch()  # what it started begins on this completion's tie clock
        if self.engine.done:
            self.on_end(self.runs)


def hierarchical_allreduce(
    fabric: MultidimFabric,
    plans: Sequence[ChunkPlan],
    order: str = "fifo",
    net: Network | None = None,
    dim_algorithm: str | Sequence[str] = "ring",
    semantics: str = DEFAULT_SEMANTICS,
) -> HierarchicalResult:
    """Simulate a chunked hierarchical All-Reduce (plans from :func:`workloads.themis.plan`),
    every dimension running the collective ``dim_algorithm`` (one name, or one per
    dimension), phases queued under ``semantics``."""
    check_order(order)
    names = ([dim_algorithm] * len(fabric.sizes) if isinstance(dim_algorithm, str)
             else list(dim_algorithm))
    if len(names) != len(fabric.sizes):
        raise FabricLabError(f"dim_algorithm names {len(names)} collectives for "
                             f"{len(fabric.sizes)} dimensions")
    collective = [checked_collective(name, n) for name, n in zip(names, fabric.sizes,
                                                                   strict=True)]
    net = net or fabric.network()
    start = net.now
    finished: list[float] = []
    schedule: list[PhaseSpan] = []

    def on_end(runs: list[tuple[Phase, float, float]]) -> None:
        finished.append(net.now)
        schedule.extend(PhaseSpan(ph.chunk, ph.dim, ph.op, began - start, end - start)
                        for ph, began, end in runs)

    HierarchicalRun(net, fabric, plans, order, collective, on_end,
                    semantics=semantics).start()
    net.run()
    if not finished:
        raise FabricLabError("the hierarchical All-Reduce did not finish")
    schedule.sort(key=lambda s: (s.start, s.dim, s.chunk))
    return HierarchicalResult(finished[0] - start, schedule)


def themis_allreduce(
    dim_sizes: Sequence[int],
    dim_bandwidths_bps: Sequence[float],
    total_bytes: int,
    chunks: int,
    policy: str = "themis",
    order: str = "fifo",
    dim_algorithm: str | Sequence[str] = "ring",
    dim_kinds: Sequence[str] | None = None,
    semantics: str = DEFAULT_SEMANTICS,
) -> HierarchicalResult:
    """Plan (themis or baseline) and simulate one All-Reduce on a contention-free fabric, the
    plan seeing each dimension's bandwidth as its collective can use it (as the model's)."""
    fabric = MultidimFabric(dim_sizes, dim_bandwidths_bps, dim_kinds)
    names = ([dim_algorithm] * len(fabric.sizes) if isinstance(dim_algorithm, str)
             else list(dim_algorithm))
    usable = [b * float(link_share(k, n, COLLECTIVES.get(a))) for b, k, n, a in
              zip(fabric.bandwidths, fabric.kinds, fabric.sizes, names, strict=True)]
    plans = themis_plan(dim_sizes, usable, total_bytes, chunks, policy=policy,
                        semantics=semantics)
    return hierarchical_allreduce(fabric, plans, order, dim_algorithm=names,
                                  semantics=semantics)
