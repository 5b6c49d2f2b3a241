"""Sizes as users write them: fabriclab's own and nccl-tests' -b/-e/-f; numbers for tables."""

from __future__ import annotations

import pytest

from testbed.core.errors import FabricLabError
from testbed.core.units import (
    format_decimal,
    format_mib,
    format_spread,
    nccl_size_range,
    parse_nccl_size,
    parse_size_range,
)

K, M, G = 1024, 1024**2, 1024**3


@pytest.mark.parametrize(("text", "size"), [
    ("8", 8), ("1K", K), ("1k", K), ("256M", 256 * M), ("1G", G), ("1.5M", 3 * M // 2),
    ("4KiB", 4 * K), ("2 m", 2 * M), ("64B", 64),
])
def test_nccl_sizes_are_1024_based(text: str, size: int) -> None:
    assert parse_nccl_size(text, "-b") == size


@pytest.mark.parametrize("text", ["1KB", "1MB", "K", "", "-1K", "1T", "1e3"])
def test_a_size_nccl_tests_would_read_differently_is_refused(text: str) -> None:
    with pytest.raises(FabricLabError, match=r"^-e '.*' is not a size; write bytes or a "
                                             r"1024-based K, M or G suffix"):
        parse_nccl_size(text, "-e")


@pytest.mark.parametrize(("b", "e", "f", "sizes"), [
    ("1K", "8K", "2", [K, 2 * K, 4 * K, 8 * K]),
    ("1K", "10K", "2", [K, 2 * K, 4 * K, 8 * K]),  # -e need not be on the grid
    ("4K", "64K", "4", [4 * K, 16 * K, 64 * K]),
    ("3K", "8K", "2", [3 * K, 6 * K]),
    ("1M", "1M", "2", [M]),
    ("8", "1G", "1024", [8, 8 * K, 8 * M]),
])
def test_nccl_range_multiplies_from_min_while_not_above_max(b: str, e: str, f: str,
                                                             sizes: list[int]) -> None:
    assert nccl_size_range(b, e, f) == sizes


@pytest.mark.parametrize(("b", "e", "f", "words"), [
    ("8K", "1K", "2", "-e/--maxbytes (1024 bytes) is below -b/--minbytes (8192 bytes)"),
    ("0", "1K", "2", "-b/--minbytes is 0 bytes; it must be at least 1 byte"),
    ("1K", "8K", "1", "-f/--stepfactor is '1'; it must be a whole number of 2 or more"),
    ("1K", "8K", "0", "-f/--stepfactor is '0'"),
    ("1K", "8K", "1.5", "-f/--stepfactor is '1.5'"),
    ("1K", "8K", "two", "-f/--stepfactor is 'two'"),
])
def test_a_bad_nccl_range_is_one_sentence(b: str, e: str, f: str, words: str) -> None:
    with pytest.raises(FabricLabError) as exc:
        nccl_size_range(b, e, f)
    assert str(exc.value).startswith(words) and "\n" not in str(exc.value)


def test_fabriclab_ranges_still_double() -> None:
    assert parse_size_range("1KiB:8KiB") == [K, 2 * K, 4 * K, 8 * K]
    assert parse_size_range("4MiB") == [4 * M]


@pytest.mark.parametrize(("value", "text"), [
    (0.000123456, "0.0001235"), (0.001959, "0.001959"), (0.01542, "0.01542"),
    (12.3456, "12.35"), (1.0, "1.000"), (404.53, "404.53"), (35012.5, "35012.50"),
    (0.0, "0.00"),
])
def test_numbers_keep_significant_digits_in_fixed_point(value: float, text: str) -> None:
    assert format_decimal(value) == text
    assert "e" not in text and float(text) == pytest.approx(value, rel=1e-3, abs=1e-12)


def test_a_spread_is_the_median_then_the_range_in_one_format() -> None:
    assert format_spread([1.0, 3.0, 2.0]) == "2 [1, 3]"
    assert format_spread([0.25, 0.5, 0.125, 1.0], ".2f") == "0.38 [0.12, 1.00]"
    assert format_spread([12345.0], ".3g") == "1.23e+04 [1.23e+04, 1.23e+04]"
    assert format_spread([]) == "n/a"


def test_mebibytes_show_a_dash_where_nothing_was_measured() -> None:
    assert format_mib(3 * M) == "3" and format_mib(1.5 * M, 1) == "1.5"
    assert format_mib(None) == "-" and format_mib(float("nan")) == "-"
