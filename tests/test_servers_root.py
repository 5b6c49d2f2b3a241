"""A fabric spread over two stand-in servers, for real (root, issue #43): Mininet's Cluster
Edition nodes on each server over ssh, VXLAN links between them, one controller; every host
reaches every other across the servers, a link that crosses carries its shaped rate, and a
run killed with SIGKILL is removed by ``fabriclab clean --servers`` without touching anything
it did not make (a canary in the caller's namespace and one in a namespace of its own).

The stand-ins are made here and stopped at the end; if any exist already the module is
skipped (they are not ours to touch).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.core.placement import place
from testbed.core.servers import ServersSpec, load_servers, server_rundirs
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import cleanup, standins
from testbed.emulator.calibrate import TCP_WIRE_FACTOR
from testbed.emulator.fabric import Fabric
from testbed.emulator.faults import Canaries
from testbed.emulator.preflight import is_root
from testbed.emulator.sampler import LinkSampler, window_rates

ROOT = Path(__file__).resolve().parents[1]
RATE_MBIT_S = 50
FABRIC = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
          "host_link_mbit_s": RATE_MBIT_S, "uplink_mbit_s": RATE_MBIT_S}

# Not marked `root`: that mark also needs this machine's own Open vSwitch, which a fabric
# over stand-ins does not use (each stand-in runs its own).
pytestmark = [
    pytest.mark.skipif(not is_root(), reason="needs root"),
    pytest.mark.skipif(not Path(standins.SSHD).is_file(),
                       reason="sshd is missing (apt-get install openssh-server)"),
    pytest.mark.slow,
]


def fabriclab(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> tuple[Path, ServersSpec]:
    if os.path.lexists(standins.BASE) or any(
            os.path.lexists(standins.NETNS_DIR / n) for n in ("fllan", "fls0", "fls1")):
        pytest.skip(f"stand-in servers exist already ({standins.BASE}): not ours to touch")
    path = tmp_path_factory.mktemp("servers") / "servers.yaml"
    made = fabriclab("servers", "local", "2", "--out", str(path))
    try:
        assert made.returncode == 0, made.stderr
        yield path, load_servers(path)
    finally:
        stopped = fabriclab("servers", "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert standins.StandinsState.load() is None


@pytest.fixture(autouse=True)
def canaries():
    with Canaries() as c:
        yield
        assert c.alive(), "a canary was killed"


def plan_of(fabric: dict):
    return build_plan(parse_fabric({"fabric": fabric}))


def on_servers(spec: ServersSpec) -> list[str]:
    """What any fabric left on the stand-ins: bridges in their Open vSwitches, interfaces
    besides their own in their namespaces."""
    left = []
    for name, rundir in server_rundirs(spec).items():
        out = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                             text=True, env={**os.environ, "OVS_RUNDIR": rundir})
        left += [f"bridge {b} on {name}" for b in out.stdout.split()
                 if b != standins.WARM_BRIDGE]
        netns = spec.by_name(name).netns
        links = json.loads(subprocess.run(["ip", "-n", str(netns), "-json", "link", "show"],
                                          capture_output=True, text=True).stdout)
        left += [f"interface {lk['ifname']} on {name}" for lk in links
                 if lk["ifname"] not in ("lo", "eth0", standins.WARM_BRIDGE, "ovs-netdev")]
    return left


def test_a_fabric_over_two_servers_reaches_every_host_and_a_crossing_link_keeps_its_rate(
        servers, tmp_path):
    _, spec = servers
    plan = plan_of(FABRIC)
    placement = place(plan, spec)
    crossing = {(c.link.a, c.link.b) for c in placement.crossing}
    assert crossing, "the placement should cross between the servers"
    fab = Fabric(plan, tmp_path / "run", policy="ecmp", servers=spec)
    fab.start()
    try:
        assert fab.state is not None
        state = cleanup.RunState(**vars(fab.state))
        for a, b in itertools.permutations(plan.hosts, 2):
            out = fab.host(a.name).cmd(f"ping -c1 -W2 {b.ip()}")
            assert " 0% packet loss" in out, f"{a.name} cannot reach {b.name}"
        # h0 (server s0) to h2 (server s1): whichever spine ECMP picks, one link crosses
        server = fab.popen("h2", ["iperf3", "-s", "-1", "-p", "5301"],
                           stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        with LinkSampler(plan, fab.namespace_pids()) as sampler:
            client = fab.popen("h0", ["iperf3", "-c", plan.node("h2").ip(), "-p", "5301",
                                      "-t", "4", "-J"], stdout=subprocess.PIPE, text=True)
            start = time.monotonic()
            out, _ = client.communicate(timeout=30)
        server.wait(timeout=10)
        rates = window_rates(sampler.counters(), start + 1, start + 3.7)
        across = rates[[(s, d) in crossing or (d, s) in crossing
                        for s, d in zip(rates["src"], rates["dst"], strict=True)]]
        busiest = float(across["achieved_mbit_s"].max()) * TCP_WIRE_FACTOR
        assert 0.85 * RATE_MBIT_S <= busiest <= 1.1 * RATE_MBIT_S, (
            f"the crossing link carried {busiest:.1f} Mbit/s of {RATE_MBIT_S}")
        goodput = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
        assert 0.8 * RATE_MBIT_S <= goodput <= 1.05 * RATE_MBIT_S
    finally:
        assert fab.stop() == []
    assert cleanup.leftovers(state) == []
    assert on_servers(spec) == []


CHILD = """
import sys, time
from testbed.core.servers import load_servers
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.fabric import Fabric
fab = Fabric(build_plan(parse_fabric({"fabric": %r})), sys.argv[1], policy="ecmp",
             servers=load_servers(sys.argv[2]))
