"""Kernel-bridge switches on a real fabric: reachability as the static rules give it, frames
only to their destination's port, shaped rates measured in the bridges' namespaces, and
nothing left behind, also after a SIGKILL."""

from __future__ import annotations

import time

import pytest
from test_fabric_root import assert_gone, pings, plan_of, start_child

from testbed.core.topology import one_switch_plan
from testbed.emulator import cleanup
from testbed.emulator.calibrate import TCP_WIRE_FACTOR
from testbed.emulator.fabric import Fabric
from testbed.emulator.sampler import LinkSampler, window_rates
from testbed.emulator.traffic import IperfFlow, run_flows

pytestmark = [pytest.mark.root, pytest.mark.slow]

# dimension 0: switches of 4 hosts (h0-h3 share d0s0); dimension 1: switches of 2 hosts
MULTIDIM = {"kind": "multidim", "dims": [{"size": 4, "mbit_s": 40, "kind": "switch"},
                                         {"size": 2, "mbit_s": 20, "kind": "switch"}]}


def rx_packets(fab: Fabric, host: str, intf: str) -> int:
    return int(fab.host(host).cmd(f"cat /sys/class/net/{intf}/statistics/rx_packets"))


def test_kernel_bridges_forward_shape_and_tear_down(tmp_path):
    plan = plan_of(MULTIDIM)
    with Fabric(plan, tmp_path / "run", switches="kernel") as fab:
        state = cleanup.RunState(**vars(fab.state))
        assert fab.controller is None and state.bridges == [] and state.root_intfs == []
        assert set(fab.namespace_pids()) == {n.name for n in plan.hosts + plan.switches}
        assert pings(fab, "h0", plan.node("h3").ip(0))
        assert not pings(fab, "h0", plan.node("h4").ip(0))  # another dimension-0 switch
        assert pings(fab, "h0", plan.node("h4").ip(1))
        # no learning, no flooding: h0's frames to h1 reach no other port of the switch
        h2_nic = plan.node("h2").nic(0).intf
        before = rx_packets(fab, "h2", h2_nic)
        assert pings(fab, "h0", plan.node("h1").ip(0))
        assert rx_packets(fab, "h2", h2_nic) == before
        h0, h1 = plan.node("h0"), plan.node("h1")
        with LinkSampler(plan, fab.namespace_pids()) as sampler:
            start = time.monotonic()
            res = run_flows(fab, [IperfFlow("h0", "h1", h0.ip(0), h1.ip(0))], 4)
        rates = window_rates(sampler.counters(), start + 1, start + 3.7).set_index(["src", "dst"])
        up = rates.loc[next(k for k in rates.index if k[0] == "h0" and k[1].startswith("d0"))]
        achieved = float(up["achieved_mbit_s"]) * TCP_WIRE_FACTOR
        assert 0.9 * 40 <= achieved <= 1.1 * 40, f"h0's uplink carried {achieved:.1f} Mbit/s"
        assert 0.85 * 40e6 <= res.goodput_bps[0] <= 1.05 * 40e6
    assert fab.leftovers == []
    assert_gone(plan, state)


def test_clean_removes_kernel_bridges_of_a_killed_run(tmp_path):
    child, state = start_child(tmp_path, MULTIDIM, "kernel")
    child.kill()
    child.wait(timeout=10)
    assert cleanup.leftovers(state)
    assert any(state.run_id in line for line in cleanup.clean_stale())
    assert_gone(plan_of(MULTIDIM), state)


def test_a_kernel_bridge_of_many_ports_comes_up(tmp_path):
    """33 ports: its set-up is longer than a terminal line (it once hung at 4095 bytes)."""
    plan = one_switch_plan(32, 100)
    with Fabric(plan, tmp_path / "run", switches="kernel") as fab:
        state = cleanup.RunState(**vars(fab.state))
        assert pings(fab, "h0", plan.node("h31").ip())
    assert_gone(plan, state)


def test_kernel_bridges_carry_a_leaf_spine_tree_across_the_spine(tmp_path):
    """Two leaves under one spine: every host reaches every other through the bridges' static
    entries, a frame crosses the spine only for a host of the other leaf, and a flow across
    it gets its host link's rate."""
    plan = plan_of({"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
                    "host_link_mbit_s": 40, "uplink_mbit_s": 40})
    with Fabric(plan, tmp_path / "run", switches="kernel") as fab:
        state = cleanup.RunState(**vars(fab.state))
        assert fab.controller is None and state.bridges == []
        for src in ("h0", "h3"):
            for dst in plan.hosts:
                if dst.name != src:
                    assert pings(fab, src, dst.ip()), f"{src} -> {dst.name}"
        # h0 -> h1 stays on leaf0: nothing reaches the spine's port to leaf1
        down = next(lk for lk in plan.links if {lk.a, lk.b} == {"leaf1", "spine0"})
        spine_intf = down.a_intf if down.a == "spine0" else down.b_intf
        sent = f"cat /sys/class/net/{spine_intf}/statistics/tx_packets"
        before = int(fab.host("spine0").cmd(sent))
        assert pings(fab, "h0", plan.node("h1").ip())
        assert int(fab.host("spine0").cmd(sent)) == before
        h0, h2 = plan.node("h0"), plan.node("h2")
        res = run_flows(fab, [IperfFlow("h0", "h2", h0.ip(), h2.ip())], 3)
        assert 0.85 * 40e6 <= res.goodput_bps[0] <= 1.05 * 40e6
    assert fab.leftovers == []
    assert_gone(plan, state)
