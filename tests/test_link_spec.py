"""Delay, jitter and loss as fabric data: the spec's fields, the per-link overrides, the plan's
links in both units, rate scaling, and the emulator's limits (pure, no root)."""

from __future__ import annotations

import pytest

from testbed.core.errors import SpecError
from testbed.core.experiment import expand
from testbed.core.limits import (
    MAX_EMULATED_DELAY_US,
    MIN_FALLBACK_DELAY_US,
    emulated_links_error,
)
from testbed.core.scaling import emulated_delay_us, real_delay_us
from testbed.core.spec import FabricFile, parse_fabric, validate
from testbed.core.topology import FabricPlan, build_plan, impairment_record

LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
              "host_link_mbit_s": 100, "uplink_mbit_s": 100}


def _plan(fabric: dict, rate_scale: float = 1.0) -> FabricPlan:
    f = validate(FabricFile, {"fabric": fabric, "rate_scale": rate_scale}, shaped=False)
    return build_plan(f.fabric, f.rate_scale)


def _error(fabric: dict) -> str:
    with pytest.raises(SpecError) as exc:
        parse_fabric({"fabric": fabric})
    return str(exc.value)


def test_a_fabric_without_delays_has_perfect_wires() -> None:
    plan = _plan(LEAF_SPINE)
    assert not any(lk.impaired for lk in plan.links)
    assert {(lk.delay_us, lk.jitter_us, lk.loss) for lk in plan.links} == {(0, 0, 0)}
    assert impairment_record(plan) == {}


def test_each_leaf_spine_link_class_carries_its_values() -> None:
    plan = _plan({**LEAF_SPINE, "host_link_delay_us": 5000, "host_link_jitter_us": 100,
                  "host_link_loss": 0.01, "uplink_delay_us": 2000, "uplink_loss": 0.02})
    for lk in plan.links:
        want = ((5000, 100, 0.01) if lk.kind == "host" else (2000, 0, 0.02))
        assert (lk.delay_us, lk.jitter_us, lk.loss) == want
        assert (lk.delay_real_us, lk.jitter_real_us) == want[:2]  # unscaled: the same


def test_an_ocs_fabric_s_uplinks_are_every_link_above_the_leaves() -> None:
    plan = _plan({**LEAF_SPINE, "kind": "ocs_leaf_spine", "ocs_count": 2,
                  "uplink_delay_us": 3000})
    kinds = {lk.kind: lk.delay_us for lk in plan.links}
    assert kinds == {"host": 0, "ocs-leaf": 3000, "ocs-spine": 3000}


def test_each_dimension_carries_its_own_values() -> None:
    plan = _plan({"kind": "multidim", "dims": [
        {"size": 4, "mbit_s": 100, "kind": "ring", "delay_us": 1000, "jitter_us": 10},
        {"size": 2, "mbit_s": 50, "loss": 0.05},
        {"size": 3, "mbit_s": 50, "kind": "fully_connected", "delay_us": 7}]})
    by_dim = {lk.dim: (lk.delay_us, lk.jitter_us, lk.loss) for lk in plan.links}
    assert by_dim == {0: (1000, 10, 0), 1: (0, 0, 0.05), 2: (7, 0, 0)}
    assert set(impairment_record(plan)) == {"dim0", "dim1", "dim2"}


def test_an_override_changes_only_its_link_and_only_the_fields_it_gives() -> None:
    plan = _plan({**LEAF_SPINE, "host_link_delay_us": 100, "host_link_loss": 0.001,
                  "links": [{"between": ["leaf0", "h0"], "delay_us": 5000},
                            {"between": ["leaf1", "spine0"], "loss": 0.1}]})
    h0 = plan.link_between("h0", "leaf0")[0]
    assert (h0.delay_us, h0.loss) == (5000, 0.001)
    assert plan.link_between("h1", "leaf0")[0].delay_us == 100
    assert plan.link_between("leaf1", "spine0")[0].loss == 0.1
    assert plan.link_between("leaf0", "spine0")[0].loss == 0
    record = impairment_record(plan)
    assert record["host"]["delay_us"] == 100 and record[h0.name]["delay_us"] == 5000
    assert set(record) == {"host", "uplink", h0.name, plan.link_between("leaf1", "spine0")[0].name}


@pytest.mark.parametrize(("links", "says"), [
    ([{"between": ["h0", "leaf1"]}], "links.0.between: no link of this fabric joins h0 and leaf1"),
    ([{"between": ["h9", "leaf0"]}], "links.0.between: h9 is not a node of this fabric"),
    ([{"between": ["h0", "h0"]}], "fabric.links.0: between names h0 twice"),
    ([{"between": ["h0"]}], "fabric.links.0.between: List should have at least 2 items"),
    ([{"between": ["h0", "leaf0"], "loss": 1}], "fabric.links.0.loss: Input should be less than 1"),
    ([{"between": ["h0", "leaf0"], "delay_us": -1}], "fabric.links.0.delay_us: Input should be "
     "greater than or equal to 0"),
    ([{"between": ["h0", "leaf0"]}, {"between": ["leaf0", "h0"], "loss": 0.1}],
     "links.1.between: leaf0-h0 is already given by links.0"),
    ([{"between": ["h0", "leaf0"], "delay": 5}], "fabric.links.0.delay: unknown key; did you "
     "mean delay_us?"),
])
def test_a_bad_override_is_one_sentence_naming_its_field(links: list, says: str) -> None:
    message = _error({**LEAF_SPINE, "links": links})
    assert says in message and "\n" not in message


