"""The pure parts of a fabric over servers (issue #43), no root: clock offsets from samples,
which switch connections the controller serves on a stand-in LAN, the refusal of servers that
are not stand-ins, and the VXLAN ends a crossing link is made of."""

from __future__ import annotations

import socket

import pytest

from sdn_app import listeners
from testbed.core.errors import FabricLabError
from testbed.core.servers import parse_servers
from testbed.emulator import server_clocks
from testbed.emulator.fabric import Fabric


def servers(netns: bool = True):
    return parse_servers({"servers": [
        {"name": f"s{i}", "ssh": f"root@192.0.2.{i + 1}", "lan_ip": f"192.0.2.{i + 1}",
         **({"netns": f"fls{i}"} if netns else {})} for i in range(2)]})


def test_the_offset_is_taken_from_the_shortest_round_trip():
    samples = [(100.0, 105.2, 100.4),   # round trip 0.4 s
               (101.0, 106.05, 101.1),  # 0.1 s: this one
               (102.0, 107.5, 102.3)]
    got = server_clocks.offset(samples)
    assert got == {"offset_s": pytest.approx(5.0), "uncertainty_s": pytest.approx(0.05)}


def test_real_machines_are_refused_until_each_keeps_its_own_records():
    Fabric.check_servers(servers(netns=True))  # stand-ins: accepted
    with pytest.raises(FabricLabError, match="s0 is not a stand-in"):
        Fabric.check_servers(servers(netns=False))


def _connected() -> tuple[socket.socket, socket.socket, socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    conn, _ = server.accept()
    return server, client, conn


def test_on_a_stand_in_lan_a_switch_is_served_by_its_server_address(monkeypatch):
    server, client, conn = _connected()
    try:
        monkeypatch.setenv(listeners.OF_LAN_PEERS_ENV, "192.0.2.1,127.0.0.1")
        assert listeners.switch_refused(conn) is None
        monkeypatch.setenv(listeners.OF_LAN_PEERS_ENV, "192.0.2.1,192.0.2.2")
        assert "not a server's LAN address" in listeners.switch_refused(conn)
    finally:
        for s in (server, client, conn):
            s.close()


def test_on_the_loopback_a_switch_must_be_roots(monkeypatch):
    monkeypatch.delenv(listeners.OF_LAN_PEERS_ENV, raising=False)
    monkeypatch.setattr(listeners, "peer_uid", lambda sock: 1000)
    server, client, conn = _connected()
    try:
        assert "uid 1000" in listeners.switch_refused(conn)
        monkeypatch.setattr(listeners, "peer_uid", lambda sock: 0)
        assert listeners.switch_refused(conn) is None
    finally:
        for s in (server, client, conn):
            s.close()


def test_the_report_says_where_the_hosts_ran_and_how_far_the_clocks_were():
    from analysis.servers import server_note

    assert server_note({"servers": None}) is None and server_note({}) is None
    summary = {"servers": {
        "host_server": {"h0": "s0", "h1": "s0", "h2": "s0", "h3": "s1"},
        "placement": {"crossing": [{"link": "leaf0-spine1"}, {"link": "leaf1-spine0"}]},
        "clock_offsets": {"start": {"s0": {"offset_s": 0.0002, "uncertainty_s": 0.0004},
                                    "s1": {"offset_s": -0.0031, "uncertainty_s": 0.0005}},
                          "end": {"s0": {"error": "ssh: connect timed out"}}}}}
    assert server_note(summary) == (
        "Spread over 2 servers (s0: h0–h2; s1: h3); 2 links crossed between them as VXLAN "
        "tunnels; the servers' clocks were within 3.10 ms of this machine's (±0.50 ms)")