with fab:
    fab.popen("h2", ["sleep", "300"])
    print(fab.state.run_id, flush=True)
    time.sleep(300)
"""


def test_clean_servers_removes_what_a_killed_run_left_on_every_server(servers, tmp_path):
    path, spec = servers
    child = subprocess.Popen([sys.executable, "-c", CHILD % (FABRIC,), str(tmp_path / "run"),
                              str(path)], stdout=subprocess.PIPE, text=True)
    run_id = child.stdout.readline().strip()
    assert run_id, "the child run did not come up"
    state = cleanup.RunState(**json.loads((cleanup.STATE_DIR / f"{run_id}.json").read_text()))
    assert on_servers(spec), "the fabric should be up on the servers"
    child.kill()  # SIGKILL: no teardown at all
    child.wait(timeout=10)
    assert cleanup.leftovers(state)
    out = fabriclab("clean", "--servers", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert run_id in out.stdout
    assert cleanup.leftovers(state) == []
    assert on_servers(spec) == []
    assert not (cleanup.STATE_DIR / f"{run_id}.json").exists()
    status = fabriclab("servers", "status")
    assert status.stdout.count("alive, reachable over ssh") == 2, status.stdout


def test_a_server_with_more_ports_than_a_terminal_line_holds_gets_all_its_bridges(
        servers, tmp_path):
    """4 leaves of 8 hosts and 8 spines: 48 ports on each server, whose bridge batch is longer
    than the 4095 bytes a terminal line holds (it once went through a shell's terminal, and
    the bridges were silently never made)."""
    _, spec = servers
    plan = plan_of({"kind": "leaf_spine", "leaves": 4, "spines": 8, "hosts_per_leaf": 8,
                    "host_link_mbit_s": 10, "uplink_mbit_s": 10})
    with Fabric(plan, tmp_path / "run", policy="ecmp", servers=spec) as fab:
        assert fab.controller is not None
        health = fab.controller.get("/health")
        assert health["ready"] == health["switches"] == len(plan.switches)
        last = plan.hosts[-1]
        assert " 0% packet loss" in fab.host("h0").cmd(f"ping -c1 -W2 {last.ip()}")
    assert on_servers(spec) == []
