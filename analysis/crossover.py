"""Where one algorithm stops beating another as the message grows: the size at which
halving-doubling (fewer steps, each paying the links' delay) stops beating a ring (more steps,
gentler on an oversubscribed fabric). Pure: times in, a size out.

Between the last measured size where the first algorithm is faster and the next one, the
crossover is where the difference of the two times, taken as linear in the size between them,
is zero: exact for α-β times (each ``a + b·S``), a fair reading of measured ones. Noise that
flips the winner at small sizes does not matter: it is the *last* win that counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from testbed.core.units import format_size

CROSSES, ALWAYS, NEVER, UNKNOWN = "crosses", "always", "never", "unknown"


@dataclass(frozen=True)
class Crossover:
    """``state``: ``crosses`` (at ``size_bytes``, between the measured ``low`` where the first
    still wins and ``high`` where it no longer does), ``always`` (the first wins at every size,
    up to ``high``), ``never`` (at none, from ``low``) or ``unknown`` (no size has both)."""

    state: str
    size_bytes: float | None = None
    low: int | None = None
    high: int | None = None

    def describe(self) -> str:
        """``1.01 MiB (between 512 KiB and 4 MiB)``, ``above 64 MiB``, ``below 4 KiB``."""
        if self.state == CROSSES and self.size_bytes is not None:
            return (f"{format_size(self.size_bytes, sep=' ')} (between "
                    f"{format_size(self.low or 0, sep=' ')} and "
                    f"{format_size(self.high or 0, sep=' ')})")
        if self.state == ALWAYS:
            return f"above {format_size(self.high or 0, sep=' ')} (it wins at every size)"
        if self.state == NEVER:
            return f"below {format_size(self.low or 0, sep=' ')} (it wins at no size)"
        return "n/a"


def crossover(first_s: Mapping[int, float], second_s: Mapping[int, float]) -> Crossover:
    """Where ``first`` (times per size, s) stops being faster than ``second``: the last size
    at which it is strictly faster and the next one bracket the crossover (see the module
    docstring). Sizes missing from either, or without a positive time, are left out."""
    sizes = sorted(s for s in set(first_s) & set(second_s)
                   if _ok(first_s[s]) and _ok(second_s[s]))
    if not sizes:
        return Crossover(UNKNOWN)
    wins = [s for s in sizes if first_s[s] < second_s[s]]
    if not wins:
        return Crossover(NEVER, low=sizes[0], high=sizes[-1])
    low = wins[-1]
    if low == sizes[-1]:
        return Crossover(ALWAYS, low=sizes[0], high=low)
    high = sizes[sizes.index(low) + 1]
    d_low = first_s[low] - second_s[low]  # < 0
    d_high = first_s[high] - second_s[high]  # >= 0
    at = low + (high - low) * (-d_low) / (d_high - d_low)
    return Crossover(CROSSES, at, low, high)


def factor(a: Crossover, b: Crossover) -> float | None:
    """How far apart two crossovers are, as a factor ≥ 1 (``max(a/b, b/a)``); None unless
    both cross."""
    if a.state != CROSSES or b.state != CROSSES or not a.size_bytes or not b.size_bytes:
        return None
    return max(a.size_bytes / b.size_bytes, b.size_bytes / a.size_bytes)


def _ok(x: object) -> bool:
    return isinstance(x, int | float) and x == x and x > 0
