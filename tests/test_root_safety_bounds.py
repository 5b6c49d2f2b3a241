"""Medium 6 of issue 27: what a spec, a sweep file or a flag may ask of a root process is
bounded by named limits (testbed.core.limits), and every malformed input is one sentence, never
an OverflowError, a RecursionError or an alias bomb expanded into memory."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.core import limits
from testbed.core.errors import FabricLabError, SpecError
from testbed.core.experiment import load_experiments
from testbed.core.spec import load_yaml
from testbed.core.units import nccl_size_range, parse_size
from testbed.emulator import preflight
from testbed.sim.sweep_spec import load_sweep

FABRIC = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 4,
          "host_link_mbit_s": 20, "uplink_mbit_s": 20}


def experiment_file(tmp_path: Path, sizes: list, hosts: int = 2) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "fabric": FABRIC, "jobs": [
        {"name": "a", "hosts_wanted": hosts, "workload": {"kind": "allreduce",
                                                          "sizes": sizes}}]}))
    return path


@pytest.mark.parametrize("text", ["1000000GiB", "9" * 400 + "GiB", "9" * 400, "4.1GiB"])
def test_a_size_past_the_limit_is_one_sentence(text):
    with pytest.raises(FabricLabError, match=r"more than 4GiB.*MAX_SIZE_BYTES") as info:
        parse_size(text)
    assert len(str(info.value)) < 200
    with pytest.raises(FabricLabError, match="MAX_SIZE_BYTES"):
        nccl_size_range("1K", text.removesuffix("iB"), "2")


def test_the_limit_itself_is_a_size():
    assert parse_size("4GiB") == limits.MAX_SIZE_BYTES


@pytest.mark.parametrize("size", ["1000000GiB", 10**400, 2**33])
def test_a_spec_asking_past_the_size_limit_names_the_field(tmp_path, size):
    with pytest.raises(SpecError, match=r"jobs\.0\.workload\.sizes: .*MAX_SIZE_BYTES") as info:
        load_experiments(experiment_file(tmp_path, [size]))
    assert len(str(info.value)) < 300


def test_deeply_nested_yaml_is_one_sentence(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("name: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(SpecError, match=r"more than 64 deep \(MAX_YAML_DEPTH\)"):
        load_yaml(path)


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    lines = ["name: bomb", "base:", "  leaves: 2", "  z0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"  z{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    lines.append("grid: {seed: *a8}")  # 10^9 elements once expanded
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecError, match=r"more than 1,000,000 values .*MAX_YAML_NODES") as info:
        load_sweep(path)
    assert len(str(info.value)) < 200


def test_a_few_aliases_are_fine(tmp_path):
    shared = {"kind": "allreduce", "sizes": [1024]}  # PyYAML writes a shared object as an alias
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "fabric": FABRIC, "jobs": [
        {"name": "a", "hosts": ["h0", "h4"], "workload": shared},
        {"name": "b", "hosts": ["h1", "h5"], "workload": shared}]}))
    assert "*id" in path.read_text()
    (exp,) = load_experiments(path)
    assert exp.jobs[1].workload.sizes == [1024]


def test_a_self_containing_alias_is_one_sentence(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("a: &x [1, *x]\n")
    with pytest.raises(SpecError, match="MAX_YAML_NODES"):
        load_yaml(path)


def test_an_integer_of_thousands_of_digits_is_one_sentence(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text("name: " + "9" * 5000 + "\n")
    with pytest.raises(SpecError, match="cannot read"):
        load_yaml(path)


def test_an_oversized_spec_file_is_refused_unread(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_bytes(b"#" * (limits.MAX_SPEC_BYTES + 1))
    with pytest.raises(SpecError, match="MAX_SPEC_BYTES"):
        load_yaml(path)


def test_a_grid_past_the_point_limit_is_refused_before_it_expands(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({"base": {"leaves": 2, "spines": 2, "hosts_per_leaf": 2},
                                    "grid": {"seed": list(range(400)),
                                             "jobs": list(range(1, 1001))}}))
    with pytest.raises(SpecError, match=r"more than 10,000 runs \(MAX_GRID_POINTS\)"):
        load_sweep(path)


def test_a_long_bad_grid_value_is_shown_short(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({"grid": {"seed": ["x" * 5000]}}))
    with pytest.raises(SpecError) as info:
        load_sweep(path)
    assert len(str(info.value)) < 300


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--leaves", "100000", "--leaves is 100000; at most 4,096"),
    ("--jobs", "100000000", "--jobs is 100000000; at most 1,000,000"),
    ("--hosts-per-leaf", "1024", "MAX_CLUSTER_GPUS"),
])
def test_cluster_dimensions_past_their_limits_are_one_sentence(tmp_path, capsys, flag, value,
                                                               words):
    argv = ["simulate-cluster", "--leaves", "2048", "--spines", "2", "--hosts-per-leaf", "2",
            "--out", str(tmp_path / "o")]
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_buffers_that_would_not_fit_in_available_memory_are_refused(tmp_path, monkeypatch):
    (exp,) = load_experiments(experiment_file(tmp_path, ["1GiB"], hosts=8))
    need = limits.run_buffer_bytes(exp.jobs)
    assert need == 8 * limits.BUFFER_COPIES * 1024**3
    monkeypatch.setattr(preflight, "mem_available_bytes", lambda: 16 * 1024**3)
    assert "32.0 GiB of buffers" in preflight.memory_error(need, "experiment x")
    assert preflight.memory_error(8 * 1024**3, "experiment x") is None
