"""Where kernel bridges can stand in for Open vSwitch, and the static FDB they get."""

from __future__ import annotations

import pytest

from testbed.core.errors import SpecError
from testbed.core.spec import one_switch_fabric, parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.switch_kinds import bridge_fdb, kernel_bridge_error, resolve

MULTIDIM = {"kind": "multidim", "dims": [{"size": 4, "mbit_s": 40}, {"size": 2, "mbit_s": 20}]}
ONE_LEAF = one_switch_fabric(4, 50)
TWO_LEAVES = dict(ONE_LEAF, leaves=2, spines=2)
TREE = dict(ONE_LEAF, leaves=3, spines=1)  # three leaves under one spine: no loop


def plan_of(fabric: dict):
    return build_plan(parse_fabric({"fabric": fabric}))


@pytest.mark.parametrize(("fabric", "policy", "want"), [
    (MULTIDIM, "shortest", "kernel"),  # destination forwarding on stars of hosts
    (MULTIDIM, None, "kernel"),  # static rules
    (ONE_LEAF, None, "kernel"),
    (ONE_LEAF, "ecmp", "ovs"),  # ECMP's groups are OpenFlow
    (TWO_LEAVES, None, "ovs"),  # loops through the spines
    (TREE, None, "kernel"),
    (TREE, "ecmp", "ovs"),
])
def test_auto_takes_kernel_bridges_only_where_they_can_stand_in(fabric, policy, want):
    plan = plan_of(fabric)
    assert resolve("auto", plan, policy) == want
    assert resolve("ovs", plan, policy) == "ovs"
    assert (kernel_bridge_error(plan, policy) is None) == (want == "kernel")


@pytest.mark.parametrize(("fabric", "policy", "words"), [
    (ONE_LEAF, "vclos", "policy vclos programs its switches with OpenFlow rules"),
    (TWO_LEAVES, None, "more than one leaf and one spine has loops"),
])
def test_kernel_where_it_cannot_stand_in_is_one_sentence(fabric, policy, words):
    with pytest.raises(SpecError, match=words) as err:
        resolve("kernel", plan_of(fabric), policy)
    assert str(err.value).startswith("switches: ") and "\n" not in str(err.value)


def test_unknown_choice_names_the_field():
    with pytest.raises(SpecError, match="switches: 'bridge' is not one of auto, ovs, kernel"):
        resolve("bridge", plan_of(ONE_LEAF), None)


def test_fdb_maps_each_host_port_to_the_mac_behind_it():
    plan = plan_of(MULTIDIM)
    for switch in plan.switches:
        fdb = bridge_fdb(plan, switch.name)
        assert len(fdb) == len({p for p, _ in fdb}) > 1
        for port, mac in fdb:
            (lk,) = [lk for lk in plan.links if port in (lk.a_intf, lk.b_intf)]
            host = plan.node(lk.a if plan.is_host(lk.a) else lk.b)
            assert mac in {n.mac for n in host.nics}
    leaf = bridge_fdb(plan_of(ONE_LEAF), "leaf0")
    assert len(leaf) == 4  # the hosts' ports, not the spine's


def test_fdb_on_a_tree_sends_each_host_the_only_way_there():
    plan = plan_of(TREE)
    macs = {h.name: h.nics[0].mac for h in plan.hosts}
    for switch in plan.switches:
        fdb = bridge_fdb(plan, switch.name)
        assert sorted(m for _, m in fdb) == sorted(macs.values())  # every host, once
        for port, mac in fdb:
            host = next(h for h, m in macs.items() if m == mac)
            leaf = f"leaf{plan.node(host).leaf}"
            (lk,) = [lk for lk in plan.links if port in (lk.a_intf, lk.b_intf)]
            far = lk.b if port == lk.a_intf else lk.a
            if switch.name == leaf:  # its own hosts on their ports
                assert far == host
            elif switch.name.startswith("leaf"):  # the rest up to the spine
                assert far == "spine0"
            else:  # the spine: down to the host's leaf
                assert far == leaf
