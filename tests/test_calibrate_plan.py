"""Calibration planning and rate arithmetic (pure: no root, no fabric)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import sched_invariant
from sdn_app.static_routes import static_rules
from testbed.core.samples import LINK_SAMPLE_SCHEMA
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.calibrate import Calibration, LinkResult, candidate_flows, plan_rounds
from testbed.emulator.sampler import window_rates

FABRICS = [
    {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
     "host_link_mbit_s": 50, "uplink_mbit_s": 50},
    {"kind": "leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 4,
     "host_link_mbit_s": 20, "uplink_mbit_s": 30},
    {"kind": "ocs_leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 2,
     "host_link_mbit_s": 20, "uplink_mbit_s": 20, "ocs_count": 4},
    {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40}, {"size": 4, "mbit_s": 20,
                                                            "kind": "ring"}]},
    {"kind": "multidim", "dims": [{"size": 4, "mbit_s": 20}] * 3},
]


@pytest.mark.parametrize("fabric", FABRICS, ids=lambda f: f["kind"])
def test_rounds_cover_every_directed_link_without_sharing(fabric):
    plan = build_plan(parse_fabric({"fabric": fabric}))
    flows = candidate_flows(plan, static_rules(plan))
    budget = 400.0
    rounds = plan_rounds(flows, budget)
    covered = {h for r in rounds for f in r for h in f.hops}
    every = {(lk.a, lk.b) for lk in plan.links} | {(lk.b, lk.a) for lk in plan.links}
    assert covered == every
    for r in rounds:
        used = [h for f in r for h in f.hops]
        both = used + [(b, a) for a, b in used]
        assert len(set(both)) == len(both), "a link carries two flows in one round"
        hosts = [h for f in r for h in (f.src, f.dst)]
        assert len(set(hosts)) == len(hosts)
        assert len(r) == 1 or sum(f.cost for f in r) <= budget


def test_flow_rate_is_slowest_link_on_path():
    plan = build_plan(parse_fabric({"fabric": FABRICS[1]}))
    flows = {(f.src, f.dst): f for f in candidate_flows(plan, static_rules(plan))}
    assert flows[("h0", "h1")].mbit_s == 20 and len(flows[("h0", "h1")].hops) == 2
    assert flows[("h0", "h4")].mbit_s == 20 and len(flows[("h0", "h4")].hops) == 4
    assert flows[("h0", "h4")].cost == 80


def test_window_rates_from_cumulative_counters():
    rows = []
    for t in range(11):  # 0.0 .. 1.0 s at 10 Hz; a->b 1.25 MB/s = 10 Mbit/s, b->a idle
        rows.append((t / 10, "a:0-b:1", "a", "b", 10.0, 125_000 * t))
        rows.append((t / 10, "a:0-b:1", "b", "a", 10.0, 7))
    rates = window_rates(pd.DataFrame(rows, columns=LINK_SAMPLE_SCHEMA.names), 0.2, 0.8)
    got = rates.set_index(["src", "dst"])["achieved_mbit_s"]
    assert got[("a", "b")] == pytest.approx(10.0)
    assert got[("b", "a")] == 0


def test_verdict_names_bad_links_and_cpu():
    good = LinkResult("l", "h0", "leaf0", 50, 50, 48, 0.96, 0)
    bad = LinkResult("l", "leaf0", "h0", 50, 50, 40, 0.80, 0)
    cal = Calibration({}, "user", 1, 4.0, [good, bad], 0.15, 0.5, 0.95, 1.0)
    assert cal.verdict == "not faithful"
    assert any("leaf0->h0 at 0.80" in f for f in cal.failures)
    assert any("CPU idle fell to 15%" in f for f in cal.failures)
    assert cal.aggregate_ratio == pytest.approx(88 / 100)
    ok = Calibration({}, "user", 1, 4.0, [good], 0.5, 0.6, 0.95, 1.0)
    assert ok.verdict == "faithful" and not ok.failures


def test_a_round_whose_switch_waited_is_not_held():
    """Round 1 (100 link-Mbit/s) held its links, but ovs-vswitchd waited 30% of it: only
    round 0's load counts as faithful, and the failure names the round."""
    rounds = [LinkResult("l", "h0", "leaf0", 50, 50, 49, 0.98, 0),
              LinkResult("l", "h1", "leaf0", 50, 50, 49, 0.98, 1),
              LinkResult("l", "h2", "leaf0", 50, 50, 49, 0.98, 1)]
    cal = Calibration({}, "user", 2, 4.0, rounds, 0.5, 0.6, 0.95, 1.0,
                      switch_wait_share=[0.04, 0.3])
    assert cal.faithful_load_link_mbit_s == 50
    assert cal.failures == ["round 2: ovs-vswitchd waited for a CPU 30% of it (above 10%: the "
                            "switch, not the links, may have set the rates)"]
    quiet = Calibration({}, "user", 2, 4.0, rounds, 0.5, 0.6, 0.95, 1.0,
                        switch_wait_share=[0.04, None])
    assert quiet.faithful_load_link_mbit_s == 100 and quiet.verdict == "faithful"


def test_worst_share_is_the_thread_that_waited_most():
    t = np.arange(21) / 10  # 2 s at 10 Hz
    samples = pd.DataFrame({"time": np.concatenate([t, t]), "pid": 1, "tid": [1] * 21 + [2] * 21,
                            "wait_s": np.concatenate([t * 0.05, t * 0.2])})
    assert sched_invariant.worst_share(samples, [(0.5, 1.5)]) == pytest.approx(0.2)
    assert sched_invariant.worst_share(samples.iloc[:0], [(0.5, 1.5)]) is None
