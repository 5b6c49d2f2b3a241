"""The exact wiring decision (:mod:`sdn_app.allocation.ocs_feasibility`), the auditor of the
``exact`` rewiring's refusals: on the paper's geometry scaled down it finds a wiring (checked
port by port) exactly where test_ocs_exact's exhaustive search finds one, proves none
elsewhere, and its MILP decides cases the counting bounds cannot."""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections import Counter

from test_ocs_exact import paper_like, wiring_exists

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import AllocationRefused, Circuit
from sdn_app.allocation.ocs_feasibility import check_wiring, decide


def random_state(rng: random.Random, gpus_per_server: int, trial: int) -> Cluster:
    c = paper_like(leaves=4, gpus_per_server=gpus_per_server)  # 4 leaves, 2 spines, 4 OCSes
    for i in range(rng.randrange(2, 7)):
        with contextlib.suppress(AllocationRefused):
            c.allocate(f"t{trial}j{i}", rng.choice([1, 2, 3, 4, 6, 8]), "ocs-vclos")
    return c


def test_decision_matches_the_exhaustive_search() -> None:
    """Every cross-leaf size on random states: 'wiring' exactly when an exhaustive search
    over the same shapes finds one, never 'unknown'; both answers also come from the MILP."""
    seen: Counter = Counter()
    for gpus_per_server in (1, 2):
        rng = random.Random(10 + gpus_per_server)
        for trial in range(30):
            c = random_state(rng, gpus_per_server, trial)
            most = max(c.free_count(leaf) for leaf in range(c.leaves))
            for k in range(most + 1, c.free_hosts() + 1):
                decision = decide(c, k)
                expected = "wiring" if wiring_exists(c, k) else "none"
                assert decision.answer == expected, (k, c.jobs, decision)
                seen.update((v.answer, v.how.startswith("MILP")) for v in decision.verdicts)
                if decision.answer == "wiring":
                    assert check_wiring(c, k, decision.verdicts[-1].wiring) == ""
    # Not vacuous: both answers occur, and the MILP gives each at least once.
    assert seen[("wiring", True)] and seen[("none", True)] and seen[("none", False)], seen


def test_check_wiring_rejects_a_port_taken_twice_or_busy() -> None:
    c = Cluster(4, 2, 4, 4, spine_ports_per_ocs=2, rewiring="exact")
    c.allocate("held", 8, "ocs-vclos")  # a direct pair on leaves 0, 1: their 4 ports busy
    decision = decide(c, 8)
    assert decision.answer == "wiring"
    wiring = decision.verdicts[-1].wiring
    assert check_wiring(c, 8, wiring) == ""
    first = wiring.circuits[0]
    twice = dataclasses.replace(wiring, circuits=(first, *wiring.circuits[1:-1], first))
    assert "taken twice" in check_wiring(c, 8, twice)
    busy = Circuit(first.ocs, ("leaf", 0), first.end_b)
    moved = dataclasses.replace(wiring, circuits=(busy, *wiring.circuits[1:]))
    assert check_wiring(c, 8, moved)
    assert "hosts" in check_wiring(c, 7, wiring)
