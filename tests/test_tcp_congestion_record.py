"""env.json records the congestion control the hosts' namespaces inherit."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.emulator.preflight import tcp_congestion

PROC = Path("/proc/sys/net/ipv4")


@pytest.mark.skipif(not (PROC / "tcp_congestion_control").exists(), reason="no /proc/sys/net")
def test_the_kernel_s_default_congestion_control_is_recorded() -> None:
    got = tcp_congestion()
    assert got == (PROC / "tcp_congestion_control").read_text().strip()
    assert got in (PROC / "tcp_available_congestion_control").read_text().split()
