"""Occupancy's components: the labels computed over an incidence's arrays are each flow's
smallest connected member, as a plain search over the shared links finds them."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.sim.occupancy import Incidence


def _searched(n_flows: int, pairs: list[tuple[int, int]]) -> list[int]:
    """Each flow's smallest connected member, by search (flows joined through links)."""
    links_of: dict[int, set[int]] = {f: set() for f in range(n_flows)}
    flows_on: dict[int, set[int]] = {}
    for flow, link in pairs:
        links_of[flow].add(link)
        flows_on.setdefault(link, set()).add(flow)
    label: dict[int, int] = {}
    for seed in range(n_flows):
        if seed in label:
            continue
        todo = [seed]
        label[seed] = seed
        while todo:
            for link in links_of[todo.pop()]:
                for other in flows_on[link]:
                    if other not in label:
                        label[other] = seed
                        todo.append(other)
    return [label[f] for f in range(n_flows)]


@st.composite
def incidences(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    """Flows (some with no links) over a few links: distinct (flow, link) pairs by flow."""
    n_flows = draw(st.integers(1, 14))
    n_links = draw(st.integers(1, 10))
    pairs = draw(st.lists(st.tuples(st.integers(0, n_flows - 1), st.integers(0, n_links - 1)),
                          unique=True, max_size=30))
    return n_flows, sorted(pairs)


@settings(max_examples=400, deadline=None)
@given(incidences())
def test_labels_are_each_flows_smallest_connected_member(instance) -> None:
    n_flows, pairs = instance
    used = sorted({link for _, link in pairs})
    local = {link: i for i, link in enumerate(used)}  # every local link has an entry
    incidence = Incidence(np.array([f for f, _ in pairs], dtype=np.intp),
                          np.array([local[link] for _, link in pairs], dtype=np.intp),
                          np.ones(len(pairs)), np.ones(len(used)))
    assert incidence.labels(n_flows).tolist() == _searched(n_flows, pairs)
