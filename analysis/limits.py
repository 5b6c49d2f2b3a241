"""What a host could send at most: the sum of its links' configured rates. A bus bandwidth
above it (every host has to send ``busbw · t`` bytes in ``t``) is a measurement to distrust,
flagged wherever the figure is shown."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: Measured above the host's rate by more than this share: flagged (counters round).
TOLERANCE = 0.02


def host_rate_mbit_s(topology: Mapping[str, Any], hosts: Iterable[str]) -> float | None:
    """The smallest, over ``hosts``, of the sum of a host's links' configured rates (Mbit/s,
    as emulated); None when the topology names none of their links."""
    totals: dict[str, float] = {}
    for lk in topology.get("links") or []:
        for end in (lk.get("a"), lk.get("b")):
            if isinstance(end, str):
                totals[end] = totals.get(end, 0.0) + float(lk.get("mbit_s") or 0)
    rates = [totals[h] for h in hosts if h in totals]
    return min(rates) if rates else None


def above_rate(busbw_gbit_s: Any, rate_mbit_s: float | None) -> bool:
    """True when a measured bus bandwidth exceeds what the host could send."""
    if rate_mbit_s is None or not isinstance(busbw_gbit_s, (int, float)):
        return False
    return busbw_gbit_s * 1e3 > rate_mbit_s * (1 + TOLERANCE)


def rate_flag(busbw_gbit_s: Any, rate_mbit_s: float | None, unit: str = "Mbit/s") -> str:
    """`` ⚠ above the host's 200 Mbit/s`` when :func:`above_rate`, else ''; the host's rate in
    ``unit`` (``Mbit/s`` or ``Gbit/s``: the unit the busbw beside it is shown in)."""
    if not above_rate(busbw_gbit_s, rate_mbit_s):
        return ""
    value = rate_mbit_s / 1e3 if unit == "Gbit/s" else rate_mbit_s
    text = f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"  # never 2.147e+06
    return f" ⚠ above the host's {text} {unit}"
