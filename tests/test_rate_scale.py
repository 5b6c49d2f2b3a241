"""Rate scaling: a spec states real rates and ``rate_scale``; the fabric is emulated at
real × rate_scale, and results carry real-rate figures beside the emulated ones."""

from __future__ import annotations

import pytest

from testbed.core.errors import SpecError
from testbed.core.experiment import expand
from testbed.core.scaling import (
    emulated_rate,
    real_key,
    real_rate,
    real_time_s,
    real_value,
    with_real,
)
from testbed.core.topology import FabricPlan, build_plan, load_plan

# 100 Gbit/s and 50 Gbit/s per dimension, emulated at 10 and 5 Mbit/s
REAL_DIMS = {"kind": "multidim", "dims": [{"size": 4, "mbit_s": 100_000},
                                          {"size": 2, "mbit_s": 50_000}]}
EXPERIMENT = {"name": "scaled", "fabric": REAL_DIMS, "rate_scale": 0.0001,
              "jobs": [{"name": "a", "hosts_wanted": 8, "algorithm": "themis",
                        "workload": {"kind": "allreduce", "sizes": ["1MiB"]}}]}


# ---------------------------------------------------------------- the arithmetic

def test_times_shrink_and_bandwidths_grow_by_the_scale():
    assert emulated_rate(100_000, 0.001) == 100.0  # not 100.00000000000001
    assert real_rate(0.08, 0.001) == 80.0
    assert real_time_s(80.0, 0.001) == 0.08
    assert real_rate(None, 0.5) is None and real_time_s(None, 0.5) is None
    assert real_rate(emulated_rate(123.4, 0.003), 0.003) == 123.4


def test_real_keys_put_real_before_the_unit():
    assert real_key("busbw_gbit_s") == "busbw_real_gbit_s"
    assert real_key("capacity_mbit_s") == "capacity_real_mbit_s"
    assert real_key("collective_s") == "collective_real_s"
    with pytest.raises(ValueError, match="no rate or time unit"):
        real_key("slowdown")
    assert real_value("busbw_gbit_s", 2, 0.01) == 200.0
    assert real_value("mean_s", 2, 0.01) == 0.02
    assert real_value("mean_s", None, 0.01) is None


def test_with_real_puts_each_real_figure_right_after_its_own():
    out = with_real({"mean_s": 4.0, "busbw_gbit_s": 0.1, "slowdown": 2.0},
                    ("mean_s", "busbw_gbit_s"), 0.5, none=("mean_s",))
    assert list(out) == ["mean_s", "mean_real_s", "busbw_gbit_s", "busbw_real_gbit_s",
                         "slowdown"]
    assert out["mean_real_s"] is None and out["busbw_real_gbit_s"] == 0.2


# ---------------------------------------------------------------- the spec

def test_a_scaled_spec_states_real_rates_and_variants_override_the_scale():
    spec = EXPERIMENT | {"variants": [{"name": "a"}, {"name": "b", "rate_scale": 0.001}]}
    a, b = expand(spec)
    assert a.rate_scale == 0.0001 and b.rate_scale == 0.001
    assert a.fabric.dims[0].mbit_s == 100_000  # the spec keeps the real rates


@pytest.mark.parametrize(("scale", "reason"), [
    (0, "rate_scale: Input should be greater than 0"),
    (1.5, "rate_scale: Input should be less than or equal to 1"),
    ("auto", "rate_scale: Input should be a valid number"),
    (True, "rate_scale: Input should be a valid number"),
])
def test_a_bad_scale_is_one_sentence_naming_the_field(scale, reason):
    with pytest.raises(SpecError) as exc:
        expand(EXPERIMENT | {"rate_scale": scale})
    msg = str(exc.value)
    assert reason in msg and "emulated rate ÷ the real rate" in msg
    assert "mbit_s" not in msg  # the rates are not judged against a scale that is invalid
    assert "\n" not in msg and "Traceback" not in msg


def test_the_machine_limit_applies_to_the_emulated_rate():
    with pytest.raises(SpecError) as exc:
        expand(EXPERIMENT | {"rate_scale": 0.1})
    msg = str(exc.value)
    assert ("fabric.dims.0.mbit_s: 100000 Mbit/s at rate_scale 0.1 is emulated at 10000 Mbit/s"
            in msg and "lower rate_scale" in msg)
    with pytest.raises(SpecError, match=r"fabric.dims.0.mbit_s: 100000 Mbit/s is more than this "
                       r"machine shapes faithfully .* set rate_scale"):
        expand({k: v for k, v in EXPERIMENT.items() if k != "rate_scale"})


# ---------------------------------------------------------------- the plan

def test_the_plan_carries_emulated_rates_and_records_the_scale():
    exp = expand(EXPERIMENT)[0]
    plan = build_plan(exp.fabric, exp.rate_scale)
    assert {lk.dim: lk.mbit_s for lk in plan.links} == {0: 10.0, 1: 5.0}
    assert [d.mbit_s for d in plan.spec.dims] == [10.0, 5.0]
    assert plan.rate_scale == 0.0001
    again = FabricPlan.from_json(plan.to_json())
    assert again == plan and again.rate_scale == 0.0001
    # the same emulation as the unscaled 10/5 Mbit/s fabric, apart from the recorded scale
    unscaled = build_plan(expand(EXPERIMENT | {"rate_scale": 1, "fabric": {
        "kind": "multidim", "dims": [{"size": 4, "mbit_s": 10}, {"size": 2, "mbit_s": 5}]}})[0]
        .fabric)
    assert unscaled.links == plan.links and unscaled.rate_scale == 1.0


def test_an_old_topology_without_a_scale_reads_as_unscaled():
    plan = build_plan(expand(EXPERIMENT)[0].fabric, 0.0001)
    old = plan.to_dict()
    del old["rate_scale"]
    assert FabricPlan.from_dict(old).rate_scale == 1.0


def test_fabric_files_and_experiments_give_their_scale_to_topo(tmp_path):
    import yaml

    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump({"fabric": REAL_DIMS, "rate_scale": 0.001}))
    plan = load_plan(path)
    assert plan.rate_scale == 0.001 and {lk.mbit_s for lk in plan.links} == {100.0, 50.0}
    path.write_text(yaml.safe_dump(EXPERIMENT))
    assert load_plan(path).rate_scale == 0.0001
