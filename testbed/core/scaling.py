"""Rate scaling: a spec states real rates and ``rate_scale`` = emulated rate ÷ real rate
(0 < rate_scale <= 1); the fabric is emulated at real × rate_scale. Sizes stay as given, so a
transfer that takes ``t`` seconds at the emulated rates takes ``t × rate_scale`` at the real
ones, and a bandwidth measured as ``b`` stands for ``b ÷ rate_scale``. A link's propagation
delay and jitter are emulated at real ÷ rate_scale, so they keep their ratio to transfer times
(loss, a fraction, is the same in both).

This is the one home of that arithmetic. A real-rate time assumes the emulated time was spent
moving bytes: a fixed cost (connection set-up, per-message latency, compute) is scaled as if it
were transfer time, so figures that include compute (a DNN iteration, a JCT) get none.

Real-rate keys put ``_real`` before the unit: ``busbw_gbit_s`` -> ``busbw_real_gbit_s``,
``collective_s`` -> ``collective_real_s`` (:func:`real_key`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

UNSCALED = 1.0
RATE_UNITS = ("_gbit_s", "_mbit_s", "_bit_s")  # key suffixes of rates (testbed.core.units)
TIME_UNIT = "_s"


def _tidy(x: float) -> float:
    """``x`` to 12 significant digits: 100000 × 0.001 is 100.00000000000001 otherwise."""
    return float(f"{x:.12g}")


def emulated_rate(real: float, scale: float) -> float:
    """The rate the emulator shapes for a ``real`` rate (any rate unit; the same unit out)."""
    return _tidy(real * scale)


def emulated_delay_us(real_us: float, scale: float) -> float:
    """The delay (or jitter) the emulator holds for a ``real_us`` one: real ÷ ``scale``, so
    delay and transfer time keep their ratio (2 µs at 0.0001 is emulated as 20 ms)."""
    return _tidy(real_us / scale)


def real_delay_us(emulated_us: float, scale: float) -> float:
    """The real delay an ``emulated_us`` one stands for (:func:`emulated_delay_us`'s inverse)."""
    return _tidy(emulated_us * scale)


def real_rate(emulated: float | None, scale: float) -> float | None:
    """The real rate an ``emulated`` one stands for (same unit); None stays None."""
    return None if emulated is None else emulated / scale


def real_time_s(emulated_s: float | None, scale: float) -> float | None:
    """How long a transfer that took ``emulated_s`` takes at the real rates; None stays None."""
    return None if emulated_s is None else emulated_s * scale


def real_key(key: str) -> str:
    """The name of a figure's real-rate counterpart: ``_real`` before its unit suffix."""
    for unit in (*RATE_UNITS, TIME_UNIT):
        if key.endswith(unit):
            return f"{key.removesuffix(unit)}_real{unit}"
    raise ValueError(f"{key} names no rate or time unit")


def real_value(key: str, value: Any, scale: float) -> float | None:
    """``value`` of the figure ``key`` (a rate or a time, by its unit) at the real rates."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if key.endswith(RATE_UNITS):
        return real_rate(float(value), scale)
    return real_time_s(float(value), scale)


def with_real(figures: Mapping[str, Any], keys: Iterable[str], scale: float,
              none: Iterable[str] = ()) -> dict[str, Any]:
    """``figures`` with each of ``keys``' real-rate figure right after it (None for the keys
    in ``none``: figures the scale does not convert honestly in this case)."""
    convert, blank = set(keys), set(none)
    out: dict[str, Any] = {}
    for key, value in figures.items():
        out[key] = value
        if key in convert:
            out[real_key(key)] = None if key in blank else real_value(key, value, scale)
    return out
