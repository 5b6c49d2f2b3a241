"""Real fabrics: Mininet hosts, OVS switches, shaped veth links, real packets (root only)."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fabric_checks import htb_class_counts, iperf_rates

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import cleanup
from testbed.emulator.fabric import Fabric
from testbed.emulator.traffic import IperfFlow, run_flows

pytestmark = [pytest.mark.root, pytest.mark.slow]

LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
              "host_link_mbit_s": 50, "uplink_mbit_s": 50}
MULTIDIM = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                         {"size": 4, "mbit_s": 20, "kind": "ring"}]}


def plan_of(fabric: dict):
    return build_plan(parse_fabric({"fabric": fabric}))


def pings(fab: Fabric, src: str, ip: str) -> bool:
    return " 0% packet loss" in fab.host(src).cmd(f"ping -c1 -W2 {ip}")


def assert_gone(plan, state: cleanup.RunState) -> None:
    assert cleanup.leftovers(state) == []
    bridges = cleanup.existing_bridges()
    assert not bridges & {s.name for s in plan.switches}
    assert not any(Path("/sys/class/net", f"{s.name}-eth1").exists() for s in plan.switches)
    assert not list(cleanup.STATE_DIR.glob(f"{state.run_id}.json"))


def test_leaf_spine_reaches_all_shapes_and_tears_down(tmp_path):
    plan = plan_of(LEAF_SPINE)
    fab = Fabric(plan, tmp_path / "run")
    fab.start()
    state = cleanup.RunState(**vars(fab.state))
    try:
        for a, b in itertools.permutations(plan.hosts, 2):
            assert pings(fab, a.name, b.ip()), f"{a.name} cannot reach {b.name}"
        # one shaped link, measured by its counters while iperf3 saturates it
        achieved, goodput = iperf_rates(fab, "h0", "h1", "leaf0")
        assert 0.9 * 50 <= achieved <= 1.1 * 50, f"h0->leaf0 carried {achieved:.1f} Mbit/s"
        assert 0.85 * 50 <= goodput <= 1.05 * 50
    finally:
        assert fab.stop() == []
    assert_gone(plan, state)
    assert (tmp_path / "run" / "topology.json").exists()


def test_multidim_reaches_what_routing_allows(tmp_path):
    plan = plan_of(MULTIDIM)
    with Fabric(plan, tmp_path / "run") as fab:
        state = cleanup.RunState(**vars(fab.state))
        # dimension 0: h0 and h1 share switch d0s0; h2 is in another group
        assert pings(fab, "h0", plan.node("h1").ip(0))
        assert not pings(fab, "h0", plan.node("h2").ip(0))
        # dimension 1, ring of 4: h0 reaches h2 (next) and h6 (prev), not h4 (opposite)
        assert pings(fab, "h0", plan.node("h2").ip(1))
        assert pings(fab, "h0", plan.node("h6").ip(1))
        assert not pings(fab, "h0", plan.node("h4").ip(1))
        for h in plan.hosts:  # every ring hop works in both directions
            nxt = plan.hosts[(h.index + 2) % 8]
            assert pings(fab, h.name, nxt.ip(1)) and pings(fab, nxt.name, h.ip(1))
    assert_gone(plan, state)


SCRIPT = """
import sys, time
from testbed.emulator.calibrate import TCP_WIRE_FACTOR
from testbed.emulator.fabric import Fabric
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.traffic import IperfFlow, run_flows
plan = build_plan(parse_fabric({"fabric": %r}))
fab = Fabric(plan, sys.argv[1], switches=%r)
with fab:
    fab.popen("h0", ["sleep", "300"])
    print(fab.state.run_id, flush=True)
    time.sleep(300)
"""


def start_child(tmp_path: Path, fabric: dict = LEAF_SPINE,
                switches: str = "ovs") -> tuple[subprocess.Popen, cleanup.RunState]:
    """A child process that brings a fabric up and sleeps; its run's recorded state."""
    child = subprocess.Popen([sys.executable, "-c", SCRIPT % (fabric, switches),
                              str(tmp_path / "run")], stdout=subprocess.PIPE, text=True)
    run_id = child.stdout.readline().strip()
    assert run_id, "the child run did not come up"
    state = cleanup.RunState(**json.loads((cleanup.STATE_DIR / f"{run_id}.json").read_text()))
    assert cleanup.leftovers(state), "the fabric should be up"
    return child, state


