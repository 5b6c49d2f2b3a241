"""The formulas every layer shares, in one place: nccl-tests bandwidths and bulk TCP goodput on
a shaped wire. (Rates here are whatever unit the caller passes; only the ratios are defined.)"""

from __future__ import annotations

# Bulk TCP carries 1448-byte segments in 1514-byte Ethernet frames: the data a shaped link
# delivers per wire bit. The emulator's counters see one header per TSO packet, so they read
# TCP_GOODPUT of a full link; 1 / TCP_GOODPUT turns them back into wire-equivalent rates.
TCP_GOODPUT = 1448 / 1514


def busbw_factor(world: float) -> float:
    """nccl-tests' All-Reduce bus bandwidth over algorithm bandwidth: 2(n-1)/n."""
    return 2 * (world - 1) / world


def bandwidths(size: float, seconds: float, world: float) -> tuple[float, float]:
    """(algbw, busbw) of an All-Reduce of ``size`` bytes in ``seconds`` over ``world`` ranks,
    in bytes per second: algbw = S/t, busbw = algbw * 2(n-1)/n."""
    algbw = size / seconds if seconds > 0 else 0.0
    return algbw, algbw * busbw_factor(world)


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
