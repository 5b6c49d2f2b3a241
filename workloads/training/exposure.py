"""Exposed communication per logical dimension, the one rule both backends apply to what a
pass recorded: the simulator's replay (its waits and each dimension's phase spans, exact ns) and
the emulator's worker (the waits its real-time loop blocked in and the phases its rank ran,
clock seconds).

A dimension's exposed communication in a window is the time of the window in which the
workload waited for communication while that dimension carried a phase; dimensions busy
together each count the time, so the dimensions' figures may add up to more than the pass's
exposed communication (and a wait while no phase ran counts in none of them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Protocol, TypeVar

T = TypeVar("T", float, Fraction)


class Timed(Protocol):
    """A phase as a trace records it: its logical dimension and when it ran."""

    dim: int
    start: float
    end: float


def covered(interval: tuple[T, T], spans: Iterable[tuple[T, T]]) -> T:
    """Time of ``interval`` covered by the union of ``spans`` (overlapping spans count once)."""
    lo, hi = interval
    total, reach = hi - hi, lo
    for s, e in sorted(spans):
        s, e = max(s, reach), min(e, hi)
        if e > s:
            total += e - s
            reach = e
    return total


def exposed_per_dim(waits: Sequence[tuple[T, T]], dim_spans: Sequence[Sequence[tuple[T, T]]],
                    start: T, end: T) -> list[T]:
    """Per logical dimension (one per list of ``dim_spans``), the time of ``[start, end)`` in
    which one of ``waits`` was under way while the dimension carried one of its spans (module
    doc), in the unit of the inputs."""
    inside = [(max(s, start), min(e, end)) for s, e in waits if e > start and s < end]
    return [sum((covered(w, spans) for w in inside), end - end) for spans in dim_spans]


def phase_spans(phases: Iterable[Timed], dims: int) -> list[list[tuple[float, float]]]:
    """Per logical dimension ``0 .. dims-1``, when ``phases`` ran on it."""
    out: list[list[tuple[float, float]]] = [[] for _ in range(dims)]
    for p in phases:
        out[p.dim].append((p.start, p.end))
    return out
