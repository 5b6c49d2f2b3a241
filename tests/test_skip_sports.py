"""skip_sports leaves a generator exactly where drawing the source ports one by one would, so a
policy that ignores them may skip the draws without changing any later draw (issue 44)."""

from __future__ import annotations

import random

import pytest

from sdn_app.allocation.ledger import Allocation
from testbed.core.ports import SPORTS
from testbed.sim.job_plans import job_plan, skip_sports


@pytest.mark.parametrize("count", [0, 1, 2, 3, 7, 64, 1000, 5000])
def test_skip_sports_leaves_the_generator_where_the_draws_would(count: int) -> None:
    for seed in range(50):
        drawn, skipped = random.Random(seed), random.Random(seed)
        for _ in range(count):
            drawn.randrange(*SPORTS)
        skip_sports(skipped, count)
        assert skipped.getstate() == drawn.getstate()


def test_a_port_blind_policy_plans_the_same_and_draws_the_same() -> None:
    """vClos's plan, and the generator after it, as when every flow drew its port."""
    hosts = tuple((leaf, slot) for leaf in range(4) for slot in range(4))
    alloc = Allocation("j", "vclos", hosts, (0, 1, 2, 3), spines=(0, 1, 2, 3),
                       spine_of={(leaf, slot): slot for leaf, slot in hosts})
    for collective in ("ring", "rail-ring", "halving-doubling", "all-pairs"):
        rng = random.Random(7)
        plan = job_plan(alloc, 1e6, 1e9, 4, rng, collective=collective)
        reference = random.Random(7)
        flows = sum(len(r) for j, r in enumerate(plan.rails) if plan.rail_weights(j) is None)
        for _ in range(flows):
            reference.randrange(*SPORTS)
        assert rng.getstate() == reference.getstate(), collective
