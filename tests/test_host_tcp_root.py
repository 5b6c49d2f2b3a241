"""The fabric's ``tcp_congestion`` on a real fabric (root): a connection between two hosts runs
the named algorithm, where the machine lets a namespace make it its default and where it
does not (then each host route names it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import host_tcp
from testbed.emulator.fabric import Fabric

pytestmark = [pytest.mark.root]

FABRIC = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
          "host_link_mbit_s": 50, "uplink_mbit_s": 50}
SERVER = ("import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 5201)); s.listen(); "
          "print('up', flush=True); c,_=s.accept(); "
          "print(c.getsockopt(6, 13, 16).strip(b'\\0').decode())")  # TCP_CONGESTION
CLIENT = ("import socket,sys; c=socket.create_connection((sys.argv[1], 5201), timeout=10); "
          "print(c.getsockopt(6, 13, 16).strip(b'\\0').decode())")


def machine_default() -> str:
    return Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()


def other_than_default() -> str:
    """A congestion control this kernel has that the machine does not use by default."""
    name = next((n for n in host_tcp.available() if n != machine_default()), None)
    if name is None:
        pytest.skip("this kernel has one TCP congestion control only")
    return name


def connection_algorithms(tmp_path: Path, name: str) -> tuple[str, str]:
    plan = build_plan(parse_fabric({"fabric": FABRIC | {"tcp_congestion": name}}))
    fab = Fabric(plan, tmp_path / "run")
    fab.start()
    try:
        server = fab.popen("h1", [sys.executable, "-c", SERVER, plan.node("h1").ip()],
                           stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "up"
        client = fab.popen("h0", [sys.executable, "-c", CLIENT, plan.node("h1").ip()],
                           stdout=subprocess.PIPE, text=True)
        sent = client.communicate(timeout=20)[0].strip()
        accepted = server.communicate(timeout=20)[0].strip()
    finally:
        assert fab.stop() == []
    return sent, accepted


def test_hosts_run_the_named_algorithm_by_their_routes_where_the_machine_forbids_it(
        tmp_path, monkeypatch):
    name = other_than_default()
    before = host_tcp.ALLOWED.read_text()
    monkeypatch.setattr(host_tcp, "allowed", lambda: [])  # as if the machine allowed none
    assert connection_algorithms(tmp_path, name) == (name, name)
    assert host_tcp.ALLOWED.read_text() == before  # the machine's setting is untouched


def test_hosts_run_the_named_algorithm_the_machine_allows_as_their_default(tmp_path):
    name = next((n for n in host_tcp.allowed() if n != machine_default()), None)
    if name is None:
        pytest.skip("the machine allows namespaces no algorithm but its default")
    assert connection_algorithms(tmp_path, name) == (name, name)
