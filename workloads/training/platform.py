"""The platform a workload replays on: ASTRA-sim 1.0's network dimensions and system settings,
and the *logical* dimensions its collectives use (one physical dimension split in two where a
model-parallel group ends inside it, as ASTRA-sim's ``break_dimension`` does).

Bandwidths: an NPU's ``gbyte_s`` in a dimension (``links-count × link-bandwidth``), ASTRA-sim's
GB/s being 2**30 bytes/s (:mod:`testbed.core.astra_units`). Each message pays ``latency_ns`` per
hop plus the system file's ``endpoint-delay`` (ns); a switch is two hops, a fully connected link
one, a ring one per neighbour step. ``local-mem-bw`` is read for Chakra replays (ASTRA-sim 2.x
charges local reduction time at it; 1.0 does not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from testbed.core.astra_formats import IGNORED_SYSTEM_KEYS, AstraDim
from testbed.core.astra_units import ASTRA_GBYTE_S_IN_BYTES_PER_NS
from testbed.core.errors import SpecError
from testbed.core.registry import SCHEDULES

# the kinds of collective each implementation key sets, and fabriclab's collective per name
IMPLEMENTATION_KEYS = {"all-reduce-implementation": "ALLREDUCE",
                       "reduce-scatter-implementation": "REDUCESCATTER",
                       "all-gather-implementation": "ALLGATHER",
                       "all-to-all-implementation": "ALLTOALL"}
COLLECTIVE_OF_IMPLEMENTATION = {"ring": "ring", "direct": "direct",
                                "halvingDoubling": "halving-doubling"}
HOPS = {"switch": 2, "fully_connected": 1, "ring": 1}
INTRA = {"FIFO": "fifo", "SCF": "scf", "smallestFirst": "scf"}
INTER = {"baseline": "baseline", "ascending": "baseline", "themis": "themis",
         "offlineGreedy": "themis"}
READ_KEYS = frozenset(IMPLEMENTATION_KEYS) | {
    "scheduling-policy", "endpoint-delay", "active-chunks-per-dimension",
    "preferred-dataset-splits", "collective-optimization", "intra-dimension-scheduling",
    "inter-dimension-scheduling", "local-mem-bw"}
DROPPED_KEYS = IGNORED_SYSTEM_KEYS - READ_KEYS  # no effect on ASTRA-sim's analytical times


@dataclass(frozen=True)
class ReplaySystem:
    """What the replay takes from the system file."""

    splits: int = 1  # preferred-dataset-splits: chunks per collective
    intra: str = "fifo"  # fifo | scf
    # the chunk schedule: a name in testbed.core.registry.SCHEDULES (the system file's
    # baseline/ascending and themis/offlineGreedy are its baseline and themis); None: none,
    # every chunk in the fixed order (a flat job's one group)
    inter: str | None = "baseline"
    lifo: bool = True  # scheduling-policy: LIFO (priority to the newest collective) or FIFO
    localbw: bool = True  # collective-optimization: localBWAware (else baseline)
    endpoint_delay_ns: float = 0.0
    # local-mem-bw (GB/s of 1e9 bytes): ASTRA-sim 2.x charges each reducing ring message three
    # passes over local memory at this rate (Chakra replays only; None: not charged; 1.0's
    # fixed memory is charged by workloads.training.collectives.astra1_reduction_ns)
    local_mem_gbyte_s: float | None = None
    implementations: Mapping[str, tuple[str, ...]] | None = None  # kind -> collective per dim
    # the schedule object itself when the job configured it (testbed.core.jobs.ResolvedJob
    # .plugin); None: SCHEDULES' entry called ``inter``
    schedule: Any = None

    def chunk_schedule(self) -> Any:
        """The schedule whose ``replay_orderer`` orders the chunks (None: no schedule)."""
        if self.schedule is not None or self.inter is None:
            return self.schedule
        return SCHEDULES.get(self.inter)


@dataclass(frozen=True)
class LogicalDim:
    """A dimension collectives run on: ``physical`` is the network dimension it lies in."""

    size: int
    kind: str
    gbyte_s: float
    latency_ns: float
    physical: int
    physical_size: int = 0  # NPUs of the whole physical dimension (0: ``size``)

    @property
    def links(self) -> int:
        """Links an NPU's bandwidth in the physical dimension is split over: ``n-1`` on a
        fully connected one (also when a logical dimension covers part of it), else 1."""
        whole = self.physical_size or self.size
        return whole - 1 if self.kind == "fully_connected" and whole > 2 else 1

    @property
    def bytes_per_ns(self) -> float:
        return self.gbyte_s * ASTRA_GBYTE_S_IN_BYTES_PER_NS

    def message_latency_ns(self, endpoint_delay_ns: float) -> float:
        return HOPS[self.kind] * self.latency_ns + endpoint_delay_ns


def _fail(source: str, key: str, why: str) -> SpecError:
    return SpecError(f"{source}: {key}: {why}")


def _whole(pairs: dict[str, Any], key: str, default: int, source: str, minimum: int) -> int:
    raw = pairs.get(key, default)
    try:
        value = int(str(raw))
    except ValueError:
        raise _fail(source, key, f"{raw!r} is not a whole number") from None
    if value < minimum:
        raise _fail(source, key, f"{value} must be at least {minimum}")
    return value


def _positive(pairs: dict[str, Any], key: str, source: str) -> float | None:
    if key not in pairs:
        return None
    raw = pairs[key]
    try:
        value = float(str(raw))
    except ValueError:
        raise _fail(source, key, f"{raw!r} is not a number") from None
    if not value > 0:
        raise _fail(source, key, f"{value} must be above 0")
    return value


def _choice(pairs: dict[str, Any], key: str, default: str, table: Mapping[str, Any],
            source: str) -> Any:
    raw = str(pairs.get(key, default))
    if raw not in table:
        raise _fail(source, key, f"{raw!r} is not replayed; use one of {', '.join(table)}")
    return table[raw]


def replay_system(pairs: dict[str, Any], n_dims: int, source: str = "system.txt"
                  ) -> ReplaySystem:
    """The settings the replay runs from a system file's pairs
    (:func:`testbed.core.astra_formats.system_pairs`); an unsupported key or value is one
    sentence naming the file and the key."""
    for key in pairs:
        if key not in READ_KEYS and key not in DROPPED_KEYS:
            raise _fail(source, key, "is not a system key the replay reads")
    active = _whole(pairs, "active-chunks-per-dimension", 1, source, 1)
    if active != 1:
        raise _fail(source, "active-chunks-per-dimension",
                    f"{active}: the replay serves one chunk per dimension at a time (1)")
    implementations = {}
    for key, kind in IMPLEMENTATION_KEYS.items():
        raw = pairs.get(key, "_".join(["ring"] * n_dims))
        names = [str(x) for x in raw] if isinstance(raw, list) else str(raw).split("_")
        bad = [n for n in names if n not in COLLECTIVE_OF_IMPLEMENTATION]
        if bad:
            raise _fail(source, key, f"{bad[0]!r} is not replayed; use "
                        f"{', '.join(COLLECTIVE_OF_IMPLEMENTATION)} per dimension")
        if len(names) < n_dims:
            raise _fail(source, key, f"names {len(names)} implementations for {n_dims} "
                        "network dimensions")
        if kind == "ALLTOALL" and "halvingDoubling" in names[:n_dims]:
            raise _fail(source, key, "'halvingDoubling' is not replayed for All-to-All; use "
                        "direct or ring per dimension")
        implementations[kind] = tuple(COLLECTIVE_OF_IMPLEMENTATION[n] for n in names[:n_dims])
    delay = pairs.get("endpoint-delay", 0)
    try:
        delay_ns = float(str(delay))
    except ValueError:
        raise _fail(source, "endpoint-delay", f"{delay!r} is not a number") from None
    return ReplaySystem(
        local_mem_gbyte_s=_positive(pairs, "local-mem-bw", source),
        splits=_whole(pairs, "preferred-dataset-splits", 1, source, 1),
        intra=_choice(pairs, "intra-dimension-scheduling", "FIFO", INTRA, source),
        inter=_choice(pairs, "inter-dimension-scheduling", "baseline", INTER, source),
        lifo=_choice(pairs, "scheduling-policy", "LIFO", {"LIFO": True, "FIFO": False},
                     source),
        localbw=_choice(pairs, "collective-optimization", "localBWAware",
                        {"localBWAware": True, "baseline": False}, source),
        endpoint_delay_ns=delay_ns,
        implementations=implementations,
    )


def logical_dims(dims: Sequence[AstraDim], model_parallel_group: int | None
                 ) -> tuple[tuple[LogicalDim, ...], int]:
    """The logical dimensions and the last of them in the model-parallel group (-1: none).

    Dimensions fill the group from dimension 0 up; where the group ends inside a dimension,
    that dimension becomes two of sizes ``group / (NPUs below it)`` and the rest, each with
    the whole dimension's bandwidth (ASTRA-sim's ``break_dimension``)."""
    out = [LogicalDim(d.size, d.kind, d.gbyte_s, d.latency_ns, i) for i, d in enumerate(dims)]
    if not model_parallel_group or model_parallel_group == 1:
        return tuple(out), -1
    below = 1
    for i, d in enumerate(dims):
        if below * d.size < model_parallel_group:
            below *= d.size
            continue
        if below * d.size == model_parallel_group:
            return tuple(out), i
        first = model_parallel_group // below
        second = d.size // first
        split = [LogicalDim(first, d.kind, d.gbyte_s, d.latency_ns, i, d.size),
                 LogicalDim(second, d.kind, d.gbyte_s, d.latency_ns, i, d.size)]
        return tuple(out[:i] + split + out[i + 1:]), i
    return tuple(out), -1
