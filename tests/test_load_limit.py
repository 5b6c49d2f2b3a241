"""The load a run offers at once, the largest load a calibration showed faithful, and the
warning between them (pure: no fabric)."""

from __future__ import annotations

from pathlib import Path

import yaml

from testbed.cli.calibrate import spec_warnings
from testbed.core.experiment import expand, load_experiments
from testbed.core.load_limit import load_warning, offered_load_link_mbit_s
from testbed.core.topology import build_plan
from testbed.emulator.calibrate import Calibration, LinkResult

DEMO = Path(__file__).resolve().parent.parent / "experiments" / "demo.yaml"


def plan_of(exp):
    return build_plan(exp.fabric, exp.rate_scale)


def test_the_demo_routing_runs_offer_eight_flows_over_four_links() -> None:
    ecmp = next(e for e in load_experiments(DEMO) if e.name == "demo-ecmp")
    assert offered_load_link_mbit_s(ecmp, plan_of(ecmp)) == 8 * 10 * 4


def test_same_leaf_flows_cross_two_links_and_unplaced_ones_are_counted_across() -> None:
    fabric = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
              "host_link_mbit_s": 50, "uplink_mbit_s": 50}
    (exp,) = expand({"name": "x", "fabric": fabric, "policy": "ecmp", "jobs": [
        {"name": "a", "hosts": ["h0", "h1"], "workload": {"kind": "allreduce", "sizes": [4]}},
        {"name": "b", "hosts_wanted": 2, "workload": {"kind": "allreduce", "sizes": [4]}},
        {"name": "c", "hosts": ["h2"], "workload": {"kind": "allreduce", "sizes": [4]}}]})
    assert offered_load_link_mbit_s(exp, plan_of(exp)) == 2 * 50 * 2 + 2 * 50 * 4


def test_warning_names_the_load_and_the_limit() -> None:
    assert load_warning("run x", 640, 800) is None
    assert load_warning("run x", 640, None) is None
    w = load_warning("run x", 960, 800)
    assert w is not None and "960 link-Mbit/s" in w and "800 link-Mbit/s" in w
    assert w.count(".") <= 1  # one sentence


def link(round_: int, ratio: float, mbit_s: float = 20.0) -> LinkResult:
    return LinkResult("l", "a", "b", mbit_s, mbit_s, ratio * mbit_s, ratio, round_)


def calibration(links: list[LinkResult], idle: float = 0.5) -> Calibration:
    return Calibration({}, "netdev", 2, 3.0, links, idle, idle, 1.0, 1.0)


def test_faithful_load_is_the_largest_round_that_held() -> None:
    cal = calibration([link(0, 1.0), link(0, 0.99), link(1, 1.0), link(1, 1.0), link(1, 1.0),
                       link(2, 1.0), link(2, 1.0), link(2, 1.0), link(2, 0.5)])
    assert cal.faithful_load_link_mbit_s == 60.0  # round 2 carried more, but fell short
    assert cal.to_dict()["faithful_load_link_mbit_s"] == 60.0
    assert calibration([link(0, 1.0)], idle=0.05).faithful_load_link_mbit_s is None
    assert calibration([link(0, 0.5)]).faithful_load_link_mbit_s is None


def test_calibrate_warns_for_each_run_of_the_spec_on_the_calibrated_fabric(tmp_path) -> None:
    data = yaml.safe_load(DEMO.read_text())
    spec = tmp_path / "demo.yaml"
    spec.write_text(yaml.safe_dump(data))
    ecmp = next(e for e in load_experiments(spec) if e.name == "demo-ecmp")
    warnings = spec_warnings(str(spec), plan_of(ecmp), 160.0)
    assert [w.split(" offers")[0] for w in warnings] == ["run demo-ecmp", "run demo-vclos"]
    assert spec_warnings(str(spec), plan_of(ecmp), 800.0) == []
    fabric_only = tmp_path / "fabric.yaml"
    fabric_only.write_text(yaml.safe_dump({"fabric": data["fabric"]}))
    assert spec_warnings(str(fabric_only), plan_of(ecmp), 1.0) == []
