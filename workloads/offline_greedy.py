"""Themis's dimension order per chunk: the greedy of ASTRA-sim's ``OfflineGreedy``, the one
implementation that the All-Reduce planner (:meth:`workloads.themis.ChunkSchedule.plan`) and
the training replay (:meth:`workloads.themis.ChunkSchedule.replay_orderer`) both run.

The greedy keeps one load per dimension: the Reduce-Scatter bytes charged to it so far, at
dimension 0's bandwidth. Each chunk gets the dimensions sorted by ascending load (an All-Gather:
descending), so its largest phase lands on the least-loaded dimension, and then charges the
loads along that order. While the loads are balanced (the gap between the ends of that sorted
list, as bytes on its first dimension, is worth less than a sixteenth of the chunk) the chunk
takes index order instead (ascending, an All-Gather's too), so a fresh greedy's first chunk
always does; its loads are then charged *by position* along the list in index order (an
All-Gather's reversed, so there the bytes of one dimension land on another's load, as in the
reference). Dimensions not involved in the collective, or of one NPU, move no bytes and
are left out of every order.

Two choices differ between the callers; each is a parameter:

``semantics``
    ties between equally loaded dimensions. ``astra-sim-1.0`` keeps one list that every chunk
    re-sorts in place, stably, so ties keep the order the previous chunk left (the list goes
    back to index order whenever a chunk takes index order); ``fabriclab`` puts the lower
    index first.
``whole_bytes``
    the arithmetic. False (the planner): sizes are real numbers, a phase of ``s`` bytes charges
    ``s·(n-1)/n`` and passes ``s/n`` on, and a chunk is balanced when the gap is below
    ``chunk/16``. True (the replay, as ASTRA-sim 1.0 computes it): sizes are whole bytes, a
    phase charges ``s·((n-1)/n)`` and passes ``s // n`` on, the gap is cut to whole bytes and
    compared with ``chunk // 16``. The two round differently in the last bit, which
    can turn a tie or a threshold test the other way, so neither caller takes the other's.
"""

from __future__ import annotations

from collections.abc import Sequence

from testbed.core.formulas import phase_sent_bytes
from workloads.schedule_engine import ASTRA_SIM_1_0, check_semantics

# A chunk takes index order while the load gap is worth less than chunk/16 bytes.
BALANCE_DIVISOR = 16


class OfflineGreedy:
    """Themis's greedy over dimensions of ``dim_sizes`` NPUs with ``dim_bandwidths`` each (any
    unit: only ratios matter). A fresh one has every load at 0."""

    # ASTRA-sim 1.0 runs a chunk this greedy ordered as Reduce-Scatters down every dimension of
    # its order and All-Gathers back on every one (its last dimension's All-Reduce split in two)
    split_last = True

    def __init__(self, dim_sizes: Sequence[int], dim_bandwidths: Sequence[float], *,
                 semantics: str = ASTRA_SIM_1_0, whole_bytes: bool = False) -> None:
        check_semantics(semantics)
        self.sizes = tuple(dim_sizes)
        self.bandwidths = tuple(dim_bandwidths)
        self.stable_ties = semantics == ASTRA_SIM_1_0
        self.whole_bytes = whole_bytes
        self.loads = [0.0] * len(self.sizes)
        self._sorted = list(range(len(self.sizes)))  # the list a stable sort re-sorts

    def order(self, size_bytes: int, involved: Sequence[bool] | None = None,
              gather: bool = False) -> list[int]:
        """The order of the next chunk of ``size_bytes`` over the ``involved`` dimensions (None:
        all), only those with more than one NPU; charges the loads. ``gather``: the chunk is an
        All-Gather (dimensions by descending load)."""
        n_dims = len(self.sizes)

        def live(d: int) -> bool:
            return self.sizes[d] > 1 and (involved is None or bool(involved[d]))

        if self.stable_ties:
            by_load = sorted(self._sorted, key=self.loads.__getitem__)
        else:
            by_load = sorted(range(n_dims), key=lambda d: (self.loads[d], d))
        if gather:
            by_load.reverse()
        self._sorted = by_load
        first = next((pos for pos, d in enumerate(by_load) if live(d)), None)
        if first is None:
            return []
        size: float | int = size_bytes if self.whole_bytes else float(size_bytes)
        if self._balanced(by_load, first, size_bytes, gather, live):
            by_index = list(range(n_dims))[::-1] if gather else list(range(n_dims))
            self._sorted = list(by_index)
            # charged by position: the parameters of dimension ``pos``, the load of the entry
            # there (the same dimension, except in a reversed All-Gather list)
            for pos, d in enumerate(by_index):
                if live(pos):
                    size = self._charge(d, pos, size, gather)
            return [d for d in range(n_dims) if live(d)]  # ascending, an All-Gather's too
        out = [d for d in by_load if live(d)]
        for d in out:
            size = self._charge(d, d, size, gather)
        return out

    def _ratio(self, d: int) -> float:
        return self.bandwidths[d] / self.bandwidths[0]

    def _charge(self, target: int, d: int, size: float | int, gather: bool) -> float | int:
        """Charge load ``target`` with a phase of ``size`` bytes on dimension ``d``; return the
        size after the phase."""
        n = self.sizes[d]
        if gather:
            self.loads[target] += phase_sent_bytes("AG", size, n) / self._ratio(d)
            return size * n
        if self.whole_bytes:
            self.loads[target] += size * ((n - 1) / n) / self._ratio(d)
            return size // n
        self.loads[target] += phase_sent_bytes("RS", size, n) / self._ratio(d)
        return size / n

    def _balanced(self, by_load: list[int], first: int, size_bytes: int, gather: bool,
                  live) -> bool:
        """Whether the loads are too close to reorder a chunk of ``size_bytes``: the gap from
        the first live dimension to the other end of the sorted list, as bytes on one of them,
        below a sixteenth of the chunk."""
        d = by_load[first]
        if not gather:
            n = self.sizes[d]
            gap_bytes = (abs(self.loads[by_load[-1]] - self.loads[d]) * self._ratio(d)
                         / ((n - 1) / n))
        else:
            last = max(pos for pos, e in enumerate(by_load) if live(e))
            other = by_load[last]
            gap_bytes = (abs(self.loads[other] - self.loads[d]) * self._ratio(other)
                         / (self.sizes[other] - 1))
        gap: float | int = int(gap_bytes) if self.whole_bytes else gap_bytes
        if gather:  # as bytes on the first live dimension: divided down the ones between
            for e in reversed(by_load[first:last]):
                if live(e):
                    gap = gap // self.sizes[e] if self.whole_bytes else gap / self.sizes[e]
        if self.whole_bytes:
            return gap < size_bytes // BALANCE_DIVISOR
        return gap < size_bytes / BALANCE_DIVISOR
