"""Sweep files without Dask: the grid's expansion, its keys, its checks, the seed CIs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.sweep import MEASURED, results_frame, seed_intervals, simulated_results, t95
from testbed.cli import build_parser, main
from testbed.core.errors import SpecError
from testbed.sim.cluster_run import DEFAULTS
from testbed.sim.sweep_spec import (
    ClusterParams,
    SweepSpec,
    expand,
    expand_all,
    load_sweep,
    varying,
)

ROOT = Path(__file__).parent.parent
TINY = {"leaves": 2, "spines": 2, "hosts_per_leaf": 2, "jobs": 20}


def spec(**data: object) -> SweepSpec:
    return SweepSpec.model_validate(data)


def test_defaults_and_names_are_simulate_clusters() -> None:
    args = build_parser("simulate-cluster").parse_args(["simulate-cluster", "--out", "x"])
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "func", "out", "force",
                                                               "label")}
    assert flags == DEFAULTS
    assert ClusterParams().model_dump() == DEFAULTS


def test_grid_is_the_cartesian_product_in_order() -> None:
    points = expand(spec(base=TINY, grid={"policy": ["ecmp", "vclos"], "seed": [1, 2, 3]}))
    assert [(p.params["policy"], p.params["seed"]) for p in points] == [
        ("ecmp", 1), ("ecmp", 2), ("ecmp", 3), ("vclos", 1), ("vclos", 2), ("vclos", 3)]
    assert all(p.params["leaves"] == 2 and p.params["load"] == 0.8 for p in points)
    assert points[0].label == "policy=ecmp seed=1"
    assert len({p.key for p in points}) == 6


def test_keys_are_stable_and_depend_on_every_parameter() -> None:
    a = expand(spec(base=TINY, grid={"seed": [1, 2]}))
    b = expand(spec(base={**TINY, "seed": 2}))
    # The same run, whether its seed came from the grid or the base, and from run to run.
    assert a[1].key == b[0].key == expand(spec(base={**TINY, "seed": 2}))[0].key
    assert a[0].key != a[1].key
    assert expand(spec(base={**TINY, "load": 0.9, "seed": 2}))[0].key != b[0].key


def test_no_grid_is_one_run_of_the_base() -> None:
    (point,) = expand(spec(base=TINY))
    assert point.params == {**DEFAULTS, **TINY} and point.label == "base"


def test_relative_trace_files_are_found_next_to_the_sweep_file(tmp_path: Path) -> None:
    (point,) = expand(spec(base={"trace": "helios:log.csv"}), tmp_path)
    assert point.params["trace"] == f"helios:{tmp_path.as_posix()}/log.csv"


@pytest.mark.parametrize(("data", "message"), [
    ({"base": {"leafs": 2}}, "base.leafs: unknown parameter; use one of leaves,"),
    ({"grid": {"nodes": [1]}}, "grid.nodes: unknown parameter"),
    ({"base": {"jobs": 0}}, "base.jobs: 0: Input should be greater than or equal to 1"),
    ({"base": {"jobs": 2.5}}, "base.jobs: 2.5: Input should be a valid integer"),
    ({"base": {"load": "high"}}, "base.load: 'high': Input should be a valid number"),
    ({"grid": {"seed": [1, -1]}}, "grid.seed[1]: -1: Input should be greater than or equal"),
    ({"grid": {"seed": [1, 1]}}, "grid.seed[1]: 1 is already in the list"),
    ({"grid": {"seed": []}}, "grid.seed: empty list"),
    ({"grid": {"policy": ["nope"]}}, "grid.policy[0]: 'nope': --policy 'nope' is not a"),
    ({"grid": {"placement": ["best"]}}, "grid.placement[0]: 'best': 'best' is unknown"),
    ({"base": {"trace": "alibaba:x"}}, "base.trace: 'alibaba:x': 'alibaba:x' is unknown"),
    ({"base": {"seed": 1}, "grid": {"seed": [2]}}, "grid.seed: also set in base"),
    ({"base": {"policy": "ocs-vclos", "ocs_count": 0}},
     "the run base: --policy ocs-vclos needs --ocs-count of at least 1"),
])
def test_a_bad_value_is_one_sentence_naming_its_field(data: dict, message: str) -> None:
    with pytest.raises(SpecError) as err:
        expand(spec(**data))
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("text", "message"), [
    ("base: {leaves: 2}\nruns: 3\n", "runs: unknown key; use name, base, grid"),
    ("grid: {seed: 3}\n", "grid.seed: Input should be a valid list"),
    ("- 1\n", "expected a mapping with base and grid"),
    ("name: 'a b'\n", "name: String should match pattern"),
])
def test_a_bad_sweep_file_is_one_sentence(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match="^" + str(path)) as err:
        load_sweep(path)
    assert message in str(err.value)


def test_the_cli_refuses_a_bad_sweep_before_starting_dask(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("grid: {leaves: [0]}\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "grid.leaves[0]: 0: Input should be greater than or equal to 1" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_the_example_sweeps_expand() -> None:
    sweep, points = load_sweep(ROOT / "experiments" / "sweeps" / "ocs-vs-vclos.yaml")
    assert sweep.name == "ocs-vs-vclos" and len(points) == 9
    sweep, points = load_sweep(ROOT / "experiments" / "sweeps" / "policies-8k.yaml")
    assert len(points) == 12 and {p.params["leaves"] * p.params["hosts_per_leaf"]
                                  for p in points} == {8192}


def test_seed_intervals_use_students_t() -> None:
    runs = [(f"k{i}", {"policy": pol, "seed": s}, {"avg_jct_s": v})
            for i, (pol, s, v) in enumerate([("a", 1, 1.0), ("a", 2, 2.0), ("a", 3, 3.0),
                                              ("b", 1, 5.0)])]
    df = results_frame(runs)
    assert list(df.columns) == ["point", "policy", "seed", "avg_jct_s"]
    table = seed_intervals(df, ["policy"], ["avg_jct_s"]).set_index("policy")
    assert table.loc["a", "seeds"] == 3 and table.loc["a", "avg_jct_s_mean"] == 2.0
    assert table.loc["a", "avg_jct_s_ci95"] == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert math.isnan(table.loc["b", "avg_jct_s_ci95"])
    assert t95(1000) == pytest.approx(1.962, abs=1e-3) and t95(31) < t95(30)
    whole = seed_intervals(pd.DataFrame({"seed": [1, 2], "avg_jct_s": [1.0, 3.0]}), [],
                           ["avg_jct_s"])
    assert whole["avg_jct_s_mean"].iloc[0] == 2.0


def test_several_specs_are_one_list_with_shared_runs_once() -> None:
    small = spec(base=TINY, grid={"policy": ["ecmp", "vclos"], "seed": [1, 2]})
    wide = spec(base={**TINY, "spines": 4, "policy": "vclos"}, grid={"seed": [1, 2]})
    again = spec(base={**TINY, "policy": "vclos"}, grid={"seed": [2]})  # already in small
    points = expand_all([small, wide, again])
    assert [(p.params["policy"], p.params["spines"], p.params["seed"]) for p in points] == [
        ("ecmp", 2, 1), ("ecmp", 2, 2), ("vclos", 2, 1), ("vclos", 2, 2),
        ("vclos", 4, 1), ("vclos", 4, 2)]
    assert varying(points) == ["spines", "policy"]  # in parameter order; never seed
    assert varying(points[:1]) == [] and varying([]) == []


def test_simulated_results_drop_what_the_machine_measured() -> None:
    def frame(order: list[int], wall: float) -> pd.DataFrame:
        return results_frame([(f"k{i}", {"seed": i}, {"avg_jct_s": 10.0 * i, "wall_s": wall,
                                                      "rss_start_bytes": 1, "peak_rss_bytes": 2})
                              for i in order])

    one, two = simulated_results(frame([1, 2], 0.5)), simulated_results(frame([2, 1], 9.0))
    pd.testing.assert_frame_equal(one, two)
    assert not set(MEASURED) & set(one.columns) and list(one["point"]) == ["k1", "k2"]


def test_a_mistyped_parameter_gets_the_closest_name() -> None:
    with pytest.raises(SpecError) as err:
        expand(spec(base={"leafs": 4}))
    assert str(err.value).endswith("(did you mean leaves?)"), str(err.value)
