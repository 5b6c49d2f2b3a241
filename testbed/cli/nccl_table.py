"""``fabriclab allreduce`` results as nccl-tests' ``all_reduce_perf`` prints them, and as
records for ``--json`` and ``--csv``.

The table follows nccl-tests' output rules, so a parser of its output reads it: lines that
start with ``#`` are header or footer; every data line has the 13 whitespace-separated fields
``size count type redop root`` (bytes, float32 elements, ``float``, ``sum``, ``-1`` as
all_reduce_perf prints) then ``time algbw busbw #wrong`` out of place and the same in place
(us, GB/s, GB/s, a count); the footer says ``# Out of bounds values : N OK|FAILED`` and
``# Avg bus bandwidth    : X``, the mean busbw of every result printed, both groups, as
nccl-tests computes it. GB/s is 1e9 bytes/s, nccl-tests' unit.

Choices where nccl-tests' rules do not fit as they are:

- Both groups are measured. fabriclab's collectives reduce in place; the out-of-place run
  keeps the input in its own buffer and leaves the result in a second one by copying the
  input there and reducing in place, the copy timed with the rest (common parsers need both
  groups, and a copy of the in-place numbers would be numbers nobody measured).
- ``#wrong`` counts measured results (one per rank and iteration) that were not the exact
  sum, where nccl-tests counts wrong elements; the footer's out-of-bounds count adds them up.
- Numbers are fixed point with at least 4 significant digits (nccl-tests prints 2 decimals,
  which reads 0.00 GB/s for small sizes on loopback) and never an exponent, which
  regex-based parsers reject.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from testbed.core.errors import FabricLabError
from testbed.core.units import format_decimal

if TYPE_CHECKING:
    from workloads.launcher import SizeResult

COLUMNS = ["size_bytes", "count_elements", "placement", "time_us", "algbw_gbyte_s",
           "busbw_gbyte_s", "wrong", "correct"]
_LEFT = (("size", "(B)", 12), ("count", "(elements)", 12), ("type", "", 8), ("redop", "", 6),
         ("root", "", 6))
_GROUP = (("time", "(us)", 10), ("algbw", "(GB/s)", 10), ("busbw", "(GB/s)", 10),
          ("#wrong", "", 6))


def record(r: SizeResult) -> dict[str, Any]:
    """One result as a machine-readable row (keys :data:`COLUMNS`)."""
    return {"size_bytes": r.size, "count_elements": r.count,
            "placement": "in-place" if r.in_place else "out-of-place", "time_us": r.time_us,
            "algbw_gbyte_s": r.algbw, "busbw_gbyte_s": r.busbw, "wrong": r.wrong,
            "correct": r.correct}


def avg_busbw(rows: Sequence[SizeResult]) -> float:
    """Mean busbw (GB/s) over every result, as nccl-tests' footer has it."""
    return sum(r.busbw for r in rows) / len(rows) if rows else 0.0


def out_of_bounds(rows: Sequence[SizeResult]) -> int:
    """Wrong results in all."""
    return sum(r.wrong for r in rows)


def _line(fields: list[str], widths: list[int], comment: bool = False) -> str:
    cells = [f"{f:>{w}}" for f, w in zip(fields, widths, strict=True)]
    if comment:  # '# ' takes the first column's first two characters, as in nccl-tests
        cells[0] = "#" + f"{fields[0]:>{widths[0] - 1}}"
    return "  ".join(cells)


def table_lines(rows: Sequence[SizeResult]) -> list[str]:
    """Column headers, one data line per size (out of place, then in place) and the footer."""
    widths = [w for _, _, w in _LEFT] + [w for _, _, w in _GROUP] * 2
    group_width = sum(w for _, _, w in _GROUP) + 2 * len(_GROUP)
    left_width = sum(w for _, _, w in _LEFT) + 2 * len(_LEFT)
    lines = [
        "#" + " " * (left_width - 1) + f"{'out-of-place':^{group_width}}"
        + f"{'in-place':^{group_width}}".rstrip(),
        _line([n for n, _, _ in _LEFT] + [n for n, _, _ in _GROUP] * 2, widths, comment=True),
        _line([u for _, u, _ in _LEFT] + [u for _, u, _ in _GROUP] * 2, widths,
              comment=True).rstrip(),
    ]
    by_size: dict[int, dict[bool, SizeResult]] = {}
    for r in rows:
        by_size.setdefault(r.size, {})[r.in_place] = r
    for size, pair in sorted(by_size.items()):
        if set(pair) != {False, True}:
            missing = "in-place" if False in pair else "out-of-place"
            raise FabricLabError(f"the workers recorded no {missing} result for {size} bytes")
        fields = [str(size), str(pair[True].count), "float", "sum", "-1"]
        for r in (pair[False], pair[True]):
            fields += [format_decimal(r.time_us), format_decimal(r.algbw),
                       format_decimal(r.busbw), str(r.wrong)]
        lines.append(_line(fields, widths))
    wrong = out_of_bounds(rows)
    lines += [f"# Out of bounds values : {wrong} {'FAILED' if wrong else 'OK'}",
              f"# Avg bus bandwidth    : {format_decimal(avg_busbw(rows))}",
              "#"]
    return lines
