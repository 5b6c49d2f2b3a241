"""The fabric's ``tcp_congestion`` on a real fabric (root): each host's namespace takes it and
a real flow runs under it, whatever the machine's default."""

from __future__ import annotations

import pytest

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.fabric import Fabric
from testbed.emulator.traffic import iperf_end

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_each_host_and_its_flows_use_the_fabric_s_congestion_control(tmp_path):
    # reno: built into every kernel, and the default of neither Debian (cubic) nor this
    # development machine (bbr), so it is there only if the fabric set it
    plan = build_plan(parse_fabric({"fabric": {
        "kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
        "host_link_mbit_s": 50, "uplink_mbit_s": 50, "tcp_congestion": "reno"}}))
    fab = Fabric(plan, tmp_path / "run")
    fab.start()
    try:
        set_to = {h: fab.host(h).cmd("sysctl -n net.ipv4.tcp_congestion_control").strip()
                  for h in ("h0", "h1")}
        end = iperf_end(fab, "h0", "h1", ["-t", "2"], port=5304, timeout_s=60)
    finally:
        assert fab.stop() == []
    assert set_to == {"h0": "reno", "h1": "reno"}
    assert end["sender_tcp_congestion"] == "reno"
    assert end["sum_received"]["bits_per_second"] > 0.5 * 50e6
