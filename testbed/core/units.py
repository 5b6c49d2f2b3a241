"""Parse and format sizes (bytes) and rates (bit/s) as users write them, and name the unit
of every column of a parquet table.

Machine-readable keys and columns name their unit with a suffix: rates ``_mbit_s`` /
``_gbit_s`` (SI prefixes, bit/s), sizes ``_bytes``, times ``_s`` (``_us`` for microseconds);
fractions and counts have none. nccl-tests-style bandwidths stay in GB/s as ``_gbyte_s``.
Parquet columns carry their unit in the field metadata (:func:`unit_field`).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from testbed.core.errors import FabricLabError
from testbed.core.limits import MAX_SIZE_BYTES, MAX_SIZE_DIGITS, check_size

if TYPE_CHECKING:
    import pyarrow as pa

# Field-metadata units of quantities without one: counts, indices and fractions ("1"), and
# values that are not quantities at all (names, labels, flags: "-").
DIMENSIONLESS = "1"
NOT_A_QUANTITY = "-"

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "kib": 1024,
    "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
    "g": 1000**3, "gb": 1000**3, "gib": 1024**3,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def _bounded(number: str, scale: int, text: str, limit_bytes: int = MAX_SIZE_BYTES) -> int:
    """``number`` × ``scale`` bytes, refused past ``limit_bytes``
    (checked on the digits first: a 400-digit number would overflow a float)."""
    shown = text if len(text) <= 24 else text[:21] + "..."
    if len(number.split(".")[0]) > MAX_SIZE_DIGITS:
        check_size(limit_bytes + 1, f"size {shown!r}", limit_bytes)
    return check_size(int(float(number) * scale), f"size {shown!r}", limit_bytes)


def _size_in(text: str, units: dict[str, int], error: str,
             limit_bytes: int = MAX_SIZE_BYTES) -> int:
    """The bytes ``text`` (a number and one of ``units``' suffixes) stands for; ``error`` if it
    is not one."""
    m = _SIZE_RE.match(text)
    unit = m.group(2).lower() if m else None
    if not m or unit not in units:
        raise FabricLabError(error)
    return _bounded(m.group(1), units[unit], text, limit_bytes)


def parse_size(text: str | int, limit_bytes: int = MAX_SIZE_BYTES) -> int:
    """'256MiB' -> 268435456; '1KiB' -> 1024; '64' -> 64 (bytes); at most ``limit_bytes``
    (:data:`~testbed.core.limits.MAX_SIZE_BYTES`: what a rank may allocate)."""
    if isinstance(text, int):
        return check_size(text, None, limit_bytes)
    return _size_in(text, _SIZE_UNITS, f"size {text[:40]!r} is not a size; write e.g. 64, "
                    "1KiB, 256MiB or 1GiB", limit_bytes)


def parse_size_range(text: str) -> list[int]:
    """'1KiB:256MiB' -> [1024, 2048, ..., 268435456] (doubling); '4MiB' -> [4194304]."""
    if ":" not in text:
        return [parse_size(text)]
    lo_text, hi_text = text.split(":", 1)
    lo, hi = parse_size(lo_text), parse_size(hi_text)
    if lo < 1 or hi < lo:
        raise FabricLabError(f"size range {text!r} must go from a positive size up to a larger one")
    sizes = []
    s = lo
    while s <= hi:
        sizes.append(s)
        s *= 2
    return sizes


# nccl-tests' -b/-e suffixes are 1024-based; KiB/MiB/GiB say the same thing. KB/MB/GB are
# refused: nccl-tests reads them as 1024-based, the rest of fabriclab as 1000-based.
_NCCL_UNITS = {"": 1, "b": 1, "k": 1024, "kib": 1024, "m": 1024**2, "mib": 1024**2,
               "g": 1024**3, "gib": 1024**3}


def parse_nccl_size(text: str, flag: str) -> int:
    """A size as nccl-tests' ``-b``/``-e`` take it: '8' -> 8, '1K' -> 1024, '1.5M' -> 1572864,
    '1G' -> 1073741824 (bytes); ``flag`` names the option in the error."""
    return _size_in(text, _NCCL_UNITS, f"{flag} {text[:40]!r} is not a size; write bytes or a "
                    "1024-based K, M or G suffix, e.g. 8, 1K, 256M or 1G")


def nccl_size_range(minbytes: str, maxbytes: str, stepfactor: str) -> list[int]:
    """nccl-tests' sizes: ``-b``, then times ``-f`` while not above ``-e``
    ('1K', '8K', '2' -> [1024, 2048, 4096, 8192])."""
    lo = parse_nccl_size(minbytes, "-b/--minbytes")
    hi = parse_nccl_size(maxbytes, "-e/--maxbytes")
    try:
        factor = int(stepfactor)
    except ValueError:
        factor = 0
    if lo < 1:
        raise FabricLabError(f"-b/--minbytes is {lo} bytes; it must be at least 1 byte")
    if hi < lo:
        raise FabricLabError(f"-e/--maxbytes ({hi} bytes) is below -b/--minbytes ({lo} bytes)")
    if factor < 2:
        raise FabricLabError(f"-f/--stepfactor is {stepfactor!r}; it must be a whole number of "
                             "2 or more (each size is the previous one times it)")
    sizes = []
    s = lo
    while s <= hi:
        sizes.append(s)
        s *= factor
    return sizes


def format_decimal(value: float, significant: int = 4) -> str:
    """Fixed point with at least 2 decimals and ``significant`` significant digits, never an
    exponent: 0.000123456 -> '0.0001235', 12.3456 -> '12.35', 35012.5 -> '35012.50'."""
    if value == 0 or not math.isfinite(value):
        return f"{value:.2f}"
    decimals = max(2, significant - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def format_size(n: float, exact: bool = False, sep: str = "") -> str:
    """Bytes for display, in binary units: 268435456 -> '256MiB', 1572864 -> '1.50MiB'.
    ``exact``: the unit only where it shows ``n`` exactly, else every byte ('33,554,433B');
    ``sep`` goes between number and unit ('256 MiB'). The one byte formatter."""
    text = f"{n:.0f}{sep}B"
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            value = n / scale
            number = f"{value:.0f}" if value == int(value) else f"{value:.2f}"
            text = f"{number}{sep}{unit}"
            break
    # read back under a bound above n: formatting allocates nothing, so no rank's limit
    if exact and parse_size(text.replace(sep, "") if sep else text, 2 * int(n) + 1) != n:
        return f"{n:,.0f}{sep}B"
    return text


def format_mib(n_bytes: float | None, digits: int = 0) -> str:
    """Bytes in MiB, for display: 3145728 -> '3'; ``-`` where not measured (None, NaN)."""
    if n_bytes is None or (isinstance(n_bytes, float) and math.isnan(n_bytes)):
        return "-"
    return f"{n_bytes / 1024**2:.{digits}f}"


def format_spread(values: Sequence[float], spec: str = ".3g") -> str:
    """``median [min, max]`` of repeated measurements, each with the format ``spec``
    (``.2f``, ``.3g``): [1.0, 3.0, 2.0] -> '2 [1, 3]'; ``n/a`` for none. The one spread
    formatter."""
    if not values:
        return "n/a"
    return f"{statistics.median(values):{spec}} [{min(values):{spec}}, {max(values):{spec}}]"


def mbps(bits_per_second: float) -> float:
    """bit/s -> Mbit/s, for display."""
    return bits_per_second / 1e6


def unit_field(name: str, type_: pa.DataType, unit: str) -> pa.Field:
    """A parquet column that records its unit (``"s"``, ``"bytes"``, ``"Mbit/s"``,
    :data:`DIMENSIONLESS`, :data:`NOT_A_QUANTITY` ...) as field metadata ``unit``."""
    import pyarrow as pa  # only the writers and readers of tables pay for pyarrow

    return pa.field(name, type_, metadata={"unit": unit})


def unit_of(field: pa.Field) -> str | None:
    """The unit :func:`unit_field` recorded, or None for a column written without one."""
    meta = field.metadata or {}
    unit = meta.get(b"unit")
    return unit.decode() if unit is not None else None
