"""Where a switch-load step's CPU went (:mod:`testbed.emulator.switch_load`), between two
made-up snapshots: cores per category, softirq and idle from the machine's times, the rest
what no category accounts for."""

from __future__ import annotations

from collections import namedtuple

import pytest

from testbed.emulator.switch_load import CATEGORIES, cpu_breakdown

Times = namedtuple("Times", "user system idle softirq")


def test_cores_per_category_over_the_window() -> None:
    a = (10.0, {"ovs main": 1.0, "iperf3": 2.0}, Times(100.0, 50.0, 300.0, 5.0))
    b = (12.0, {"ovs main": 2.6, "ovs other": 0.2, "iperf3": 2.4, "samplers": 0.1},
         Times(102.0, 51.0, 300.6, 5.4))
    cores = cpu_breakdown(a, b)
    assert set(cores) == set(CATEGORIES)
    assert cores["ovs main"] == pytest.approx(0.8) and cores["ovs other"] == pytest.approx(0.1)
    assert cores["iperf3"] == pytest.approx(0.2) and cores["samplers"] == pytest.approx(0.05)
    assert cores["softirq"] == pytest.approx(0.2) and cores["idle"] == pytest.approx(0.3)
    # 2 s of 4 machine-seconds busy: 2.0 cores total, 1.7 busy, 1.35 in the categories
    assert cores["rest"] == pytest.approx(2.0 - 0.3 - 1.35)
