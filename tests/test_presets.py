"""The Themis paper's six systems as presets (no root): their data, the model and `fabriclab
model/plan --preset`, and `preset:` in experiment files scaled down for the emulator."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.core.errors import SpecError
from testbed.core.experiment import expand
from testbed.core.jobs import check_against_fabric
from testbed.core.presets import PAPER_FIGURES, PRESETS, emulation_scale, scaled_sizes
from testbed.core.spec import load_fabric_file
from testbed.core.topology import build_plan
from workloads.model import predict

TABLE = {  # the paper's table: shape, GB/s per NPU per dimension
    "2d-switch": ((16, 64), (150, 100)),
    "3d-switch-homo": ((16, 8, 8), (100, 100, 100)),
    "3d-switch-hetero": ((16, 8, 8), (200, 100, 50)),
    "3d-fc-ring-switch": ((8, 16, 8), (175, 100, 50)),
    "4d-ring-switch-switch-switch": ((4, 4, 8, 8), (250, 200, 100, 50)),
    "4d-ring-fc-ring-switch": ((4, 8, 4, 8), (375, 175, 150, 100)),
}


def test_the_six_systems_as_the_paper_gives_them() -> None:
    assert set(PRESETS) == set(TABLE)
    for name, (shape, gbyte_s) in TABLE.items():
        p = PRESETS[name]
        assert p.sizes == shape and tuple(d.gbyte_s for d in p.dims) == gbyte_s
        assert p.chunks == 64
        assert all(a == "halving-doubling" for a, k in zip(p.dim_algorithms, p.kinds,
                                                           strict=True) if k == "switch")
    assert PRESETS["4d-ring-fc-ring-switch"].kinds == ("ring", "fully_connected", "ring",
                                                       "switch")
    assert {f.key: f.value for f in PAPER_FIGURES} == {
        "mean_gain_scf": 1.72, "max_gain_scf": 2.70, "mean_util_baseline": 56.31,
        "mean_util_themis_fifo": 87.67, "mean_util_themis_scf": 95.14}


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_preset_scales_down_to_a_valid_emulated_experiment(name: str) -> None:
    fabric, scale = PRESETS[name].emulated()
    assert math.prod(d["size"] for d in fabric["dims"]) <= 16
    top = max(d["mbit_s"] for d in fabric["dims"]) * scale
    assert top == pytest.approx(100, rel=1e-5)
    exp = expand({"name": "p", "preset": name, "policy": "shortest", "jobs": [
        {"name": "j", "hosts_wanted": math.prod(d["size"] for d in fabric["dims"]),
         "algorithm": "themis", "dim_algorithm": "ring",
         "workload": {"kind": "allreduce", "sizes": ["64KiB"]}}]})[0]
    assert exp.rate_scale == scale
    check_against_fabric(exp, build_plan(exp.fabric, exp.rate_scale))


def test_scaling_halves_the_largest_dimension_last_first() -> None:
    assert scaled_sizes((16, 64)) == [4, 4]
    assert scaled_sizes((8, 16, 8)) == [4, 2, 2]
    assert scaled_sizes((2, 2)) == [2, 2]
    assert emulation_scale(1000) == 0.1 and emulation_scale(50) == 1.0


def test_preset_beside_a_fabric_is_refused() -> None:
    with pytest.raises(SpecError, match="preset 2d-switch sets the fabric and its rate_scale"):
        expand({"name": "p", "preset": "2d-switch", "rate_scale": 0.1, "jobs": []})
    with pytest.raises(SpecError, match="'nope' is not a preset; choose one of 2d-switch"):
        expand({"name": "p", "preset": "nope", "jobs": []})


def test_a_fabric_file_may_name_a_preset(tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text("preset: 3d-fc-ring-switch\n")
    f = load_fabric_file(tmp_path / "f.yaml")
    assert f.fabric.kinds == ("fully_connected", "ring", "switch")
    assert f.fabric.sizes == (4, 2, 2)


def test_model_preset_runs_each_dimension_s_collective() -> None:
    p = PRESETS["4d-ring-fc-ring-switch"]
    args = p.model_args()
    chunks = args.pop("chunks")
    pred = predict(total_bytes=2**30, chunks=chunks, policy="themis", order="scf", **args)
    # direct on the mesh uses all its links: the mesh is as fast as its 175 GB/s
    ring_on_mesh = predict(total_bytes=2**30, chunks=chunks, policy="themis", order="scf",
                           **{**args, "dim_algorithm": "ring"})
    assert pred.utilisation > ring_on_mesh.utilisation
    assert 0.5 < pred.utilisation <= 1


def test_cli_model_and_plan_take_a_preset(capsys) -> None:
    assert main(["model", "--preset", "3d-switch-hetero", "--size", "256MiB", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # 200/100/50 GB/s of 2**30 bytes
    assert doc["dims"] == [16, 8, 8]
    assert doc["bw_gbit_s"] == pytest.approx([1717.9869184, 858.9934592, 429.4967296], rel=1e-12)
    assert doc["chunks"] == 64 and doc["speedup"] > 1
    assert main(["plan", "--preset", "3d-fc-ring-switch", "--size", "64MiB"]) == 0
    assert "dim 0 fully_connected (direct)" in capsys.readouterr().out


def test_cli_without_dims_or_preset_is_one_sentence(capsys) -> None:
    assert main(["model", "--size", "1MiB"]) == 2
    assert "give --dims, --bw, --chunks (or --preset NAME" in capsys.readouterr().err


def test_cli_model_sim_agrees_with_the_model(capsys) -> None:
    argv = ["model", "--dims", "4x2", "--bw", "10,5", "--size", "1MiB", "--chunks", "4",
            "--order", "scf", "--json"]
    assert main(argv) == 0
    model = json.loads(capsys.readouterr().out)
    assert main([*argv, "--sim"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["backend"] == "sim"
    for m, s in zip(model["predictions"], sim["results"], strict=True):
        assert s["policy"] == m["policy"]
        assert s["time_s"] == pytest.approx(m["time_s"], rel=1e-6)
