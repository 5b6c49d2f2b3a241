"""Link invariants (analysis.invariants): a link whose queue covers an interval must send at
its configured rate through it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.invariants import loaded_periods, loaded_seconds, violations
from testbed.emulator.calibrate import TCP_WIRE_FACTOR
from testbed.emulator.fidelity import fidelity_record

CAP_MBIT_S = 20.0
BYTES_PER_S = CAP_MBIT_S * 1e6 / 8  # 2.5 MB/s: 50 kB per 20 ms interval
PERIOD_S = 0.02
FULL = 120_000  # a backlog that covers a 20 ms interval at 20 Mbit/s (50 kB)


def queue(rates_fraction: list[float], backlog: list[float]) -> pd.DataFrame:
    """Qdisc samples of one link direction sending the given fraction of its rate per
    interval, with the given backlog at each sample."""
    t = 100 + np.arange(len(backlog)) * PERIOD_S
    sent = np.concatenate([[0.0], np.cumsum(np.array(rates_fraction) * BYTES_PER_S * PERIOD_S)])
    return pd.DataFrame({"time": t, "link": "l", "src": "leaf0", "dst": "spine0",
                         "capacity_mbit_s": CAP_MBIT_S, "sent_bytes": sent.astype(int),
                         "backlog_bytes": backlog, "drops": 0})


def test_loaded_periods_are_maximal_runs_of_covered_intervals():
    t = np.arange(8) * 0.1
    b = [0, 2e5, 2e5, 0, 2e5, 2e5, 2e5, 0]  # 100 ms at 1 MB/s needs 100 kB
    assert loaded_periods(t, b, 1e6) == [(1, 3), (4, 7)]
    assert loaded_periods(t, [5e4] * 8, 1e6) == []  # never enough to last an interval


def test_a_loaded_link_at_its_rate_is_no_violation():
    s = queue([1.0] * 20, [FULL] * 21)
    assert violations(s).empty
    assert loaded_seconds(s) == pytest.approx(0.4)


def test_a_loaded_link_short_of_its_rate_is_a_located_violation():
    # idle, then a queue that covers every interval for 0.4 s while the link sends 60 %
    s = queue([0.0] * 5 + [0.6] * 20 + [0.0] * 5, [0] * 5 + [FULL] * 20 + [0] * 6)
    (v,) = violations(s).itertuples()
    assert (v.src, v.dst) == ("leaf0", "spine0")
    assert (v.start, v.end, v.span_s) == pytest.approx((100.1, 100.5, 0.4))
    assert v.ratio == pytest.approx(0.6) and v.achieved_mbit_s == pytest.approx(12.0)
    assert v.shortfall_bytes == pytest.approx(0.4 * 0.4 * BYTES_PER_S)


def test_a_queue_too_short_to_cover_an_interval_is_not_judged():
    # one 64 kB segment waiting drains in 26 ms at 20 Mbit/s: the link may idle after it
    s = queue([0.5] * 20, [40_000] * 21)
    assert violations(s).empty and loaded_seconds(s) == 0.0


def test_short_periods_and_small_shortfalls_are_not_violations():
    assert violations(queue([0.5] * 5, [FULL] * 6)).empty  # 0.1 s < 0.2 s
    assert violations(queue([0.92] * 20, [FULL] * 21)).empty  # within 10 %


def test_fidelity_record_judges_links_by_their_invariants_and_the_cpu_is_a_diagnosis():
    good = queue([1.0] * 20, [FULL] * 21)
    rec = fidelity_record(None, good, idle_min=0.05)
    assert rec["reasons"] == [] and rec["invariants"]["judged"]
    assert rec["invariants"]["loaded_s"] == pytest.approx(0.4)
    assert "every link still sent at its rate" in rec["notes"][0]

    short = queue([0.0] * 5 + [0.6] * 20, [0] * 5 + [FULL] * 21)
    rec = fidelity_record(None, short, idle_min=0.5)
    (reason,) = rec["reasons"]
    assert reason.startswith("leaf0->spine0 sent 60% of its 20 Mbit/s at 0.1 s while its "
                             "queue would have kept it busy") and rec["notes"] == []
    (v,) = rec["invariants"]["violations"]
    assert v["periods"] == 1 and v["seconds"] == pytest.approx(0.4)


def test_low_cpu_with_no_loaded_link_says_the_links_were_not_judged():
    rec = fidelity_record(None, queue([0.5] * 20, [0] * 21), idle_min=0.1)
    assert rec["reasons"] == [] and rec["invariants"]["loaded_s"] == 0.0
    assert "no link was ever loaded long enough to judge" in rec["notes"][0]


def test_without_qdisc_samples_low_cpu_still_makes_a_run_not_faithful():
    rec = fidelity_record(None, None, idle_min=0.05)
    assert not rec["invariants"]["judged"]
    assert rec["reasons"] and "no qdisc samples" in rec["reasons"][0]
    assert fidelity_record(None, None, idle_min=0.5)["reasons"] == []


def counters(cap_mbit_s: float, wire_ratio: float, extra_bytes: float = 0.0) -> pd.DataFrame:
    """2 s of 10 Hz byte counters of one link direction sending ``wire_ratio`` of its rate
    (wire-equivalent), plus ``extra_bytes`` in one interval (a TSO segment sent on credit)."""
    t = np.arange(21) * 0.1
    step = cap_mbit_s * 1e6 / 8 * 0.1 * wire_ratio / TCP_WIRE_FACTOR
    sent = np.cumsum([0.0] + [step] * 20)
    sent[10:] += extra_bytes
    return pd.DataFrame({"time": t, "link": "l", "src": "s", "dst": "h",
                         "capacity_mbit_s": cap_mbit_s, "bytes": sent})


@pytest.mark.parametrize(("cap", "ratio", "extra", "over"), [
    (4.0, 1.0, 65536, False),  # one TSO segment ahead at 4 Mbit/s: 13 % of a second, allowed
    (4.0, 1.3, 0, True),
    (1000.0, 1.0, 65536, False),
    (1000.0, 1.15, 0, True),
])
def test_overruns_allow_a_segment_of_counter_granularity(cap, ratio, extra, over):
    reasons = fidelity_record(counters(cap, ratio, extra), None, None)["reasons"]
    assert bool(reasons) == over, reasons