def test_sigterm_tears_down(tmp_path):
    child, state = start_child(tmp_path)
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=60)
    assert_gone(plan_of(LEAF_SPINE), state)


def test_clean_removes_what_a_killed_run_left(tmp_path):
    child, state = start_child(tmp_path)
    child.kill()  # SIGKILL: no teardown at all
    child.wait(timeout=10)
    assert cleanup.leftovers(state)
    report = cleanup.clean_stale()
    assert any(state.run_id in line for line in report)
    assert_gone(plan_of(LEAF_SPINE), state)


def test_opposite_tcp_flows_both_get_the_rate(tmp_path):
    """ACKs take the priority class, so flows in opposite directions do not starve each other
    (in one FIFO they measured 48 and 10 Mbit/s on this 50 Mbit/s path)."""
    plan = plan_of(LEAF_SPINE)
    with Fabric(plan, tmp_path / "run") as fab:
        h0, h2 = plan.node("h0"), plan.node("h2")
        res = run_flows(fab, [IperfFlow("h0", "h2", h0.ip(), h2.ip()),
                              IperfFlow("h2", "h0", h2.ip(), h0.ip())], 4)
    for bps in res.goodput_bps:
        assert bps > 0.85 * 50e6, f"{bps / 1e6:.1f} Mbit/s"


def _class_counts(fab: Fabric, host: str, intf: str) -> dict[str, tuple[int, int]]:
    """(bytes, packets) each HTB class of ``host``'s ``intf`` sent."""
    return htb_class_counts(fab.host(host).cmd(f"tc -s class show dev {intf}"))


SMALL_SENDS = 200
_SERVER = ("import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,"
           "socket.SO_REUSEADDR,1);s.bind(('',5400));s.listen();c,_=s.accept()\n"
           "while c.recv(65536): pass\n")
_CLIENT = ("import socket,sys,time\nc=socket.create_connection((sys.argv[1],5400))\n"
           "c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n"
           f"for _ in range({SMALL_SENDS}):\n    c.sendall(b'x'*20); time.sleep(0.002)\n"
           "c.close()\n")


def test_short_tcp_data_stays_in_the_data_class_and_acks_take_the_priority_class(tmp_path):
    """A 20-byte TCP send is a 86-byte frame, under the ACK class's 128 bytes: it stays in
    the data class (in the priority class it would overtake its own flow's queued bytes);
    the pure ACKs coming back, and pings, take the priority class."""
    plan = plan_of(LEAF_SPINE)
    with Fabric(plan, tmp_path / "run") as fab:
        h0, h2 = plan.node("h0"), plan.node("h2")
        intf0, intf2 = h0.nics[0].intf, h2.nics[0].intf
        server = fab.popen("h2", [sys.executable, "-c", _SERVER])
        try:
            fab.wait_listening("h2", 5400)
            before0, before2 = _class_counts(fab, "h0", intf0), _class_counts(fab, "h2", intf2)
            client = fab.popen("h0", [sys.executable, "-c", _CLIENT, h2.ip()])
            assert client.wait(timeout=30) == 0
            server.wait(timeout=10)
            assert pings(fab, "h0", h2.ip())
            after0, after2 = _class_counts(fab, "h0", intf0), _class_counts(fab, "h2", intf2)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
    sent = {c: (after0[c][0] - before0[c][0], after0[c][1] - before0[c][1]) for c in after0}
    acked = {c: (after2[c][0] - before2[c][0], after2[c][1] - before2[c][1]) for c in after2}
    assert sent["5:20"][1] >= SMALL_SENDS  # every short send went as data
    assert sent["5:10"][1] >= 2  # the handshake and the ping
    assert sent["5:10"][0] / sent["5:10"][1] < 100, sent  # control packets and pings only
    assert acked["5:10"][1] >= SMALL_SENDS / 2  # h2's pure ACKs (delayed: one per two or so)
    assert acked["5:20"][1] <= 1, acked  # h2 sent no data (a ping reply goes as 5:10)
