"""What a link's delay and loss do to a transfer: path delay, path loss and the TCP rate a lossy
path allows. Pure formulas, shared by the experiment simulator, the cluster simulator, the
model and the planner (the links' values are fabric data: :mod:`testbed.core.spec`).

Delay. A path's one-way delay is the sum of its links' delays; a synchronous step of a
collective ends when its last message has arrived, so it pays the largest one-way delay of
the paths it uses, once (the bytes of a step are sent back to back, not one round trip each).

Loss. A path loses a packet where any of its links does: ``1 - Π(1 - p_i)``. A TCP flow on it
is held to the Mathis et al. (1997) steady-state rate::

    rate ≤ MSS / (RTT · sqrt(2p/3))

with MSS the segment's payload (1448 bytes here), RTT the path's round trip (twice its
one-way delay: the queueing-free path delay, the reverse path as long as the forward one) and
p the path's loss. Its limits, which the simulators inherit:

- steady-state congestion avoidance only: no slow start, no retransmission timeouts (which
  dominate at high loss, roughly p above a few percent, and on short flows), no fast-recovery
  detail, Reno's halving (CUBIC's window grows otherwise);
- losses independent and random (the ``statistic`` match and netem's default), not bursts;
- RTT excludes queueing delay, so a flow sharing a congested queue is predicted too fast;
- with RTT 0 (no delay on the path) the bound is infinite and the link rate alone holds the
  flow.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

# Bulk TCP's payload per segment on a 1500-byte MTU (testbed.core.formulas.TCP_GOODPUT).
MSS_BYTES = 1448
MATHIS_C = math.sqrt(3 / 2)  # the constant of the periodic-loss derivation


def path_delay_s(delays_s: Iterable[float]) -> float:
    """The one-way delay of a path, the sum of its links' delays (seconds)."""
    return float(sum(delays_s))


def path_loss(losses: Iterable[float]) -> float:
    """The fraction of packets a path of links losing ``losses`` loses (independently)."""
    kept = 1.0
    for p in losses:
        kept *= 1.0 - p
    return 1.0 - kept


def mathis_rate_bit_s(rtt_s: float, loss: float, mss_bytes: int = MSS_BYTES) -> float:
    """The Mathis et al. bound on a TCP flow's rate (bit/s) at round trip ``rtt_s`` and packet
    loss ``loss``: ``MSS·C / (RTT·sqrt(p))`` with C = sqrt(3/2); infinite when either is 0
    (no loss, or no delay: see the module docstring's limits)."""
    if loss <= 0 or rtt_s <= 0:
        return math.inf
    return mss_bytes * 8 * MATHIS_C / (rtt_s * math.sqrt(loss))


def lossy_rate_bit_s(rate_bit_s: float, one_way_s: float, loss: float) -> float:
    """A flow's rate on a path of ``rate_bit_s`` with ``one_way_s`` delay and ``loss``: the
    smaller of the link rate and the Mathis bound at an RTT of twice the one-way delay."""
    return min(rate_bit_s, mathis_rate_bit_s(2 * one_way_s, loss))


def hop_links(dim_kind: str) -> int:
    """How many links one hop of a dimension of ``dim_kind`` crosses: a ``switch``
    dimension's two (the host's link up, the peer's down), a ``ring`` or ``fully_connected``
    dimension's one (the link between the two peers)."""
    return 2 if dim_kind == "switch" else 1


def hop_delay_us(dim_kind: str, link_delay_us: float) -> float:
    """The one-way delay of one hop of a dimension whose links each delay ``link_delay_us``."""
    return hop_links(dim_kind) * link_delay_us


def hop_loss(dim_kind: str, link_loss: float) -> float:
    """The loss of one hop of a dimension whose links each lose ``link_loss``."""
    return path_loss([link_loss] * hop_links(dim_kind))
