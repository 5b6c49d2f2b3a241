"""Placement of a fabric onto servers (issue #43): whole leaves, or whole groups of dimension 0,
per server, so only spine (or the other dimensions') links cross; weighted by cores; refused in
one sentence when the rule cannot hold; and `fabriclab topo --servers` prints it."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from testbed.cli import main
from testbed.core.errors import SpecError
from testbed.core.placement import place, shares
from testbed.core.servers import load_servers, parse_servers
from testbed.core.spec import parse_fabric
from testbed.core.topology import FabricPlan, build_plan, load_plan

EXAMPLE = "experiments/servers/example.yaml"
DEMO = "experiments/demo.yaml"


def servers(n: int, cores: list[int] | None = None):
    return parse_servers({"servers": [
        {"name": f"s{k}", "ssh": f"root@192.0.2.{k + 1}", "lan_ip": f"192.0.2.{k + 1}",
         **({"cores": cores[k]} if cores else {})} for k in range(n)]})


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int = 2, kind: str = "leaf_spine",
               **extra) -> FabricPlan:
    return build_plan(parse_fabric({"fabric": {
        "kind": kind, "leaves": leaves, "spines": spines, "hosts_per_leaf": hosts_per_leaf,
        "host_link_mbit_s": 10, "uplink_mbit_s": 10, **extra}}))


def multidim(*dims: tuple[int, str]) -> FabricPlan:
    return build_plan(parse_fabric({"fabric": {"kind": "multidim", "dims": [
        {"size": n, "mbit_s": 10, "kind": kind} for n, kind in dims]}}))


def assert_leaves_whole(plan: FabricPlan, placement) -> None:
    """Every host on its leaf's server, every host-leaf link on one server."""
    for h in plan.hosts:
        assert placement.server_of[h.name] == placement.server_of[f"leaf{h.leaf}"]
    assert all(c.link.kind in ("uplink", "ocs-leaf", "ocs-spine") for c in placement.crossing)


def test_the_demo_on_two_servers_keeps_each_leaf_with_its_hosts():
    plan = load_plan(DEMO)
    assert (plan.spec.leaves, plan.spec.spines, len(plan.hosts)) == (2, 4, 8)
    p = place(plan, load_servers(EXAMPLE))
    assert p.nodes_on("s0") == ["h0", "h1", "h2", "h3", "leaf0", "spine0", "spine1"]
    assert p.nodes_on("s1") == ["h4", "h5", "h6", "h7", "leaf1", "spine2", "spine3"]
    assert_leaves_whole(plan, p)
    # only spine links cross: each leaf's links to the other server's two spines
    assert [c.link.name for c in p.crossing] == [
        "leaf0:7-spine2:1", "leaf0:8-spine3:1", "leaf1:5-spine0:2", "leaf1:6-spine1:2"]
    assert [c.vni for c in p.crossing] == [1, 2, 3, 4]
    assert [(c.a_server, c.b_server) for c in p.crossing] == [("s0", "s1")] * 2 + [
        ("s1", "s0")] * 2
    for lk in plan.links:
        assert p.is_crossing(lk) == (p.server_of[lk.a] != p.server_of[lk.b])
        assert (p.vni_of(lk) is not None) == p.is_crossing(lk)
    assert (p.tunnel, p.mtu, p.kept_dim) == ("vxlan", 1450, None)


def test_one_server_holds_everything_and_nothing_crosses():
    for plan in (load_plan(DEMO), multidim((2, "switch"), (4, "ring")), leaf_spine(1, 1)):
        p = place(plan, servers(1))
        assert set(p.server_of.values()) == {"s0"} and p.crossing == ()
        assert len(p.nodes_on("s0")) == len(plan.hosts) + len(plan.switches)


