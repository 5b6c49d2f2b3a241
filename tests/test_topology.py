"""Topology shape, naming and JSON export of the pure fabric plan, and the static routes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdn_app.static_routes import Unreachable, default_circuits, static_rules, trace
from testbed.core.spec import parse_fabric
from testbed.core.topology import (
    FabricPlan,
    build_plan,
    coords_of,
    dim_peers,
    index_of,
    one_switch_plan,
    ring_neighbours,
)


def plan_of(**fabric) -> FabricPlan:
    return build_plan(parse_fabric({"fabric": fabric}))


def leaf_spine(leaves=2, spines=2, hosts=2, **extra) -> FabricPlan:
    fabric = {"kind": "leaf_spine", "leaves": leaves, "spines": spines, "hosts_per_leaf": hosts,
              "host_link_mbit_s": 50, "uplink_mbit_s": 40}
    return plan_of(**(fabric | extra))


def multidim(*dims) -> FabricPlan:
    return plan_of(kind="multidim",
                   dims=[{"size": s, "mbit_s": 10 * (i + 1), "kind": k}
                         for i, (s, k) in enumerate(dims)])


def test_leaf_spine_counts_and_ports():
    p = leaf_spine(4, 4, 4)
    assert (len(p.hosts), len(p.switches), len(p.links)) == (16, 8, 16 + 16)
    assert {s.role for s in p.switches} == {"leaf", "spine"}
    up = p.link_between("leaf2", "spine3")
    assert len(up) == 1 and (up[0].a_port, up[0].b_port, up[0].mbit_s) == (4 + 1 + 3, 3, 40)
    h = p.node("h9")
    assert (h.leaf, h.slot, h.nics[0].ip, h.nics[0].intf) == (2, 1, "10.0.0.10", "h9-eth0")
    assert p.link_between("h9", "leaf2")[0].b_port == 2


def test_one_switch_plan_puts_every_host_on_one_leaf_or_one_dimension_switch():
    p = one_switch_plan(3, 40)
    assert p == leaf_spine(1, 1, 3, host_link_mbit_s=40, uplink_mbit_s=40)
    assert {lk.b for lk in p.links if lk.kind == "host"} == {"leaf0"}
    assert {lk.mbit_s for lk in p.links} == {40}
    m = one_switch_plan(3, 40, kind="multidim")
    assert [s.name for s in m.switches] == ["d0s0"] and len(m.links) == 3
    assert {(lk.b, lk.mbit_s) for lk in m.links} == {("d0s0", 40)}


def test_ocs_fabric_wiring():
    p = leaf_spine(4, 2, 2, kind="ocs_leaf_spine", ocs_count=3)
    assert len(p.switches) == 4 + 2 + 3
    assert not [lk for lk in p.links if lk.kind == "uplink"]
    for o in range(3):
        ocs = f"ocs{o}"
        assert len([lk for lk in p.links if lk.b == ocs and lk.kind == "ocs-leaf"]) == 4
        assert len([lk for lk in p.links if lk.b == ocs and lk.kind == "ocs-spine"]) == 2 * 2
    # each spine has two ports on each OCS; each leaf one
    assert len(p.link_between("spine1", "ocs2")) == 2
    assert len(p.link_between("leaf3", "ocs2")) == 1
    for c in default_circuits(p):
        assert c.ocs.startswith("ocs") and c.port_a <= 4 < c.port_b


def test_multidim_switch_and_ring_shape():
    p = multidim((2, "switch"), (4, "ring"))
    assert (len(p.hosts), len(p.switches), len(p.links)) == (8, 4, 8 + 8)
    h5 = p.node("h5")
    assert h5.coords == (1, 2)
    assert [n.ip for n in h5.nics] == ["10.1.0.6", "10.2.0.6", "10.2.0.6"]
    assert [n.side for n in h5.nics] == ["host", "next", "prev"]
    assert {n.mac for n in h5.nics}.__len__() == 3
    # ring of 4 in dimension 1: h5 (coordinate 2) -> next h7, prev h3
    assert ring_neighbours(5, 1, (2, 4)) == (7, 3)
    assert p.link_between("h5", "h7")[0].a_port == 1  # h5's next NIC meets h7's prev NIC


def test_ring_of_two_is_one_link_and_size_one_is_skipped():
    p = multidim((2, "ring"), (1, "switch"), (3, "switch"))
    ring = [lk for lk in p.links if lk.kind == "ring"]
    assert len(ring) == 3  # one link per pair
    assert all(len(h.nics) == 2 for h in p.hosts)  # no NIC for the size-1 dimension
    assert len(p.switches) == 2  # dimension 2 groups: 6 hosts / 3


@pytest.mark.parametrize("sizes", [(2, 4), (4, 4, 4), (3, 5), (2, 1, 3)])
def test_neighbours_in_each_dimension(sizes):
    n = 1
    for s in sizes:
        n *= s
    for i in range(n):
        assert index_of(coords_of(i, sizes), sizes) == i
        for d in range(len(sizes)):
            peers = dim_peers(i, d, sizes)
            assert len(peers) == sizes[d] and i in peers
            for j in peers:  # peers differ from i only in coordinate d
                diff = [k for k in range(len(sizes)) if coords_of(i, sizes)[k] != coords_of(
                    j, sizes)[k]]
                assert diff in ([], [d])


def test_names_addresses_and_dpids_are_unique_and_valid():
    for p in (leaf_spine(4, 4, 4), multidim((4, "switch"), (4, "switch"), (4, "ring")),
              leaf_spine(4, 4, 2, kind="ocs_leaf_spine", ocs_count=4)):
        dpids = [s.dpid for s in p.switches]
        assert len(set(dpids)) == len(dpids) and all(0 < d < 2**48 for d in dpids)
        macs = [n.mac for h in p.hosts for n in h.nics]
        assert len(set(macs)) == len(macs)
        intfs = [lk.a_intf for lk in p.links] + [lk.b_intf for lk in p.links]
        assert len(set(intfs)) == len(intfs)
        assert max(len(i) for i in intfs) <= 15  # Linux IFNAMSIZ
        ports = [(lk.a, lk.a_port) for lk in p.links] + [(lk.b, lk.b_port) for lk in p.links]
        assert len(set(ports)) == len(ports)


def test_json_export_round_trips_and_names_both_ends():
    p = leaf_spine(2, 2, 2, kind="ocs_leaf_spine", ocs_count=2)
    d = p.to_dict()
    assert {"kind", "spec", "switches", "hosts", "links"} <= d.keys()
    assert d["switches"][0]["dpid_hex"] == f"{p.switches[0].dpid:016x}"
    assert d["links"][0]["a_intf"] == "h0-eth0" and d["links"][0]["b_intf"] == "leaf0-eth1"
    assert d["hosts"][0]["nics"][0]["mac"] == "02:00:00:00:00:01"
    assert FabricPlan.from_json(p.to_json()) == p


def test_static_routes_reach_every_leaf_spine_pair_through_one_spine():
    p = leaf_spine(3, 2, 2)
    rules = static_rules(p)
    for a, b in itertools.permutations(p.hosts, 2):
        path = trace(p, rules, a.name, b.name)
        hops = [(lk.a, lk.b) if fwd else (lk.b, lk.a) for lk, fwd in path]
        assert hops[0][0] == a.name and hops[-1][1] == b.name
        assert len(path) == (2 if a.leaf == b.leaf else 4)


def test_static_routes_spread_pairs_over_all_spines():
    p = leaf_spine(2, 4, 4)
    rules = static_rules(p)
    spines = set()
    for a in p.hosts[:4]:
        for b in p.hosts[4:]:
            spines |= {n for lk, _ in trace(p, rules, a.name, b.name)
                       for n in (lk.a, lk.b) if n.startswith("spine")}
    assert spines == {"spine0", "spine1", "spine2", "spine3"}


def test_ocs_default_circuits_connect_when_every_spine_is_reachable():
    p = leaf_spine(4, 4, 2, kind="ocs_leaf_spine", ocs_count=4)
    rules = static_rules(p)
    for a, b in itertools.permutations(p.hosts, 2):
        path = trace(p, rules, a.name, b.name)
        if a.leaf != b.leaf:
            assert len(path) == 6  # host, leaf-ocs, ocs-spine, spine-ocs, ocs-leaf, host


def test_multidim_reaches_group_peers_and_ring_neighbours_only():
    p = multidim((2, "switch"), (4, "ring"))
    rules = static_rules(p)
    assert len(trace(p, rules, "h0", "h1", 0)) == 2
    assert len(trace(p, rules, "h0", "h2", 1)) == 1  # next around the ring
    assert len(trace(p, rules, "h0", "h6", 1)) == 1  # prev around the ring
    with pytest.raises(Unreachable):
        trace(p, rules, "h0", "h4", 1)  # opposite side of the ring
    with pytest.raises(Unreachable):
        trace(p, rules, "h0", "h3", 0)  # not in h0's dimension-0 group


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["switch", "ring"])),
                min_size=1, max_size=3))
def test_any_multidim_plan_is_consistent(dims):
    if all(s == 1 for s, _ in dims):
        return
    p = multidim(*dims)
    sizes = tuple(s for s, _ in dims)
    for h in p.hosts:
        assert h.coords == coords_of(h.index, sizes)
        for d, (s, kind) in enumerate(dims):
            nics = [n for n in h.nics if n.dim == d]
            assert len(nics) == (0 if s == 1 else 2 if kind == "ring" and s > 2 else 1)
    rules = static_rules(p)
    for h in p.hosts:
        for d in range(len(dims)):
            for j in dim_peers(h.index, d, sizes):
                if j != h.index and (dims[d][1] == "switch" or j in ring_neighbours(
                        h.index, d, sizes)):
                    assert trace(p, rules, h.name, f"h{j}", d)
