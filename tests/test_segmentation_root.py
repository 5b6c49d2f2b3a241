"""Segments capped in time (``segment_max_ms``) on a real fabric (root): the hosts' interfaces
carry the cap, and TCP still fills the link."""

from __future__ import annotations

import pytest

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.fabric import Fabric
from testbed.emulator.traffic import iperf_end

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_capped_segments_reach_the_hosts_interfaces_and_tcp_still_fills_the_link(tmp_path):
    plan = build_plan(parse_fabric({"fabric": {
        "kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
        "host_link_mbit_s": 50, "uplink_mbit_s": 50, "segment_max_ms": 1}}))
    fab = Fabric(plan, tmp_path / "run")
    fab.start()
    try:
        shown = {h: fab.host(h).cmd(f"ip -d link show dev {h}-eth0") for h in ("h0", "h1")}
        end = iperf_end(fab, "h0", "h1", ["-t", "3"], port=5303, timeout_s=60)
    finally:
        assert fab.stop() == []
    for h, out in shown.items():  # 1 ms of 50 Mbit/s
        assert "gso_max_size 6250 " in out, (h, out)
    mbit_s = end["sum_received"]["bits_per_second"] / 1e6
    assert mbit_s >= 0.85 * 50, f"{mbit_s:.1f} Mbit/s of 50"
