"""A chunk schedule from outside fabriclab, as a researcher would write one: ``reverse`` sends
every chunk through the dimensions from the last to the first (the baseline's order turned
round), so its largest phase lands on the last dimension. It implements both halves of the
schedule protocol (docs/extending.md, "A chunk schedule"): ``plan`` for All-Reduce jobs and
``replay_orderer`` for training jobs. ``PLAN_ONLY`` has ``plan`` alone, which a training job
refuses. The tests register it through the registry's API and through an entry point."""

from __future__ import annotations

from collections.abc import Sequence

from workloads.themis import ChunkPlan, split_sizes, validate_shape


def _reversed_dims(sizes: Sequence[int], involved: Sequence[bool] | None = None) -> list[int]:
    return [d for d in reversed(range(len(sizes)))
            if sizes[d] > 1 and (involved is None or involved[d])]


class ReverseOrder:
    """A training replay's orderer: every chunk the last dimension first."""

    split_last = False  # an All-Reduce chunk keeps its All-Reduce on its order's last dimension

    def __init__(self, dim_sizes: Sequence[int]) -> None:
        self.sizes = tuple(dim_sizes)

    def order(self, size_bytes: int, involved: Sequence[bool], gather: bool) -> list[int]:
        return _reversed_dims(self.sizes, involved)


class PlanOnly:
    """A schedule for All-Reduce jobs only: every chunk the last dimension first."""

    reference = False  # comparisons measure other schedules against the baseline, not this

    def plan(self, dim_sizes: Sequence[int], dim_bandwidths: Sequence[float],
             total_bytes: int, chunks: int, align: int = 1) -> list[ChunkPlan]:
        sizes, _ = validate_shape(dim_sizes, dim_bandwidths)
        order = tuple(_reversed_dims(sizes))
        return [ChunkPlan(i, size, order)
                for i, size in enumerate(split_sizes(total_bytes, chunks, align))]


class Reverse(PlanOnly):
    """The same schedule, for training jobs too."""

    def replay_orderer(self, dim_sizes: Sequence[int],
                       dim_bandwidths: Sequence[float]) -> ReverseOrder:
        return ReverseOrder(dim_sizes)


SCHEDULE = Reverse()
PLAN_ONLY = PlanOnly()
