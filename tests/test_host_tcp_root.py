"""The fabric's ``tcp_congestion`` on a real fabric (root): each host's namespace takes it and
a real flow runs under it, whatever the machine's default; where the machine does not let a
namespace make it its default, each host route names it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import host_tcp
from testbed.emulator.fabric import Fabric
from testbed.emulator.traffic import iperf_end

pytestmark = [pytest.mark.root, pytest.mark.slow]


def defaults_and_flow(tmp_path: Path, name: str) -> tuple[dict[str, str], dict[str, Any]]:
    """Each host's default congestion control, and the end of a 2 s iperf3 flow h0 -> h1, on
    a 2-host fabric whose ``tcp_congestion`` is ``name``."""
    plan = build_plan(parse_fabric({"fabric": {
        "kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
        "host_link_mbit_s": 50, "uplink_mbit_s": 50, "tcp_congestion": name}}))
    fab = Fabric(plan, tmp_path / "run")
    fab.start()
    try:
        defaults = {h: fab.host(h).cmd("sysctl -n net.ipv4.tcp_congestion_control").strip()
                    for h in ("h0", "h1")}
        end = iperf_end(fab, "h0", "h1", ["-t", "2"], port=5304, timeout_s=60)
    finally:
        assert fab.stop() == []
    return defaults, end


def test_each_host_and_its_flows_use_the_fabric_s_congestion_control(tmp_path):
    # reno: built into every kernel, and the default of neither Debian (cubic) nor this
    # development machine (bbr), so it is there only if the fabric set it
    set_to, end = defaults_and_flow(tmp_path, "reno")
    assert set_to == {"h0": "reno", "h1": "reno"}
    assert end["sender_tcp_congestion"] == "reno"
    assert end["sum_received"]["bits_per_second"] > 0.5 * 50e6


def test_hosts_run_the_named_algorithm_by_their_routes_where_the_machine_forbids_it(
        tmp_path, monkeypatch):
    machine = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    name = next((n for n in host_tcp.available() if n != machine), None)
    if name is None:
        pytest.skip("this kernel has one TCP congestion control only")
    before = host_tcp.ALLOWED.read_text()
    monkeypatch.setattr(host_tcp, "allowed", lambda: [])  # as a machine that allows none
    defaults, end = defaults_and_flow(tmp_path, name)
    assert defaults == {"h0": machine, "h1": machine}  # the namespaces' default as it was...
    # ...and both ends of the flow run the named one
    assert (end["sender_tcp_congestion"], end["receiver_tcp_congestion"]) == (name, name)
    assert end["sum_received"]["bits_per_second"] > 0.5 * 50e6
    assert host_tcp.ALLOWED.read_text() == before  # the machine's setting untouched
