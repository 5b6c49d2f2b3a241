"""A job's algorithm, checked against the registries: a collective of
:data:`~testbed.core.registry.COLLECTIVES` runs an All-Reduce over all the job's ranks as one
flat group; a schedule of :data:`~testbed.core.registry.SCHEDULES` runs a chunked hierarchical
All-Reduce whose every dimension runs the collective ``dim_algorithm`` (or, with
:data:`BY_KIND`, its kind's own); an all-to-all
algorithm of :data:`~testbed.core.registry.ALLTOALLS` runs an all-to-all workload, flat too.
Checking a name only reads the registry's names; checking group sizes loads that one
algorithm (never a backend)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import AfterValidator

from testbed.core.formulas import ALLREDUCE, ALLTOALL
from testbed.core.presets import DIM_ALGORITHM_OF_KIND
from testbed.core.registry import ALLTOALLS, COLLECTIVES, SCHEDULES, TRANSPORTS, RegistryError

TRAINING = "training"  # the workload kind a training job has (experiment.TrainingWorkload)


def algorithm_names() -> tuple[str, ...]:
    """Every All-Reduce algorithm: collectives (flat), then schedules."""
    return COLLECTIVES.names() + SCHEDULES.names()


def check_algorithm(name: str) -> str:
    """``name`` if a collective, a schedule or an all-to-all algorithm is called that, else a
    ValueError naming all three (whether it suits the workload is :func:`kind_error`'s)."""
    if name not in algorithm_names() + ALLTOALLS.names():
        raise RegistryError(
            f"{name!r} is neither a collective algorithm ({', '.join(COLLECTIVES.names())}), "
            f"a chunk schedule ({', '.join(SCHEDULES.names())}) nor an all-to-all algorithm "
            f"({', '.join(ALLTOALLS.names())})")
    return name


# A chunk schedule's dim_algorithm that gives each dimension its kind's collective, as
# ASTRA-sim's systems do (presets.DIM_ALGORITHM_OF_KIND: halving-doubling on a switch, ring on
# a ring, direct on a fully connected dimension).
BY_KIND = "by-kind"


def check_dim_algorithm(name: str) -> str:
    """``name`` if it is :data:`BY_KIND` or a registered collective."""
    return name if name == BY_KIND else COLLECTIVES.check(name)


def dim_algorithms(dim_algorithm: str, kinds: Sequence[str]) -> list[str]:
    """The collective each dimension of ``kinds`` runs under ``dim_algorithm``."""
    if dim_algorithm == BY_KIND:
        return [DIM_ALGORITHM_OF_KIND[k] for k in kinds]
    return [dim_algorithm] * len(kinds)


# Spec and worker-config field types: the names the registries hold now.
AlgorithmName = Annotated[str, AfterValidator(check_algorithm)]
CollectiveName = Annotated[str, AfterValidator(COLLECTIVES.check)]
DimAlgorithmName = Annotated[str, AfterValidator(check_dim_algorithm)]
TransportName = Annotated[str, AfterValidator(TRANSPORTS.check)]


def is_alltoall(algorithm: str) -> bool:
    """Whether ``algorithm`` is an all-to-all algorithm (not an All-Reduce)."""
    return algorithm in ALLTOALLS.names()


def is_schedule(algorithm: object) -> bool:
    """Whether ``algorithm`` names a chunk schedule."""
    return algorithm in SCHEDULES.names()


def is_reference_schedule(algorithm: object) -> bool:
    """Whether ``algorithm`` is a chunk schedule that comparisons measure the others against
    (``reference = True``: the baseline)."""
    return algorithm in SCHEDULES.references()


def is_flat(algorithm: str) -> bool:
    """Whether ``algorithm`` runs over the job as one group (a collective or an all-to-all,
    not a schedule)."""
    return algorithm in COLLECTIVES.names() or is_alltoall(algorithm)


def replay_error(schedule: Any, name: str) -> str | None:
    """Why a training job's replay cannot order its chunks with ``schedule`` (registered as
    ``name``): it has no ``replay_orderer`` (docs/extending.md, "A chunk schedule"); else None."""
    if callable(getattr(schedule, "replay_orderer", None)):
        return None
    return (f"chunk schedule {name} has no replay_orderer(dim_sizes, dim_bandwidths), which a "
            "training job's replay orders its chunks with (docs/extending.md)")


def kind_error(kind: str, algorithm: str) -> str | None:
    """Why ``algorithm`` cannot run a workload of ``kind`` (``allreduce`` and ``dnn`` need an
    All-Reduce algorithm, ``alltoall`` an all-to-all one, ``training`` an All-Reduce algorithm
    and, if a schedule, one that orders the replay's chunks), or None."""
    if kind == TRAINING and is_schedule(algorithm) and (
            bad := replay_error(SCHEDULES.get(algorithm), algorithm)):
        return bad
    if kind == ALLTOALL:
        if is_alltoall(algorithm):
            return None
        return (f"{algorithm} is an All-Reduce algorithm; an alltoall workload needs an "
                f"all-to-all algorithm ({', '.join(ALLTOALLS.names())})")
    if is_alltoall(algorithm):
        what = "an allreduce" if kind == ALLREDUCE else f"a {kind}"
        return (f"{algorithm} is an all-to-all algorithm; {what} workload needs a collective "
                f"({', '.join(COLLECTIVES.names())}) or a chunk schedule "
                f"({', '.join(SCHEDULES.names())})")
    return None


def alltoall_sizes_error(sizes: list[int], world: int) -> tuple[int, str] | None:
    """``(index, reason)`` for the first all-to-all buffer size (bytes per rank) that does
    not split into ``world`` equal blocks of whole float32 values, else None."""
    unit = 4 * world
    for i, size in enumerate(sizes):
        if size < unit or size % unit:
            lower = size // unit * unit
            hint = f"e.g. {lower} or {lower + unit}" if lower else f"e.g. {unit}"
            return i, (f"{size} bytes do not split into {world} equal blocks of float32 values "
                       f"(one per rank); use a multiple of {unit} bytes, {hint}")
    return None


def groups_error(algorithm: str, dim_algorithm: str, world: int,
                 dims: Sequence[int] | None) -> tuple[str, str] | None:
    """``(field, reason)`` when the job's groups do not suit its algorithm: all ``world``
    ranks for a flat one (an all-to-all: one flat group, ``dims`` at most ``[world]``), every
    dimension of ``dims`` (if known) for a schedule."""
    if is_alltoall(algorithm):
        if dims is not None and list(dims) != [world]:
            return ("dims", f"an all-to-all runs over all {world} ranks as one group; leave "
                            "dims out")
        reason = ALLTOALLS.get(algorithm).group_size_error(world)
        return ("algorithm", reason) if reason else None
    if is_flat(algorithm):
        reason = COLLECTIVES.get(algorithm).group_size_error(world)
        return ("algorithm", reason) if reason else None
    if dim_algorithm == BY_KIND:
        return None  # each dimension's own collective: checked against the fabric
    collective = COLLECTIVES.get(dim_algorithm)
    if not getattr(collective, "per_dimension", True):
        return ("dim_algorithm", f"{dim_algorithm} runs only as a flat job's algorithm, not in "
                                 f"a chunk schedule's dimensions; set algorithm: {dim_algorithm}")
    if dims is None:
        return None
    for n in dims:
        if n > 1 and (reason := collective.group_size_error(n)):
            return ("dim_algorithm", f"{reason} in dims {'x'.join(map(str, dims))}")
    return None


def ring_dimension_error(dim_algorithm: str, n: int) -> str | None:
    """Why a ``kind: ring`` dimension of ``n`` hosts (point-to-point links to the next and
    previous host only) cannot carry ``dim_algorithm``: its links must join ring neighbours."""
    near = {(p, (p + 1) % n) for p in range(n)} | {(p, (p - 1) % n) for p in range(n)}
    roles = COLLECTIVES.get(dim_algorithm).link_roles
    if all((p, a) in near and (p, b) in near for p in range(n) for a, b in roles(p, n)):
        return None
    return (f"{dim_algorithm} exchanges data beyond ring neighbours, which a ring dimension "
            f"of {n} hosts has no links for; make that dimension kind: switch or use "
            "dim_algorithm: ring")


def default_dims(ranks: int, algorithm: str) -> list[int]:
    """``[ranks]`` for a flat collective; for a schedule the 2-D split with the smallest
    factor ≥ 2 first (``[ranks]`` if there is none)."""
    if not is_flat(algorithm):
        for f in range(2, math.isqrt(ranks) + 1):
            if ranks % f == 0:
                return [f, ranks // f]
    return [ranks]
