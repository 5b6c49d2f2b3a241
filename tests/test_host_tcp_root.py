"""The fabric's ``tcp_congestion`` on a real fabric (root): each host's namespace takes it and
a real flow runs under it, whatever the machine's default; where the machine does not let a
namespace make it its default, each host route names it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import host_tcp
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


SERVER = ("import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 5201)); s.listen(); "
          "print('up', flush=True); c,_=s.accept(); "
          "print(c.getsockopt(6, 13, 16).strip(b'\\0').decode())")  # TCP_CONGESTION
CLIENT = ("import socket,sys; c=socket.create_connection((sys.argv[1], 5201), timeout=10); "
          "print(c.getsockopt(6, 13, 16).strip(b'\\0').decode())")


def test_hosts_run_the_named_algorithm_by_their_routes_where_the_machine_forbids_it(
        tmp_path, monkeypatch):
    machine = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    name = next((n for n in host_tcp.available() if n != machine), None)
    if name is None:
        pytest.skip("this kernel has one TCP congestion control only")
    before = host_tcp.ALLOWED.read_text()
    monkeypatch.setattr(host_tcp, "allowed", lambda: [])  # as a machine that allows none
    plan = build_plan(parse_fabric({"fabric": {
        "kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
        "host_link_mbit_s": 50, "uplink_mbit_s": 50, "tcp_congestion": name}}))
    fab = Fabric(plan, tmp_path / "run")
    fab.start()
    try:
        default = fab.host("h0").cmd("sysctl -n net.ipv4.tcp_congestion_control").strip()
        server = fab.popen("h1", [sys.executable, "-c", SERVER, plan.node("h1").ip()],
                           stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "up"
        client = fab.popen("h0", [sys.executable, "-c", CLIENT, plan.node("h1").ip()],
                           stdout=subprocess.PIPE, text=True)
        sent = client.communicate(timeout=20)[0].strip()
        accepted = server.communicate(timeout=20)[0].strip()
    finally:
        assert fab.stop() == []
    assert default == machine  # the namespace's default is left as it was...
    assert (sent, accepted) == (name, name)  # ...and both ends run the named one
    assert host_tcp.ALLOWED.read_text() == before  # the machine's setting untouched
