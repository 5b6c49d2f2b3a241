"""How much jitter a set of round trips shows, beside round trips of the same delay without it.

netem (and the delay line) draw each crossing's jitter uniformly within ±j, so a round trip
over ``crossings`` jittered crossings spreads by the sum of that many such draws. On a machine
whose own timing spreads as much (a software-emulated VM: timers fire late by varying
amounts), the two cannot be told apart by the spread alone. Round trips taken at the same
time on a path with the same delay and no jitter carry the machine's spread alone; so the
jitter is the ``j`` for which those round trips, each plus a draw of the jitter, spread as
the jittered ones do (:func:`fit_jitter_ms`). Spread is read from centred quantiles, which
a few very late round trips move less than a standard deviation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

QUANTILES = (0.1, 0.2, 0.25, 0.3, 0.4, 0.6, 0.7, 0.75, 0.8, 0.9)
DRAWS_PER_SAMPLE = 200  # jitter draws added to each plain round trip
GRID_STEP_MS = 0.05


def _centred(samples: np.ndarray) -> np.ndarray:
    return np.quantile(samples, QUANTILES) - np.median(samples)


def with_jitter(plain_ms: Sequence[float], jitter_ms: float, crossings: int,
                seed: int = 1) -> np.ndarray:
    """``plain_ms`` round trips, each with :data:`DRAWS_PER_SAMPLE` draws of ``crossings``
    uniform ±``jitter_ms`` added: what they would read with that jitter."""
    rng = np.random.default_rng(seed)
    plain = np.asarray(plain_ms, dtype=float)
    draws = rng.uniform(-jitter_ms, jitter_ms,
                        size=(plain.size, DRAWS_PER_SAMPLE, crossings)).sum(axis=2)
    return (plain[:, None] + draws).ravel()


def fit_jitter_ms(jittered_ms: Sequence[float], plain_ms: Sequence[float], crossings: int,
                  most_ms: float) -> float:
    """The jitter per crossing (ms, a multiple of :data:`GRID_STEP_MS` up to ``most_ms``)
    whose draws, added to ``plain_ms``, give the centred quantiles closest (least squares) to
    those of ``jittered_ms``; 0 where the plain round trips already spread as much."""
    if len(jittered_ms) < 10 or len(plain_ms) < 10:
        raise ValueError("at least 10 round trips of each kind are needed")
    target = _centred(np.asarray(jittered_ms, dtype=float))
    grid = np.arange(0.0, most_ms + GRID_STEP_MS / 2, GRID_STEP_MS)
    errors = [float(np.sum((_centred(with_jitter(plain_ms, j, crossings)) - target) ** 2))
              for j in grid]
    return float(grid[int(np.argmin(errors))])
