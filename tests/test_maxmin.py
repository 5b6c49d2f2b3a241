"""Max-min filling: the numpy version gives the reference's rates on random instances, and a
network gives the same flow end times whichever filler it uses."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.sim.flows import Network
from testbed.sim.maxmin import (
    fill_rates_rounds,
    fill_rates_sparse,
    max_min_rates_reference,
)

# Few distinct values, so that caps and fair shares tie often; 0.1 and 0.3 do not add exactly.
CAPACITIES = st.sampled_from([0.1, 0.3, 1.0, 2.0, 3.0, 4.0, 10.0])
REL = 1e-9


class _Flow:
    def __init__(self, cap: float, links: dict[int, int]) -> None:
        self.cap = cap
        self.links = links


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[float], list[_Flow]]:
    """Links with capacities; flows over some of them (with multiplicities, as bundles) and
    a cap: their fair share of their own links, sometimes lowered by a private link."""
    n_links = draw(st.integers(1, 8))
    link_cap = [draw(st.one_of(CAPACITIES, st.floats(0.01, 100.0))) for _ in range(n_links)]
    flows = []
    for _ in range(draw(st.integers(1, 12))):
        chosen = draw(st.lists(st.integers(0, n_links - 1), max_size=n_links, unique=True))
        links = {link: draw(st.integers(1, 4)) for link in chosen}
        cap = min((link_cap[link] / k for link, k in links.items()), default=math.inf)
        private = draw(st.one_of(st.none(), CAPACITIES))
        if private is not None:
            cap = min(cap, private / draw(st.integers(1, 3)))
        if math.isinf(cap):
            cap = draw(CAPACITIES)
        flows.append(_Flow(cap, links))
    return link_cap, flows


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b))


def _fill(link_cap: list[float], flows: list[_Flow], fill=fill_rates_rounds) -> list[float]:
    pairs = [(i, link, k) for i, f in enumerate(flows) for link, k in f.links.items()]
    rates = fill(
        [f.cap for f in flows],
        [p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs],
        link_cap,
    )
    return rates.tolist()


@settings(max_examples=600, deadline=None)
@given(instances())
def test_numpy_filling_gives_the_reference_rates(instance) -> None:
    link_cap, flows = instance
    reference = max_min_rates_reference(flows, dict(enumerate(link_cap)))
    for fill in (fill_rates_rounds, fill_rates_sparse):
        fast = _fill(link_cap, flows, fill)
        assert all(_close(reference[f], r) for f, r in zip(flows, fast, strict=True)), (
            fill.__name__, [reference[f] for f in flows], fast)
        # Max-min feasibility: no link over capacity (to rounding), every flow within its cap.
        for link, cap in enumerate(link_cap):
            load = sum(f.links.get(link, 0) * r for f, r in zip(flows, fast, strict=True))
            assert load <= cap * (1 + 1e-9)
        assert all(r <= f.cap * (1 + 1e-12) for f, r in zip(flows, fast, strict=True))


def test_ties_and_a_link_left_with_no_headroom() -> None:
    # l0 (3.0) holds a and b (caps 1.0 and 2.0 from their private links) and c: the fair share
    # 1.0 ties a's cap; a, b and c freeze at 1.0 together and l0 is full. d on l1 gets the rest.
    flows = [_Flow(1.0, {0: 1}), _Flow(2.0, {0: 1}), _Flow(3.0, {0: 1, 1: 1}),
             _Flow(10.0, {1: 2})]
    link_cap = [3.0, 10.0]
    reference = max_min_rates_reference(flows, dict(enumerate(link_cap)))
    assert [reference[f] for f in flows] == [1.0, 1.0, 1.0, 4.5]
    assert _fill(link_cap, flows, fill_rates_sparse) == [1.0, 1.0, 1.0, 4.5]
    assert _fill(link_cap, flows, fill_rates_rounds) == [1.0, 1.0, 1.0, 4.5]


def test_a_link_with_room_for_its_flows_at_their_caps_is_left_out() -> None:
    # l1 (10.0) could carry a and b at their caps (2.0 + 3.0): it never binds. On l0 (4.0),
    # c freezes at its cap 1.0, then a and b share the 3.0 left: 1.5 each.
    flows = [_Flow(2.0, {0: 1, 1: 1}), _Flow(3.0, {0: 1, 1: 1}), _Flow(1.0, {0: 1})]
    link_cap = [4.0, 10.0]
    want = [1.5, 1.5, 1.0]
    reference = max_min_rates_reference(flows, dict(enumerate(link_cap)))
    assert [reference[f] for f in flows] == want
    for fill in (fill_rates_rounds, fill_rates_sparse):
        assert _fill(link_cap, flows, fill) == want, fill.__name__


@st.composite
def workloads(draw: st.DrawFn) -> tuple[dict[str, float], list[tuple[float, list, float]]]:
    """A few links and bundles over them, each with a start time and a size in bytes."""
    links = [f"l{i}" for i in range(draw(st.integers(1, 6)))]
    caps = {link: draw(CAPACITIES) for link in links}
    bundles = []
    for _ in range(draw(st.integers(1, 14))):
        paths = [draw(st.lists(st.sampled_from(links), min_size=1, max_size=3, unique=True))
                 for _ in range(draw(st.integers(1, 3)))]
        start = draw(st.sampled_from([0.0, 0.0, 1.0, 2.5]))
        bundles.append((start, paths, draw(st.sampled_from([0.0, 0.5, 1.0, 3.0, 7.25]))))
    return caps, bundles


def _ends(caps: dict[str, float], bundles: list, sharing: str) -> list[float]:
    net = Network(caps, sharing=sharing)
    flows = [net.add_bundle(paths, size, start=start, owner=n)
             for n, (start, paths, size) in enumerate(bundles)]
    net.run()
    return [f.end for f in flows]


@settings(max_examples=300, deadline=None)
@given(workloads())
def test_a_network_ends_flows_alike_with_either_filler(workload) -> None:
    caps, bundles = workload
    reference = _ends(caps, bundles, "reference")
    for sharing in ("numpy", "fast"):
        ends = _ends(caps, bundles, sharing)
        assert all(_close(a, b) for a, b in zip(reference, ends, strict=True)), (
            sharing, reference, ends)
