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
        ocs, port = default_circuit(cluster, leaf, spine)
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
    assert static and static <= allocator_defaults(plan)


@pytest.mark.parametrize("shape", [(4, 4, 4, 2), (16, 8, 8, 2), (16, 16, 8, 2), (8, 4, 2, 4)])
def test_default_circuit_leaves_inverts_default_circuit(shape):
    leaves, spines, ocs_count, ports = shape
    for ocs, spine, port in itertools.product(range(ocs_count), range(spines), range(ports)):
        assert default_circuit_leaves(ocs, spine, port, leaves, ocs_count, ports) == [
            leaf for leaf in range(leaves)
            if topology_default_circuit(leaf, spine, ocs_count, ports) == (ocs, port)
        ]


def test_default_wiring_is_the_electrical_fabric_when_ocses_equal_spines():
    wiring = default_wiring(8, 4, 4)
    assert {(leaf, spine) for _o, leaf, spine, _p in wiring} == set(
        itertools.product(range(8), range(4)))
    assert len({(o, leaf) for o, leaf, _s, _p in wiring}) == len(wiring)  # a leaf port once
    assert len({(o, s, p) for o, _l, s, p in wiring}) == len(wiring)  # a spine port once
    assert (1, 1, 0, 0) in wiring  # leaf 1 meets spine 0 on OCS (1 + 0) % 4
