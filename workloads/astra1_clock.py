"""ASTRA-sim 1.0's whole-ns clock: what its analytical backend charges a chunk phase beyond the
bandwidth model. Each term was measured on AnalyticalAstra (``docs/themis-semantics.md``):

* every step's message time is rounded down to a whole ns, and the phase takes one ns more;
* every reducing message on the phase's critical path is written once and read twice in the
  NPU's memory, at :data:`MEMORY_BYTES_PER_NS`, each pass rounded down.

The training replay times phases with these terms (:mod:`workloads.training.runner`). The
single-collective model is bandwidth only, and uses them only to order phases that end at the
same instant there but not in ASTRA-sim (:func:`tie_ns`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

from workloads.collectives import Collective
from workloads.schedule_engine import Phase

#: bytes per ns of the memory ASTRA-sim 1.0's analytical backend gives every NPU (its
#: ``main.cc`` builds a ``SimpleMemory`` with an NPU access bandwidth of 500000)
MEMORY_BYTES_PER_NS = 500_000
NS_PER_S = 10**9


def reduction_ns(op: str, size_bytes: Fraction, n: int, implementation: str) -> int:
    """The local reduction time of one Reduce-Scatter or All-Reduce phase of ``size_bytes``
    per NPU on ``n`` NPUs: the reducing messages on its critical path are a ring's ``n-1`` of
    ``size/n``, direct's one of ``size/n``, halving-doubling's ``size/4``, ``size/8``, ...,
    ``size/n`` (its first step's is not on the path). 0 for other phases."""
    if op not in ("RS", "AR") or n < 2:
        return 0
    whole = int(size_bytes)
    if implementation == "ring":
        messages = [whole // n] * (n - 1)
    elif implementation == "direct":
        messages = [whole // n]
    else:  # halving-doubling
        messages = [whole >> k for k in range(2, n.bit_length())]
    return sum(3 * (m // MEMORY_BYTES_PER_NS) for m in messages)


def step_bytes(collective: Collective, op: str, n: int, size_bytes: Fraction) -> list[Fraction]:
    """What one NPU (rank 0) sends in each step of phase ``op``."""
    return [Fraction(sum(b for a, _, b in step if a == 0))
            for step in collective.transfers(op, n, size_bytes)]


def wire_ns(steps_bytes: Sequence[Fraction], rate_bytes_per_ns: Fraction) -> int:
    """A phase's time on the wire: each step's message time rounded down, plus one ns."""
    return sum(math.floor(b / rate_bytes_per_ns) for b in steps_bytes) + 1


def tie_ns(collectives: Sequence[Collective], dim_sizes: Sequence[int],
           rates_bytes_per_s: Sequence[Fraction]) -> Callable[[Phase], Fraction]:
    """Per phase, ASTRA-sim's time minus the bandwidth model's, in ns (rounding, the extra ns
    and the reduction; negative when rounding down outweighs them). ``collectives``,
    ``dim_sizes`` and ``rates_bytes_per_s`` are per dimension."""
    known: dict[tuple[int, str, Fraction], Fraction] = {}

    def extra(phase: Phase) -> Fraction:
        key = (d := phase.dim, phase.op, phase.size)
        if key not in known:
            rate = Fraction(rates_bytes_per_s[d]) / NS_PER_S
            steps = step_bytes(collectives[d], phase.op, dim_sizes[d], phase.size)
            known[key] = (wire_ns(steps, rate) - sum(steps, Fraction(0)) / rate
                          + reduction_ns(phase.op, phase.size, dim_sizes[d],
                                         collectives[d].name))
        return known[key]
    return extra
