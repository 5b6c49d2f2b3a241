"""The fully_connected dimension kind without root: the plan's mesh (links, NICs, addresses,
MACs), the emulator's host routes to each peer, the static-route trace, the spec's checks, and
the model and simulator splitting a host's bandwidth over its n-1 links."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from sdn_app.static_routes import static_rules, trace
from testbed.core.errors import SpecError
from testbed.core.experiment import expand
from testbed.core.jobs import check_against_fabric
from testbed.core.spec import parse_fabric
from testbed.core.topology import FabricPlan, build_plan, dim_peers
from testbed.emulator.fabric import Fabric
from testbed.sim.backend import SimRunner
from testbed.sim.collectives import themis_allreduce
from workloads.model import predict

MESH = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                     {"size": 4, "mbit_s": 30, "kind": "fully_connected"}]}


@pytest.fixture
def plan() -> FabricPlan:
    return build_plan(parse_fabric({"fabric": MESH}))


def test_every_pair_of_mesh_peers_has_one_link_at_a_share_of_the_rate(plan) -> None:
    fc = [lk for lk in plan.links if lk.kind == "fc"]
    assert len(fc) == 2 * 6  # two groups of 4, C(4, 2) pairs each
    assert {lk.mbit_s for lk in fc} == {10.0}  # 30 Mbit/s per host over 3 links
    pairs = {frozenset((lk.a, lk.b)) for lk in fc}
    for h in plan.hosts:
        for j in dim_peers(h.index, 1, plan.spec.sizes):
            if j != h.index:
                assert frozenset((h.name, f"h{j}")) in pairs
    assert len(pairs) == len(fc)


def test_mesh_nics_share_one_address_and_face_their_peer(plan) -> None:
    for h in plan.hosts:
        mesh = [n for n in h.nics if n.dim == 1]
        assert len(mesh) == 3
        assert {n.ip for n in mesh} == {h.ip(1)} and {n.prefix for n in mesh} == {32}
        assert h.ip(1).startswith("10.2.")
        for nic in mesh:  # the link on this NIC's port reaches the peer its side names
            (lk,) = [lk for lk in plan.links if (lk.a, lk.a_port) == (h.name, nic.port)
                     or (lk.b, lk.b_port) == (h.name, nic.port)]
            other = plan.node(lk.b if lk.a == h.name else lk.a)
            assert nic.side == f"peer{other.coords[1]}"
    macs = [n.mac for h in plan.hosts for n in h.nics]
    assert len(set(macs)) == len(macs)
    assert FabricPlan.from_json(plan.to_json()) == plan


def test_host_routes_send_each_peer_over_its_own_link(plan) -> None:
    fab = object.__new__(Fabric)  # _host_commands reads only the plan
    fab.plan = plan
    commands = list(fab._host_commands(0))
    for j in (2, 4, 6):  # h0's mesh peers
        peer = plan.hosts[j]
        mine = plan.hosts[0].nic(1, f"peer{peer.coords[1]}")
        theirs = peer.nic(1, "peer0")
        assert f"route replace {theirs.ip}/32 dev {mine.intf}" in commands
        assert (f"neigh replace {theirs.ip} lladdr {theirs.mac} dev {mine.intf} nud permanent"
                in commands)


def test_trace_reaches_every_mesh_peer_in_one_hop(plan) -> None:
    rules = static_rules(plan)
    for h in plan.hosts:
        for j in dim_peers(h.index, 1, plan.spec.sizes):
            if j != h.index:
                path = trace(plan, rules, h.name, f"h{j}", 1)
                assert len(path) == 1 and path[0][0].kind == "fc"


@pytest.mark.parametrize("dim_algorithm", ["ring", "halving-doubling", "direct"])
def test_every_collective_may_run_on_a_mesh(dim_algorithm) -> None:
    exp = expand({"name": "m", "fabric": MESH, "policy": "shortest", "jobs": [
        {"name": "j", "hosts_wanted": 8, "algorithm": "themis", "dim_algorithm": dim_algorithm,
         "workload": {"kind": "allreduce", "sizes": ["64KiB"]}}]})[0]
    check_against_fabric(exp, build_plan(exp.fabric))


def test_direct_is_refused_on_a_ring_dimension() -> None:
    ring = {"kind": "multidim", "dims": [{"size": 4, "mbit_s": 30, "kind": "ring"}]}
    exp = expand({"name": "m", "fabric": ring, "policy": "shortest", "jobs": [
        {"name": "j", "hosts_wanted": 4, "algorithm": "themis", "dim_algorithm": "direct",
         "workload": {"kind": "allreduce", "sizes": ["64KiB"]}}]})[0]
    with pytest.raises(SpecError, match="direct exchanges data beyond ring neighbours"):
        check_against_fabric(exp, build_plan(exp.fabric))


def test_model_splits_the_host_bandwidth_over_the_mesh_links() -> None:
    kw = {"dim_sizes": [4], "dim_bandwidths_bps": [30e9], "total_bytes": 3 * 2**20,
          "chunks": 1, "policy": "baseline"}
    switch = predict(**kw, dim_algorithm="ring")
    direct = predict(**kw, dim_algorithm="direct", dim_kinds=["fully_connected"])
    ring = predict(**kw, dim_algorithm="ring", dim_kinds=["fully_connected"])
    assert direct.time_s == pytest.approx(switch.time_s)  # all 3 links at once: 30 Gbit/s
    assert ring.time_s == pytest.approx(3 * switch.time_s)  # one 10 Gbit/s link at a time
    assert ring.utilisation == pytest.approx(1 / 3)


@pytest.mark.parametrize(("dim_algorithm", "order"), [
    ("ring", "fifo"), ("direct", "scf"), (["direct", "halving-doubling"], "scf")])
def test_simulator_agrees_with_the_model_on_a_mesh(dim_algorithm, order) -> None:
    kw = {"dim_sizes": [4, 2], "dim_bandwidths_bps": [30e9, 20e9], "total_bytes": 2**20,
          "chunks": 8, "policy": "themis", "order": order, "dim_algorithm": dim_algorithm,
          "dim_kinds": ["fully_connected", "switch"]}
    assert themis_allreduce(**kw).time_s == pytest.approx(predict(**kw).time_s, rel=1e-6)


def test_a_mesh_job_runs_on_the_sim_backend(tmp_path: Path) -> None:
    exp = expand({"name": "mesh", "fabric": MESH, "policy": "shortest", "jobs": [
        {"name": "j", "hosts_wanted": 8, "algorithm": "themis", "dim_algorithm": "direct",
         "chunks": 4, "workload": {"kind": "allreduce", "sizes": ["256KiB"], "iterations": 1}}]})
    run_dir = SimRunner(exp[0], tmp_path).run()
    assert (run_dir / "summary.json").exists()


def test_mesh_macs_differ_from_ring_and_switch_nics() -> None:
    fabric = {"kind": "multidim", "dims": [{"size": 3, "mbit_s": 30, "kind": "ring"},
                                           {"size": 3, "mbit_s": 30, "kind": "fully_connected"},
                                           {"size": 2, "mbit_s": 30}]}
    plan = build_plan(parse_fabric({"fabric": fabric}))
    macs = [n.mac for h in plan.hosts for n in h.nics]
    assert len(set(macs)) == len(macs)
    for a, b in itertools.combinations(plan.hosts, 2):
        assert a.ip(1) != b.ip(1)