def test_leaves_in_contiguous_blocks_balanced_by_count():
    plan = leaf_spine(5, 3)
    p = place(plan, servers(2))
    leaves = {s: [n for n in p.nodes_on(s) if n.startswith("leaf")] for s in p.servers}
    spines = {s: [n for n in p.nodes_on(s) if n.startswith("spine")] for s in p.servers}
    assert leaves == {"s0": ["leaf0", "leaf1", "leaf2"], "s1": ["leaf3", "leaf4"]}
    assert spines == {"s0": ["spine0", "spine1"], "s1": ["spine2"]}
    assert_leaves_whole(plan, p)
    # a leaf-spine link crosses exactly when its leaf and spine are on different servers
    assert len(p.crossing) == 3 * 1 + 2 * 2


def test_cores_weigh_the_blocks():
    plan = leaf_spine(6, 3)
    p = place(plan, servers(2, cores=[4, 2]))
    on = {s: Counter(n.rstrip("0123456789") for n in p.nodes_on(s)) for s in p.servers}
    assert on["s0"]["leaf"] == 4 and on["s1"]["leaf"] == 2
    assert on["s0"]["spine"] == 2 and on["s1"]["spine"] == 1
    assert_leaves_whole(plan, p)
    # without cores on every server: by count
    p = place(plan, parse_servers({"servers": [
        {"name": "a", "ssh": "root@192.0.2.1", "lan_ip": "192.0.2.1", "cores": 4},
        {"name": "b", "ssh": "root@192.0.2.2", "lan_ip": "192.0.2.2"}]}))
    assert Counter(p.server_of[f"leaf{i}"] for i in range(6)) == {"a": 3, "b": 3}


def test_shares_give_every_server_its_least_and_balance_the_rest():
    assert shares(8, [1, 1, 1]) == [3, 3, 2]
    assert shares(2, [100, 1], least=1) == [1, 1]
    assert shares(7, [2, 1], least=1) == [5, 2]
    assert shares(1, [1, 2]) == [0, 1]
    assert shares(0, [1, 1]) == [0, 0]


def test_ocs_switches_are_spread_like_spines():
    plan = leaf_spine(4, 4, kind="ocs_leaf_spine", ocs_count=4)
    p = place(plan, servers(2))
    assert [p.server_of[f"ocs{o}"] for o in range(4)] == ["s0", "s0", "s1", "s1"]
    assert [p.server_of[f"spine{s}"] for s in range(4)] == ["s0", "s0", "s1", "s1"]
    assert_leaves_whole(plan, p)
    assert {c.link.kind for c in p.crossing} == {"ocs-leaf", "ocs-spine"}
    assert "OCS" in p.rule


def test_multidim_keeps_groups_of_dimension_0_whole():
    plan = multidim((4, "switch"), (4, "switch"), (4, "switch"))  # the 4x4x4 fabric
    p = place(plan, servers(2))
    assert p.kept_dim == 0
    assert p.nodes_on("s0")[:32] == [f"h{i}" for i in range(32)]
    for s in plan.switches_with_role("dim"):
        if s.dim == 0:  # each dimension-0 switch with its hosts
            hosts = [lk.a for lk in plan.links if lk.b == s.name]
            assert {p.server_of[h] for h in hosts} == {p.server_of[s.name]}
    # only the other dimensions' links cross (here only dimension 2: dimension 1's groups
    # fall inside a server's block, and each of its switches goes where its hosts are)
    assert Counter(c.link.dim for c in p.crossing) == {2: 32}
    assert Counter(p.server_of.values()) == {"s0": 56, "s1": 56}


@pytest.mark.parametrize("kind", ["ring", "fully_connected", "switch"])
def test_multidim_other_dimension_crosses_whatever_its_kind(kind):
    plan = multidim((2, "switch"), (4, kind))
    p = place(plan, servers(2))
    assert p.nodes_on("s0") == ["h0", "h1", "h2", "h3", "d0s0", "d0s1"] + (
        ["d1s0"] if kind == "switch" else [])
    assert p.crossing and {c.link.dim for c in p.crossing} == {1}


