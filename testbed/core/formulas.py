"""The formulas every layer shares, in one place: nccl-tests bandwidths and bulk TCP goodput on
a shaped wire. (Rates here are whatever unit the caller passes; only the ratios are defined.)"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

FRAME_BYTES = 1514  # a full Ethernet frame: a 1500-byte IP packet and its 14-byte header
# Bulk TCP carries 1448-byte segments in 1514-byte Ethernet frames: the data a shaped link
# delivers per wire bit. The emulator's counters see one header per TSO packet, so they read
# TCP_GOODPUT of a full link; 1 / TCP_GOODPUT turns them back into wire-equivalent rates.
TCP_GOODPUT = 1448 / FRAME_BYTES
# A shaped link is faithful when what it achieved lies within 1 ± this of what it was configured
# to carry (the calibration's check, the run's fidelity and the link invariant alike).
RATE_TOLERANCE = 0.10
# Interface counters see a TSO packet (up to 64 KiB of payload) with one set of headers, while
# HTB charges the link for every segment's headers (the kernel's qdisc_pkt_len), as a wire
# would. For bulk TCP with 1448-byte segments (1514-byte frames) a full link therefore shows
# 1448/1514 of its rate in the counters; scaling by the inverse gives wire-equivalent bytes.
TCP_WIRE_FACTOR = 1 / TCP_GOODPUT
MIN_CPU_IDLE = 0.20  # below this the emulation is CPU bound and cannot be trusted


# What a collective row of a trace is (its ``collective`` column); a trace without the column
# is an All-Reduce. All-Gathers and Reduce-Scatters come from training workloads.
ALLREDUCE, ALLTOALL = "allreduce", "alltoall"
ALLGATHER, REDUCESCATTER = "allgather", "reducescatter"
COLLECTIVE_KINDS = (ALLREDUCE, ALLTOALL, ALLGATHER, REDUCESCATTER)


def busbw_factor(world, kind: str = ALLREDUCE):
    """nccl-tests' bus bandwidth over algorithm bandwidth on ``world`` ranks (a number or an
    array): 2(n-1)/n for an All-Reduce (``all_reduce_perf``), (n-1)/n for an all-to-all
    (``alltoall_perf``: each rank keeps 1/n of its buffer and sends the rest), and (n-1)/n for
    an All-Gather or a Reduce-Scatter (``all_gather_perf``, ``reduce_scatter_perf``)."""
    if kind in (ALLTOALL, ALLGATHER, REDUCESCATTER):
        return (world - 1) / world
    if kind == ALLREDUCE:
        return 2 * (world - 1) / world
    raise ValueError(f"collective kind {kind!r} is not one of {', '.join(COLLECTIVE_KINDS)}")


def bandwidths(size: float, seconds: float, world: float,
               kind: str = ALLREDUCE) -> tuple[float, float]:
    """(algbw, busbw) of a collective of ``kind`` over ``world`` ranks taking ``seconds``, in
    bytes per second: algbw = S/t with S the bytes per rank (an All-Reduce's buffer, an
    all-to-all's send buffer), busbw = algbw · :func:`busbw_factor`."""
    algbw = size / seconds if seconds > 0 else 0.0
    return algbw, algbw * busbw_factor(world, kind)


def phase_sent_bytes(op: str, size_bytes, group: int):
    """Bytes each rank sends in one bandwidth-optimal collective phase over ``group`` ranks
    (ring and halving-doubling alike), exact for Fractions: ``size_bytes`` is the input per
    rank (for ``AG`` the shard it holds). RS (n-1)/n·S, AR twice that, AG (n-1)·shard."""
    if op == "RS":
        return size_bytes * (group - 1) / group
    if op == "AR":
        return 2 * size_bytes * (group - 1) / group
    if op == "AG":
        return size_bytes * (group - 1)
    raise ValueError(f"phase op {op!r} is not RS, AR or AG")


def link_share(kind: str, n: int, collective: Any) -> Fraction:
    """The fraction of a host's bandwidth in a dimension of ``kind`` and ``n`` hosts that
    ``collective`` (a :class:`workloads.collectives.Collective`) can use: 1, except on a
    ``fully_connected`` dimension, whose bandwidth is split evenly over ``n-1`` links (as
    ASTRA-sim splits an FC NPU's), of which the collective uses its ``links_at_once(n)``
    (a ring 1 of them, ``direct`` all)."""
    if kind != "fully_connected" or n <= 2:
        return Fraction(1)
    return Fraction(min(collective.links_at_once(n), n - 1), n - 1)
