"""RapidNetSim's model of a job's communication, as its job generator and simulator use it
(github nothepeople/RapidNetSim at 890901b): one home for the facts that both
``scripts/rapidnetsim_jobs.py`` (deriving the job list) and :mod:`testbed.sim.traces` (drawing
run times as its simulator does) read.

Expected collective times are per unit of model size: 4 GPUs a server, rate 1000 inside a
server and 100 between servers.
"""

from __future__ import annotations

import math

# Its 17 small models by their All-Reduce share of the run time, in its list order (its
# ``random.choice`` draws from this list, repeats included).
SMALL_SHARES = (0.25, 0.23, 0.16, 0.1, 0.07, 0.04, 0.04, 0.05, 0.04, 0.03, 0.02,
                0.05, 0.05, 0.04, 0.02, 0.12, 0.08)
PANGU_SHARE = 0.0737 + 0.258 + 0.0158 + 0.0002  # Pangu's communication share, summed
SERVER_GPUS = 4
INTRA_RATE, INTER_RATE = 1000.0, 100.0  # per unit of model size, inside and between servers


def hd_time(n: int) -> float:
    """Halving-doubling All-Reduce over ``n`` GPUs."""
    steps, size, total = int(math.log2(n)), 0.5, 0.0
    for k in range(steps):
        inside = n <= SERVER_GPUS or k < int(math.log2(SERVER_GPUS))
        total += size / (INTRA_RATE if inside else INTER_RATE)
        size /= 2
    if n <= SERVER_GPUS and total == 0:
        total = 1 / INTER_RATE / 2
    return 2 * total


def ring_time(n: int) -> float:
    """Ring All-Reduce over ``n`` GPUs (hierarchical past one server)."""
    if n > SERVER_GPUS:
        return 2 * (SERVER_GPUS - 1) / SERVER_GPUS / INTRA_RATE + 1 / SERVER_GPUS / INTER_RATE
    return (n - 1) / n / INTRA_RATE


def alltoall_time(n: int) -> float:
    """All-to-all over ``n`` GPUs."""
    return (n - 1) / (INTER_RATE if n > SERVER_GPUS else INTRA_RATE)


EXPECTED = (("halving-doubling", hd_time), ("ring", ring_time), ("all-to-all", alltoall_time))
