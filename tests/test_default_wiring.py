"""The default OCS wiring has one definition (testbed.core.topology.default_circuit): the
circuits the fabric holds without a controller are the ones the allocator calls default."""

from __future__ import annotations

import itertools

import pytest

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import Allocation, Circuit
from sdn_app.allocation.ocs import default_circuit
from sdn_app.program import ocs_circuits
from sdn_app.static_routes import default_circuits
from testbed.core.spec import parse_fabric
from testbed.core.topology import (
    FabricPlan,
    build_plan,
    default_circuit_leaves,
    default_wiring,
)
from testbed.core.topology import default_circuit as topology_default_circuit


def ocs_plan(leaves: int, spines: int, ocs_count: int) -> FabricPlan:
    return build_plan(parse_fabric({"fabric": {
        "kind": "ocs_leaf_spine", "leaves": leaves, "spines": spines, "hosts_per_leaf": 2,
        "host_link_mbit_s": 10, "uplink_mbit_s": 10, "ocs_count": ocs_count}}))


def allocator_defaults(plan: FabricPlan) -> set:
    """Every (leaf, spine) pair's default circuit in the allocator, as OCS port pairs."""
    cluster = Cluster.for_fabric(plan.spec)
    circuits = []
    for leaf, spine in itertools.product(range(cluster.leaves), range(cluster.spines)):
        found = default_circuit(cluster, leaf, spine)
        if found is None:  # fewer OCSes than spines: the pair has no default circuit
            continue
        ocs, port = found
        circuits.append(Circuit(ocs, ("leaf", leaf), ("spine", spine, port)))
    job = Allocation("defaults", "ocs-vclos", (), (), circuits=tuple(circuits))
    return {(c.ocs, c.port_a, c.port_b) for c in ocs_circuits(plan, job)}


@pytest.mark.parametrize("shape", [(4, 4, 4), (4, 2, 3), (6, 3, 3), (8, 4, 4), (3, 2, 5)])
def test_static_default_circuits_are_the_allocators(shape):
    plan = ocs_plan(*shape)
    static = {(c.ocs, c.port_a, c.port_b) for c in default_circuits(plan)}
    assert static == allocator_defaults(plan)


@pytest.mark.parametrize("shape", [(4, 4, 2), (6, 3, 2), (8, 8, 4)])
def test_with_fewer_ocses_than_spines_static_circuits_are_allocator_defaults(shape):
    plan = ocs_plan(*shape)
    static = {(c.ocs, c.port_a, c.port_b) for c in default_circuits(plan)}
    assert static and static == allocator_defaults(plan)


@pytest.mark.parametrize("shape", [(256, 128, 32, 2), (8, 4, 2, 2), (16, 8, 4, 2)])
def test_with_fewer_ocses_than_spines_every_port_is_the_default_of_one_circuit(shape):
    """The paper's geometry (256 leaves, 128 spines, 32 OCSes, 2 ports each) and smaller:
    every leaf port and every spine port carries exactly one default circuit, and a leaf
    reaches ocs_count distinct spines."""
    leaves, spines, ocs_count, ports = shape
    wiring = default_wiring(leaves, spines, ocs_count, ports)
    assert len(wiring) == leaves * ocs_count == spines * ocs_count * ports
    assert len({(o, leaf) for o, leaf, _s, _p in wiring}) == len(wiring)
    assert len({(o, s, p) for o, _l, s, p in wiring}) == len(wiring)
    for leaf in range(leaves):
        assert len({s for _o, lf, s, _p in wiring if lf == leaf}) == ocs_count


@pytest.mark.parametrize("shape", [(4, 4, 4, 2), (16, 8, 8, 2), (16, 16, 8, 2), (8, 4, 2, 4)])
@pytest.mark.parametrize("spines_known", [False, True])
def test_default_circuit_leaves_inverts_default_circuit(shape, spines_known):
    leaves, spines, ocs_count, ports = shape
    given = spines if spines_known else 0
    for ocs, spine, port in itertools.product(range(ocs_count), range(spines), range(ports)):
        assert default_circuit_leaves(ocs, spine, port, leaves, ocs_count, ports, given) == [
            leaf for leaf in range(leaves)
            if topology_default_circuit(leaf, spine, ocs_count, ports, given) == (ocs, port)
        ]


def test_default_wiring_is_the_electrical_fabric_when_ocses_equal_spines():
    wiring = default_wiring(8, 4, 4)
    assert {(leaf, spine) for _o, leaf, spine, _p in wiring} == set(
        itertools.product(range(8), range(4)))
    assert len({(o, leaf) for o, leaf, _s, _p in wiring}) == len(wiring)  # a leaf port once
    assert len({(o, s, p) for o, _l, s, p in wiring}) == len(wiring)  # a spine port once
    assert (1, 1, 0, 0) in wiring  # leaf 1 meets spine 0 on OCS (1 + 0) % 4
