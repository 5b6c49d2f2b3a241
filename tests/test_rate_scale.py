"""Rate scaling: a spec states real rates and ``rate_scale``; the fabric is emulated at
real × rate_scale, and results carry real-rate figures beside the emulated ones."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from analysis_fixtures import LS_SIZE, build_leaf_spine_run
from rich.console import Console

from analysis.metrics import summarise
from analysis.report import write_report
from testbed.cli.run import summary_table
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
from testbed.core.summary_csv import tables
from testbed.core.topology import FabricPlan, build_plan, load_plan
from testbed.sim.backend import simulate_experiment

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
    assert real_rate(emulated_rate(123.4, 0.003), 0.003) == pytest.approx(123.4)
    assert real_rate(0.1 + 0.2, 1.0) == 0.1 + 0.2  # unscaled: exactly the emulated figure


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


# ---------------------------------------------------------------- results

def scaled_copy(run_dir: Path, dest: Path, scale: float) -> Path:
    """``run_dir`` as a run emulated at ``scale`` would have left it: the same emulated rates
    and traces, with the scale its plan records."""
    out = dest / f"{run_dir.name}-scaled"
    shutil.copytree(run_dir, out)
    topology = json.loads((out / "topology.json").read_text())
    (out / "topology.json").write_text(json.dumps(topology | {"rate_scale": scale}))
    return out


@pytest.fixture(scope="module")
def leaf_spine(tmp_path_factory) -> tuple[Path, Path]:
    """The analysis fixtures' leaf-spine run, and it as a run at rate_scale 0.001."""
    root = tmp_path_factory.mktemp("runs")
    run = build_leaf_spine_run(root)
    return run, scaled_copy(run, root, 0.001)


def test_summary_gives_real_figures_beside_emulated_ones(leaf_spine):
    plain, scaled = (summarise(r) for r in leaf_spine)
    assert plain["rate_scale"] == 1.0 and scaled["rate_scale"] == 0.001
    a = scaled["jobs"]["a"]
    assert a["mean_s"] == pytest.approx(0.4) and a["mean_real_s"] == pytest.approx(0.0004)
    assert a["busbw_gbit_s"] == plain["jobs"]["a"]["busbw_gbit_s"]
    assert a["busbw_real_gbit_s"] == pytest.approx(a["busbw_gbit_s"] * 1000)
    size = a["sizes"][str(LS_SIZE)]
    assert size["collective_real_s"] == pytest.approx(0.0004)
    assert size["algbw_real_gbit_s"] == pytest.approx(LS_SIZE * 8 / 0.4 / 1e9 * 1000)
    # a DNN iteration includes compute the scale does not stretch; its All-Reduces scale
    dnn = scaled["jobs"]["dnn"]
    assert dnn["mean_s"] == pytest.approx(0.5) and dnn["mean_real_s"] is None
    assert dnn["collective_real_s"] == pytest.approx(0.0002)
    # unscaled, the real figures are the emulated ones; ratios do not change with the scale
    assert plain["jobs"]["a"]["mean_real_s"] == plain["jobs"]["a"]["mean_s"]
    assert a["slowdown"] == plain["jobs"]["a"]["slowdown"]
    keys = list(a)
    assert keys.index("busbw_real_gbit_s") == keys.index("busbw_gbit_s") + 1


def test_csv_tables_carry_both_units(leaf_spine):
    t = tables(summarise(leaf_spine[1]))
    jobs = list(csv.DictReader(io.StringIO(t["jobs.csv"])))
    header = list(jobs[0])
    assert header.index("busbw_real_gbit_s") == header.index("busbw_gbit_s") + 1
    a = next(j for j in jobs if j["job"] == "a")
    assert float(a["collective_real_s"]) == pytest.approx(0.0004)
    sizes = list(csv.DictReader(io.StringIO(t["sizes.csv"])))
    assert {"collective_real_s", "algbw_real_gbit_s", "busbw_real_gbit_s"} <= set(sizes[0])


