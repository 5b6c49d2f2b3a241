"""The simulator's per-path bookkeeping done in bulk (issue 44): a route's link loads, an
aggregated step's merged fabric paths and a rail's collided flows, each against the
straightforward loop on random inputs, and a wrong variant of each caught."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

from sdn_app.policies.base import FABRIC_LINKS
from testbed.sim.flows import Network
from testbed.sim.job_plans import merged_paths
from testbed.sim.occupancy import link_loads
from testbed.sim.rail_collisions import RailCollisions

KINDS = ("hu", "hd", "ls", "sl", "cu", "cd", "cl")


def random_paths(rng: random.Random, count: int) -> list[list[tuple]]:
    """Paths of 0 to 3 links drawn from a few links, so that they share some."""
    links = [(rng.choice(KINDS), rng.randrange(4), rng.randrange(4)) for _ in range(12)]
    return [rng.sample(links, rng.randint(0, 3)) for _ in range(count)]


# link_loads

def loads_by_loop(paths: list[list[tuple]], weights: list[int] | None) -> dict:
    counts: Counter = Counter()
    for k, path in enumerate(paths):
        for link in path:
            counts[link] += 1 if weights is None else weights[k]
    return dict(counts)


def loads_once_per_path(paths: list[list[tuple]], weights: list[int] | None) -> dict:
    """Wrong on purpose: each path counted once on its links, its weight left out."""
    return dict(Counter(link for path in paths for link in path))


def test_link_loads_are_the_loops_in_the_same_order() -> None:
    rng = random.Random(1)
    for _ in range(300):
        paths = random_paths(rng, rng.randint(0, 30))
        weights = rng.choice([None, [rng.randint(1, 1000) for _ in paths]])
        got, want = link_loads(paths, weights), loads_by_loop(paths, weights)
        assert got == want and list(got) == list(want)
        assert all(type(v) is int for v in got.values())


def test_link_loads_catch_weights_left_out() -> None:
    rng = random.Random(1)
    wrong = 0
    for _ in range(100):
        paths = random_paths(rng, 20)
        weights = [rng.randint(2, 9) for _ in paths]
        wrong += loads_once_per_path(paths, weights) != loads_by_loop(paths, weights)
    assert wrong > 90


# merged_paths

def merged_by_loop(crossings: list[tuple], flows: list[int]) -> dict:
    merged: dict = {}
    for crossing, c in zip(crossings, flows, strict=True):
        if crossing:
            merged[crossing] = merged.get(crossing, 0) + c
    return merged


def test_merged_paths_are_the_loops() -> None:
    rng = random.Random(2)
    distinct = 0
    for _ in range(300):
        crossings = [tuple(p) for p in random_paths(rng, rng.randint(0, 12))]
        flows = [rng.randint(1, 50) for _ in crossings]
        got, want = merged_paths(crossings, flows), merged_by_loop(crossings, flows)
        assert got == want and list(got) == list(want)
        distinct += len(set(crossings)) == len(crossings) and () not in crossings
    assert distinct > 20  # the shortcut taken, and the loop too


def test_merged_paths_without_the_check_would_be_caught() -> None:
    rng = random.Random(2)
    wrong = 0
    for _ in range(100):
        crossings = [tuple(p) for p in random_paths(rng, 12)]
        flows = [rng.randint(1, 50) for _ in crossings]
        wrong += dict(zip(crossings, flows, strict=True)) != merged_by_loop(crossings, flows)
    assert wrong > 50


# RailCollisions

def collided_by_loop(rails: list, offsets: list[int], rail: int, links: set) -> set[int]:
    """The flows (positions over all rails) of rail ``rail`` crossing one of ``links``."""
    return {offsets[rail] + i for i, path in enumerate(rails[rail])
            for link in path if link in links and link[0] in FABRIC_LINKS}


def test_rail_collisions_mark_the_flows_crossing_a_shared_link() -> None:
    rng = random.Random(3)
    for _ in range(100):
        net = Network(default_capacity=1.0)
        rails = [random_paths(rng, rng.randint(1, 10)) for _ in range(3)]
        routes = [net.route(r, [rng.randint(1, 3) for _ in r]) for r in rails]
        collided: set[int] = set()
        notes = RailCollisions(rails, routes, collided)
        want: set[int] = set()
        for _ in range(4):
            rail = rng.randrange(3)
            idx = routes[rail].idx.tolist()
            shared = set(rng.sample(idx, rng.randint(0, len(idx))))
            notes.note(rail, shared)
            ids = net.occupancy.link_ids
            own = {int(i) for i in routes[rail].idx[routes[rail].mult > 1]}
            want |= collided_by_loop(rails, notes.offsets, rail, {ids[i] for i in shared | own})
            assert collided == want


class NoOffset(RailCollisions):
    """Wrong on purpose: a rail's flows numbered from 0, not from the rail's offset."""

    def _crossings(self, rail: int) -> tuple[np.ndarray, np.ndarray]:
        crossed, flow = super()._crossings(rail)
        return crossed, flow - self.offsets[rail]


def test_rail_collisions_catch_positions_without_the_rails_offset() -> None:
    rng = random.Random(3)
    wrong = 0
    for _ in range(50):
        net = Network(default_capacity=1.0)
        rails = [random_paths(rng, 8) for _ in range(2)]
        routes = [net.route(r) for r in rails]
        collided: set[int] = set()
        shared = set(routes[1].idx.tolist())
        NoOffset(rails, routes, collided).note(1, shared)
        ids = net.occupancy.link_ids
        offsets = [0, len(rails[0]), 16]
        wrong += collided != collided_by_loop(rails, offsets, 1, {ids[i] for i in shared})
    assert wrong > 40