def test_multidim_keeps_the_first_dimension_with_links():
    plan = multidim((1, "switch"), (4, "ring"), (2, "switch"))
    p = place(plan, servers(2))
    assert p.kept_dim == 1 and {c.link.dim for c in p.crossing} == {2}


@pytest.mark.parametrize(("plan", "n", "message"), [
    (leaf_spine(2, 2), 3, "servers: 3 servers for a fabric of 2 leaves; each server holds "
     "whole leaves with their hosts, so give at most 2 servers or more leaves"),
    (leaf_spine(1, 1), 2, "servers: 2 servers for a fabric of 1 leaf;"),
    (multidim((4, "switch"), (2, "ring")), 3,
     "servers: 3 servers for a fabric of 2 groups of dimension 0 (size 4); each server holds "
     "whole groups of dimension 0, so give at most 2 servers"),
])
def test_what_cannot_be_placed_is_refused_in_one_sentence(plan, n, message):
    with pytest.raises(SpecError) as exc:
        place(plan, servers(n))
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_placement_json_names_every_node_and_tunnel():
    plan = load_plan(DEMO)
    data = json.loads(json.dumps(place(plan, load_servers(EXAMPLE)).to_json()))
    assert data["servers"] == ["s0", "s1"] and data["tunnel"] == "vxlan" and data["mtu"] == 1450
    assert set(data["server_of"]) == {h.name for h in plan.hosts} | {
        s.name for s in plan.switches}
    assert data["crossing"][0] == {
        "link": "leaf0:7-spine2:1", "a": "leaf0", "a_intf": "leaf0-eth7", "a_server": "s0",
        "b": "spine2", "b_intf": "spine2-eth1", "b_server": "s1", "kind": "uplink", "vni": 1}


def test_topo_prints_the_plan_per_server_and_the_crossing_links(capsys):
    assert main(["topo", DEMO]) == 0
    alone = capsys.readouterr().out
    assert main(["topo", DEMO, "--servers", EXAMPLE]) == 0
    text = capsys.readouterr().out
    assert text.startswith(alone)  # the usual listing first, unchanged
    assert "on 2 servers (whole leaves per server, spines in balanced blocks):" in text
    assert ("s0 (root@192.0.2.1, tunnels from 192.0.2.1): 4 hosts: h0, h1, h2, h3; "
            "3 switches: leaf0, spine0, spine1") in text
    assert "s1 (root@192.0.2.2, tunnels from 192.0.2.2): 4 hosts: h4, h5, h6, h7" in text
    assert ("4 links cross between servers (4 uplink), each a vxlan tunnel (VNI 1 to 4), the "
            "emulated interfaces at MTU 1450: leaf0–spine2, leaf0–spine3, leaf1–spine0, "
            "leaf1–spine1") in text


def test_topo_json_has_the_placement_only_with_servers(capsys):
    assert main(["topo", DEMO, "--json"]) == 0
    plain = capsys.readouterr().out
    assert plain.strip() == load_plan(DEMO).to_json()
    assert main(["topo", DEMO, "--json", "--servers", EXAMPLE]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data.pop("placement")["server_of"]["h7"] == "s1"
    assert data == json.loads(plain)


def test_topo_refuses_bad_servers_in_one_line(tmp_path, capsys):
    bad = tmp_path / "servers.yaml"
    bad.write_text("servers: [{name: s0, ssh: 'root@x;y', lan_ip: 192.0.2.1}]\n")
    assert main(["topo", DEMO, "--servers", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"fabriclab topo: error: {bad}: servers.0.ssh: ") and "\n" not in err
    three = tmp_path / "three.yaml"
    three.write_text("servers:\n" + "".join(
        f"  - {{name: s{k}, ssh: root@192.0.2.{k + 1}, lan_ip: 192.0.2.{k + 1}}}\n"
        for k in range(3)))
    assert main(["topo", DEMO, "--servers", str(three)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("fabriclab topo: error: servers: 3 servers for a fabric of 2 leaves; each "
                   "server holds whole leaves with their hosts, so give at most 2 servers or "
                   "more leaves")
