"""The OCS allocator's hand-written matchings give the answers of the ones they replaced
(issue 44): :func:`hopcroft_karp` networkx's ``hopcroft_karp_matching`` on the graph
``match_leaves_to_spine`` used to build, :func:`match_from_default_masks`
:func:`match_from_default`'s, on random instances."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from sdn_app.allocation.ocs import hopcroft_karp, match_from_default, match_from_default_masks


def networkx_matching(leaves: list[int], ports: list[tuple[int, int]],
                      edges: set[tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """The matching as ``match_leaves_to_spine`` computed it before (a networkx graph)."""
    graph = nx.Graph()
    graph.add_nodes_from(leaves)
    graph.add_edges_from((leaf, port) for port in ports for leaf in leaves
                         if (leaf, port) in edges)
    matching = nx.bipartite.hopcroft_karp_matching(graph, top_nodes=leaves)
    return {leaf: matching[leaf] for leaf in leaves if leaf in matching}


@pytest.mark.parametrize("seed", range(40))
def test_hopcroft_karp_returns_networkx_matching(seed: int) -> None:
    rng = random.Random(seed)
    leaves = rng.sample(range(256), rng.randint(1, 12))  # not sorted: a set's order matters
    ports = sorted(rng.sample([(o, p) for o in range(32) for p in range(2)],
                              rng.randint(1, 20)))
    density = rng.choice((0.05, 0.15, 0.4, 0.8))
    edges = {(leaf, port) for leaf in leaves for port in ports if rng.random() < density}
    adjacency = [[i for i, port in enumerate(ports) if (leaf, port) in edges]
                 for leaf in leaves]
    index = {leaf: i for i, leaf in enumerate(leaves)}
    found = hopcroft_karp([index[leaf] for leaf in set(leaves)], adjacency, len(ports))
    mine = {leaf: ports[found[i]] for i, leaf in enumerate(leaves) if found[i] >= 0}
    assert mine == networkx_matching(leaves, ports, edges)


@pytest.mark.parametrize("seed", range(200))
def test_mask_matching_equals_callable_matching(seed: int) -> None:
    rng = random.Random(seed)
    ocs_count, spine_count = rng.choice(((4, 8), (8, 16), (32, 128)))
    spines = sorted(rng.sample(range(spine_count), rng.randint(1, min(ocs_count, 12))))
    ocses = sorted(rng.sample(range(ocs_count), rng.randint(1, ocs_count)))
    density = rng.choice((0.1, 0.3, 0.6, 0.9))
    usable = [sum(1 << o for o in range(ocs_count) if rng.random() < density)
              for _ in range(spine_count)]
    defaults = {s: rng.choice((-1, *range(ocs_count))) for s in spines}
    want = match_from_default(spines, ocses, lambda s: defaults[s],
                              lambda o, s: bool(usable[s] >> o & 1))
    got = match_from_default_masks(spines, sum(1 << o for o in ocses),
                                   [defaults[s] for s in spines], usable)
    assert got == want