@pytest.mark.parametrize(("field", "value", "says"), [
    ("host_link_loss", 1.0, "fabric.host_link_loss: Input should be less than 1"),
    ("uplink_delay_us", -5, "fabric.uplink_delay_us: Input should be greater than or equal to 0"),
    ("host_link_jitter_us", float("nan"), "fabric.host_link_jitter_us: Input should be a finite "
     "number"),
    ("uplink_jitter", 1, "fabric.uplink_jitter: unknown key; did you mean uplink_jitter_us?"),
])
def test_a_bad_class_value_names_its_field(field: str, value: float, says: str) -> None:
    assert says in _error({**LEAF_SPINE, field: value})


def test_a_dimension_s_bad_loss_names_the_dimension() -> None:
    assert "fabric.dims.1.loss: Input should be less than 1" in _error(
        {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 10}, {"size": 2, "mbit_s": 10,
                                                                  "loss": 2}]})


def test_an_override_between_two_peers_of_a_dimension() -> None:
    plan = _plan({"kind": "multidim", "dims": [{"size": 4, "mbit_s": 10, "kind": "ring"}],
                  "links": [{"between": ["h1", "h2"], "delay_us": 3000}]})
    assert [lk.delay_us for lk in plan.links] == [0, 3000, 0, 0]
    assert "no link of this fabric joins h0 and h2" in _error(
        {"kind": "multidim", "dims": [{"size": 4, "mbit_s": 10, "kind": "ring"}],
         "links": [{"between": ["h0", "h2"]}]})


def test_rate_scale_emulates_a_delay_at_delay_over_the_scale() -> None:
    assert emulated_delay_us(2, 0.0001) == 20_000
    assert real_delay_us(20_000, 0.0001) == 2
    plan = _plan({**LEAF_SPINE, "host_link_mbit_s": 100_000, "uplink_mbit_s": 100_000,
                  "host_link_delay_us": 2, "host_link_jitter_us": 0.5, "host_link_loss": 0.01,
                  "links": [{"between": ["h3", "leaf1"], "delay_us": 4}]}, rate_scale=0.0001)
    h0, h3 = plan.link_between("h0", "leaf0")[0], plan.link_between("h3", "leaf1")[0]
    assert (h0.mbit_s, h0.delay_us, h0.jitter_us, h0.loss) == (10, 20_000, 5_000, 0.01)
    assert (h0.delay_real_us, h0.jitter_real_us) == (2, 0.5)
    assert (h3.delay_us, h3.delay_real_us) == (40_000, 4)
    assert impairment_record(plan)["host"] == {
        "delay_us": 20_000, "delay_real_us": 2, "jitter_us": 5_000, "jitter_real_us": 0.5,
        "loss": 0.01}


def test_topology_json_carries_both_units_and_round_trips() -> None:
    plan = _plan({**LEAF_SPINE, "uplink_delay_us": 1, "links": [
        {"between": ["h0", "leaf0"], "loss": 0.2}]}, rate_scale=0.001)
    link = next(lk for lk in plan.to_dict()["links"] if lk["kind"] == "uplink")
    assert (link["delay_us"], link["delay_real_us"], link["loss"]) == (1000, 1, 0)
    again = FabricPlan.from_json(plan.to_json())
    assert again.links == plan.links and again.spec == plan.spec


def test_an_experiment_states_its_links_in_yaml_terms() -> None:
    (exp,) = expand({"name": "lat", "fabric": {**LEAF_SPINE, "host_link_delay_us": 5000},
                     "jobs": [{"name": "a", "hosts": ["h0", "h1"],
                               "workload": {"kind": "allreduce", "sizes": [4096]}}]})
    assert exp.fabric.host_link_delay_us == 5000 and exp.fabric.uplink_loss == 0


def test_the_emulator_s_limits_name_the_link_and_the_limit() -> None:
    assert emulated_links_error(_plan({**LEAF_SPINE, "host_link_delay_us": 5000})) is None
    # 200 µs real at rate_scale 0.0001: 2 s emulated, past what a delay line holds
    far = emulated_links_error(_plan({**LEAF_SPINE, "uplink_delay_us": 200},
                                     rate_scale=0.0001))
    assert far is not None and far.startswith("link leaf0-spine0 would be emulated with 2e+06 µs")
    assert "MAX_EMULATED_DELAY_US" in far and "rate_scale 0.0001" in far
    # 100 µs unscaled: below what the userspace fallback holds, fine where netem runs
    near = _plan({**LEAF_SPINE, "links": [{"between": ["h2", "leaf1"], "delay_us": 100}]})
    says = emulated_links_error(near)
    assert says is not None and says.startswith("link h2-leaf1 would be emulated with 100 µs delay")
    assert "MIN_FALLBACK_DELAY_US" in says
    assert emulated_links_error(near, min_delay_us=0) is None
    jitter = emulated_links_error(_plan({**LEAF_SPINE, "host_link_delay_us": 5000,
                                         "host_link_jitter_us": 10}))
    assert jitter is not None and "10 µs jitter" in jitter
    assert MIN_FALLBACK_DELAY_US < MAX_EMULATED_DELAY_US


def test_a_simulated_fabric_may_hold_any_delay() -> None:
    """The limits are the emulator's: a spec validates whatever its delays (the sim backend
    never calls emulated_links_error)."""
    plan = _plan({**LEAF_SPINE, "uplink_delay_us": 10 * MAX_EMULATED_DELAY_US})
    assert plan.links[-1].delay_us == 10 * MAX_EMULATED_DELAY_US
