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
timing). :func:`emulator_problem` says in one sentence what the emulator cannot replay.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from testbed.core.astra_formats import AstraDim
from workloads.schedule_engine import Phase
from workloads.training.model import ALLREDUCE, TRANSFORMER_TYPES, Workload
from workloads.training.platform import ReplaySystem, logical_dims
from workloads.training.replay import ReplayResult, _Replay
from workloads.training.runner import ScheduleLog

BYTES_PER_VALUE = 4  # the real collectives move float32 values
EMULATED_KINDS = (ALLREDUCE,)


@dataclass(frozen=True)
class PlannedCollective:
    """One collective of the pass: the layer and stage that issued it, its kind, bytes per
    rank, the job dimensions it runs on and its chunk ids (consecutive)."""

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
    and collective index (None: nothing to run); ``chunks``: per chunk id its phases;
    ``sequences``: per ``(dimension, slot 0)`` the phases in the order they started."""

    issued: tuple[tuple[int, str, int | None], ...]
    collectives: tuple[PlannedCollective, ...]
    chunks: tuple[tuple[Phase, ...], ...]
    sequences: dict[tuple[int, int], tuple[Phase, ...]]
    model: ReplayResult

    @property
    def total_bytes(self) -> int:
        return sum(c.size_bytes for c in self.collectives)


def emulator_problem(workload: object, dims: Sequence[int], chunks: int,
                     name: str = "the workload") -> str | None:
    """Why the emulator cannot replay ``workload`` on a job of ``dims`` with ``chunks``
    chunks per collective, in one sentence; None when it can."""
    if not isinstance(workload, Workload):
        return f"{name}: a Chakra trace is replayed on the sim backend only; use --backend sim"
    for layer in workload.layers:
        for stage, comm in (("forward", layer.fwd_comm), ("input-gradient", layer.ig_comm),
                            ("weight-gradient", layer.wg_comm)):
            if not comm.active:
                continue
            if comm.kind not in EMULATED_KINDS:
                return (f"{name}: layer {layer.name}'s {stage} {comm.kind} is not replayed on "
                        f"the emulator (it runs {', '.join(EMULATED_KINDS)}); use --backend sim")
            if comm.size_bytes // BYTES_PER_VALUE < chunks:
                return (f"{name}: layer {layer.name}'s {stage} collective has "
                        f"{comm.size_bytes} bytes, fewer float32 values than the job's "
                        f"{chunks} chunks; raise size_scale or lower chunks")
    group = workload.model_parallel_group if workload.kind in TRANSFORMER_TYPES else None
    network = [AstraDim("switch", n, 1.0) for n in dims]
    if len(logical_dims(network, group)[0]) != len(dims):
        return (f"{name}: its model-parallel group of {group} splits a dimension of "
                f"{'x'.join(map(str, dims))}, which the emulator does not replay; use "
                "--backend sim")
    return None


def plan_pass(workload: Workload, network: Sequence[AstraDim], system: ReplaySystem
              ) -> PassPlan:
    """Replay one pass of ``workload`` on the model and keep what it did (module doc)."""
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
        update = workload.layers[layer].update_cycles
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
    the loop's compute to the last collective done, seconds."""
    m = plan.model
    return float((m.exposed_ns + m.finish_ns - m.pass_end_ns[-1]) / Fraction(10**9))