def test_the_simulator_runs_the_emulated_rates_and_its_real_figures_match_the_real_fabric(
        tmp_path):
    """1000 Mbit/s links at rate_scale 0.01 are simulated at 10 Mbit/s; the real-rate times
    are those of the same fabric simulated at 1000 Mbit/s."""
    fabric = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
              "host_link_mbit_s": 1000, "uplink_mbit_s": 1000}
    spec = {"name": "ls", "fabric": fabric, "policy": "ecmp",
            "jobs": [{"name": "a", "hosts": ["h0", "h2"],
                      "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 2}}]}
    (real,), (scaled,) = expand(spec), expand(spec | {"rate_scale": 0.01})
    real_dir = simulate_experiment(real, tmp_path / "real")
    s_real = summarise(real_dir)
    run_dir = simulate_experiment(scaled, tmp_path / "scaled")
    assert json.loads((run_dir / "topology.json").read_text())["rate_scale"] == 0.01
    s_scaled = summarise(run_dir)
    assert s_scaled["rate_scale"] == 0.01
    a, b = s_scaled["jobs"]["a"], s_real["jobs"]["a"]
    assert a["collective_s"] == pytest.approx(b["collective_s"] * 100)
    assert a["collective_real_s"] == pytest.approx(b["collective_s"])
    assert a["busbw_real_gbit_s"] == pytest.approx(b["busbw_gbit_s"])
    # what `fabriclab run` prints after the run: the real figures in columns of their own
    console = Console(record=True, width=200)
    console.print(summary_table(run_dir)[0])
    text = console.export_text()
    assert "rates scaled ×0.01" in text and "real busbw Gbit/s" in text
    assert "real" not in str(summary_table(real_dir)[0].columns[-3].header)


def test_the_report_states_the_factor_at_the_top_and_gives_both_units(leaf_spine, tmp_path):
    plain, scaled = leaf_spine
    html = write_report([scaled], tmp_path / "scaled").read_text()
    md = (tmp_path / "scaled" / "report.md").read_text()
    note = "Rates scaled ×0.001 (rate_scale): emulated 100 Mbit/s stands for 100 Gbit/s"
    assert note in md and note in html and 'class="banner scale"' in html
    assert md.index(note) < md.index("## Summary")
    # job a: 400 ms per All-Reduce at 40 Mbit/s busbw, emulated; 0.4 ms and 40 Gbit/s real
    row = next(line for line in md.splitlines() if line.startswith("| a |"))
    assert "400 ms (0.4 ms real)" in row and "40.0 Mbit/s (40.00 Gbit/s real)" in row
    dnn = next(line for line in md.splitlines() if line.startswith("| dnn |"))
    assert "| 500 ms |" in dnn  # an iteration with compute: no real figure
    assert "| 100 (100000 real) |" in md  # a link's configured rate
    write_report([plain], tmp_path / "plain")
    unscaled = (tmp_path / "plain" / "report.md").read_text()
    assert "real" not in unscaled and "Rates scaled" not in unscaled


def test_runs_at_different_scales_are_not_compared(leaf_spine, tmp_path):
    plain, scaled = leaf_spine
    vclos = build_leaf_spine_run(tmp_path, "vclos", policy="vclos", times=(0.2, 0.2),
                                 spines=(0, 1))
    write_report([plain, vclos], tmp_path / "same")
    assert "**Routing: vclos vs ecmp on " in (tmp_path / "same" / "report.md").read_text()
    write_report([scaled, vclos], tmp_path / "apart")
    assert "Routing:" not in (tmp_path / "apart" / "report.md").read_text()


def test_a_calibration_of_a_scaled_fabric_reports_both_units(tmp_path):
    from testbed.emulator.calibrate import Calibration, LinkResult

    cal = Calibration(fabric={}, datapath="userspace", rounds=1, round_s=4.0,
                      links=[LinkResult("l0", "h0", "leaf0", 100.0, 100.0, 97.0, 0.97, 0)],
                      cpu_idle_min=0.4, cpu_idle_mean=0.6, iperf_goodput_ratio=0.95,
                      bring_up_s=1.0, rate_scale=0.001)
    (tmp_path / "calibration.json").write_text(json.dumps(cal.to_dict()))
    md = (write_report([tmp_path], tmp_path / "rep").parent / "report.md").read_text()
    assert "emulated 100 Mbit/s stands for 100 Gbit/s" in md
    assert ("| h0→leaf0 | 100.0 (100000.0 real) | 100.0 (100000.0 real) | 97.0 (97000.0 real) "
            "| 97% |") in md
