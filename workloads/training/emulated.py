"""What an emulated training job replays, decided before any worker moves a byte (pure).

The job's platform is the simulator's (:func:`workloads.training.jobs.job_platform`: its
logical dimensions at its hosts' rates x TCP goodput, its knobs as the system).
:func:`plan_pass` replays one pass on it, exactly, and keeps what it did: the collective
every ``issue`` call made, every chunk's phases and, per dimension, the order its phases
started. Every rank computes the same plan, so every member of a group serves
its dimension's phases in the same order, which is what keeps the real collectives from
deadlocking (as :func:`workloads.hierarchical.schedule` does for one All-Reduce; a phase
waits for its chunk's previous phase and for its collective to be issued, and in the model
each of those ended before the phase started, so the order is feasible whatever the real
timing). A Chakra trace is planned the same way, by the simulator's replay of the trace
(:mod:`workloads.training.chakra`), which keeps the order it issued the nodes in.
:func:`emulator_problem` says in one sentence what the emulator cannot replay.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from testbed.core.astra_formats import AstraDim
from workloads.schedule_engine import Phase
from workloads.training.chakra import TraceResult, _TraceReplay
from workloads.training.library import ChakraTrace
from workloads.training.model import ALLREDUCE, TRANSFORMER_TYPES, Workload
from workloads.training.platform import ReplaySystem, logical_dims
from workloads.training.replay import ReplayResult, _Replay
from workloads.training.runner import ScheduleLog

BYTES_PER_VALUE = 4  # the real collectives move float32 values
EMULATED_KINDS = (ALLREDUCE,)


@dataclass(frozen=True)
class PlannedCollective:
    """One collective of the pass: the layer and stage that issued it (a Chakra trace: the
    node's id and kind), its kind, bytes per rank, the job dimensions it runs on and its chunk
    ids (consecutive)."""

    layer: int
    stage: str
    kind: str
    size_bytes: int
    dims: tuple[int, ...]
    chunk_ids: tuple[int, ...]
    update_ns: int


@dataclass(frozen=True)
class PassPlan:
    """One pass as the model ran it. ``issued``: per ``issue`` call in order, its layer, stage
    and collective index (None: nothing to run; a Chakra trace: per node issued, its id, kind
    and collective index); ``chunks``: per chunk id its phases; ``sequences``: per
    ``(dimension, slot 0)`` the phases in the order they started."""

    issued: tuple[tuple[int, str, int | None], ...]
    collectives: tuple[PlannedCollective, ...]
    chunks: tuple[tuple[Phase, ...], ...]
    sequences: dict[tuple[int, int], tuple[Phase, ...]]
    model: ReplayResult | TraceResult

    @property
    def total_bytes(self) -> int:
        return sum(c.size_bytes for c in self.collectives)


def _collective_problem(name: str, what: str, kind: str, size_bytes: int,
                        chunks: int) -> str | None:
    if kind not in EMULATED_KINDS:
        return (f"{name}: {what} {kind} is not replayed on the emulator (it runs "
                f"{', '.join(EMULATED_KINDS)}); use --backend sim")
    if size_bytes // BYTES_PER_VALUE < chunks:
        return (f"{name}: {what} collective has {size_bytes} bytes, fewer float32 values than "
                f"the job's {chunks} chunks; raise size_scale or lower chunks")
    return None


def emulator_problem(workload: Workload | ChakraTrace, dims: Sequence[int], chunks: int,
                     name: str = "the workload") -> str | None:
    """Why the emulator cannot replay ``workload`` on a job of ``dims`` with ``chunks``
    chunks per collective, in one sentence; None when it can."""
    if isinstance(workload, ChakraTrace):
        for node in workload.nodes:
            if node.collective is not None and (problem := _collective_problem(
                    name, f"node {node.id} ({node.name or 'unnamed'})'s", node.collective,
                    node.size_bytes, chunks)):
                return problem
        return None
    for layer in workload.layers:
        for stage, comm in (("forward", layer.fwd_comm), ("input-gradient", layer.ig_comm),
                            ("weight-gradient", layer.wg_comm)):
            if comm.active and (problem := _collective_problem(
                    name, f"layer {layer.name}'s {stage}", comm.kind, comm.size_bytes, chunks)):
                return problem
    group = workload.model_parallel_group if workload.kind in TRANSFORMER_TYPES else None
    network = [AstraDim("switch", n, 1.0) for n in dims]
    if len(logical_dims(network, group)[0]) != len(dims):
        return (f"{name}: its model-parallel group of {group} splits a dimension of "
                f"{'x'.join(map(str, dims))}, which the emulator does not replay; use "
                "--backend sim")
    return None


def plan_pass(workload: Workload | ChakraTrace, network: Sequence[AstraDim],
              system: ReplaySystem) -> PassPlan:
    """Replay one pass of ``workload`` (a Chakra trace: the trace) on the model and keep
    what it did (module doc)."""
    r: _Replay | _TraceReplay
    if isinstance(workload, ChakraTrace):
        r = _TraceReplay(workload.nodes, network, system, workload.source)
        r.log = ScheduleLog()
        model: ReplayResult | TraceResult = r.run(workload.source)
    else:
        r = _Replay(workload, network, system, passes=1)
        r.log = ScheduleLog()
        model = r.run()
    chunk_keys: dict[int, list[int]] = defaultdict(list)
    for cid, (key, _) in sorted(r.log.chunks.items()):
        chunk_keys[key].append(cid)
    collectives = []
    by_key = {key: (layer, stage) for layer, stage, key in r.issued if key is not None}
    for key, rec in enumerate(r.records):
        layer, stage = by_key[key]
        update = workload.layers[layer].update_cycles if isinstance(workload, Workload) else 0
        collectives.append(PlannedCollective(layer, stage, rec.kind, rec.size_bytes, rec.dims,
                                             tuple(chunk_keys[key]), update))
    sequences: dict[tuple[int, int], list[Phase]] = defaultdict(list)
    for phase in r.log.started:
        sequences[(phase.dim, 0)].append(phase)
    chunks = tuple(r.log.chunks[cid][1] for cid in range(len(r.log.chunks)))
    return PassPlan(tuple(r.issued), tuple(collectives), chunks,
                    {k: tuple(v) for k, v in sequences.items()}, model)


def predicted_pass_s(plan: PassPlan) -> float:
    """The model's time of the pass (every collective done), seconds."""
    return float(plan.model.finish_ns / Fraction(10**9))


def predicted_exposed_s(plan: PassPlan) -> float:
    """The model's exposed communication of the pass: its waits, and the time from the end of
    the loop's compute to the last collective done (a Chakra trace: the pass time not spent
    computing), seconds."""
    m = plan.model
    if isinstance(m, TraceResult):
        return float(max(Fraction(0), m.finish_ns - m.compute_ns) / Fraction(10**9))
    return float(m.exposed_total_ns / Fraction(10**9))
