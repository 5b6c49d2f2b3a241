"""Shared by the collective and transport tests: exact inputs and in-process All-Reduces."""

from __future__ import annotations

import numpy as np

from workloads.launcher import run_in_threads


def inputs(rank: int, count: int) -> np.ndarray:
    """Integer-valued float32 input of ``rank``; distinct per rank and index (sums stay exact)."""
    return ((np.arange(count) * 7 + rank * 13) % 101 + rank).astype(np.float32)


def allreduce_counts(configs: list[dict], counts: list[int]) -> list[list[np.ndarray]]:
    """All-Reduce ``inputs(rank, count)`` for every count on in-process ranks; return each
    rank's results."""

    def body(worker):
        outs = []
        for count in counts:
            buf = inputs(worker.cfg.rank, count)
            worker.allreduce(buf)
            outs.append(buf)
        return outs

    return run_in_threads(configs, body)
