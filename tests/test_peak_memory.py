"""Per-run peak memory (testbed.sim.peak_memory): the kernel's peak mark is reset per window."""

from __future__ import annotations

import numpy as np
import pytest

from testbed.sim.peak_memory import peak_rss, status_bytes

MIB = 1 << 20


def test_status_lines_are_read_in_bytes() -> None:
    text = "Name:\tpython\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\n"
    assert status_bytes("VmHWM", text) == 20 * MIB
    assert status_bytes("VmRSS", text) == 10 * MIB
    assert status_bytes("VmSwap", text) is None


def test_a_window_sees_its_own_peak_not_an_earlier_one() -> None:
    big = np.ones(64 * MIB // 8)  # touched: 64 MiB resident
    del big
    with peak_rss() as small:
        np.ones(MIB // 8).sum()
    if small.peak_rss_bytes is None:
        pytest.skip("this kernel cannot reset the peak RSS mark")
    assert small.rss_start_bytes is not None
    assert small.peak_rss_bytes - small.rss_start_bytes < 32 * MIB  # not the earlier 64 MiB
    with peak_rss() as large:
        np.ones(64 * MIB // 8).sum()
    assert large.peak_rss_bytes - large.rss_start_bytes > 60 * MIB
