"""A fully connected dimension on a real fabric (root only): every host reaches every peer of
its mesh over the link to that peer, and an All-Reduce runs across the mesh with every
collective that uses it (ring: one link at a time, direct: all of them at once)."""

from __future__ import annotations

import itertools

import pytest

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan, dim_peers
from testbed.core.traces import read_table
from testbed.emulator.fabric import Fabric
from testbed.emulator.workers import run_on_fabric

pytestmark = [pytest.mark.root, pytest.mark.slow]

# 2 groups of a 4-host mesh (3 links per host at 30/3 Mbit/s) joined by switches of 2
MESH = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                     {"size": 4, "mbit_s": 30, "kind": "fully_connected"}]}


def plan_of(fabric: dict):
    return build_plan(parse_fabric({"fabric": fabric}))


def pings(fab: Fabric, src: str, ip: str, intf: str | None = None) -> bool:
    via = f" -I {intf}" if intf else ""
    return " 0% packet loss" in fab.host(src).cmd(f"ping -c1 -W2{via} {ip}")


def test_every_mesh_peer_is_reached_over_its_own_link(tmp_path):
    plan = plan_of(MESH)
    sizes = plan.spec.sizes
    with Fabric(plan, tmp_path / "run") as fab:
        for h in plan.hosts:
            for j in dim_peers(h.index, 1, sizes):
                if j == h.index:
                    continue
                peer = plan.hosts[j]
                nic = h.nic(1, f"peer{peer.coords[1]}")
                assert pings(fab, h.name, peer.ip(1), nic.intf), (
                    f"{h.name} cannot reach {peer.name} over {nic.intf}")
                route = fab.host(h.name).cmd(f"ip route get {peer.ip(1)}")
                assert f"dev {nic.intf}" in route, f"{h.name} -> {peer.name}: {route}"
        # a mesh joins only its own group: h0's mesh is h0, h2, h4, h6, not h1's
        assert not pings(fab, "h0", plan.node("h1").ip(1))
        for a, b in itertools.combinations(["h0", "h1"], 2):  # dimension 0 still works
            assert pings(fab, a, plan.node(b).ip(0))


@pytest.mark.parametrize("dim_algorithm", ["ring", "direct"])
def test_allreduce_across_the_mesh(tmp_path, dim_algorithm):
    plan = plan_of(MESH)
    hosts = [h.name for h in plan.hosts]
    sizes = [4 * 1001, 256 * 1024]  # uneven shards, and 256 KiB
    with Fabric(plan, tmp_path / "fabric") as fab:
        res = run_on_fabric(fab, hosts, out_dir=tmp_path / dim_algorithm, algorithm="themis",
                            dim_algorithm=dim_algorithm, sizes=sizes, chunks=5, iterations=2,
                            warmup=1, order="scf", timeout=30, wall_timeout=180)
    assert [r.size for r in res.rows] == sizes
    assert all(r.correct for r in res.rows), "a rank's result is not the sum of all inputs"
    phases = read_table(tmp_path / dim_algorithm, "phases").to_pandas()
    assert set(phases["dim"]) == {0, 1}
