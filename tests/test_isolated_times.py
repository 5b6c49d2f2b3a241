"""The isolated reference's times depend on a placement's shape alone (hosts per leaf, leaf by
leaf), which is what lets :class:`IsolatedTimes` work them out once per shape."""

from __future__ import annotations

import random

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sdn_app.allocation.ledger import Allocation
from testbed.sim.job_plans import (
    IsolatedTimes,
    LinkDelays,
    job_plan,
    placement_shape,
    rails_time,
)

LEAVES, HOSTS_PER_LEAF, SPINES, LINK_BPS, GRAD = 12, 6, 4, 100e9, 3e8
DELAYS = LinkDelays(host_link_s=1e-6, uplink_s=3e-6)
COLLECTIVES = ("ring", "rail-ring", "halving-doubling", "direct", "ps")


def _placed(shape: list[int], rng: random.Random) -> Allocation:
    """An ECMP job with ``shape[i]`` hosts on its i-th leaf: leaves and slots drawn at random."""
    leaves = sorted(rng.sample(range(LEAVES), len(shape)))
    hosts = sorted((leaf, slot) for leaf, n in zip(leaves, shape, strict=True)
                   for slot in rng.sample(range(HOSTS_PER_LEAF), n))
    return Allocation("job", "ecmp", tuple(hosts), tuple(leaves))


def _times(alloc: Allocation, collective: str) -> tuple[float, float, float]:
    ideal = job_plan(alloc, GRAD, LINK_BPS, SPINES, None, ideal=True, collective=collective,
                     delays=DELAYS)
    return ideal.intra_s, ideal.latency_s, rails_time(ideal, LINK_BPS)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, HOSTS_PER_LEAF), min_size=1, max_size=5),
       st.sampled_from(COLLECTIVES), st.integers(0, 2**32))
def test_placements_of_one_shape_have_the_same_isolated_times(shape, collective, seed) -> None:
    n = sum(shape)
    assume(collective != "halving-doubling" or n & (n - 1) == 0)  # it needs 2^k ranks
    rng = random.Random(seed)
    first, second = _placed(shape, rng), _placed(shape, rng)
    assert placement_shape(first) == placement_shape(second) == tuple(shape)
    assert _times(first, collective) == _times(second, collective)
    known = IsolatedTimes()
    for alloc in (first, second):
        assert known(alloc, GRAD, LINK_BPS, SPINES, collective, DELAYS) == _times(
            alloc, collective)
