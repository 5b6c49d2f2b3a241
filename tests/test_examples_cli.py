"""`fabriclab examples` writes the inputs the docs' simulate-astra lines use: the built-in
Themis workloads as ASTRA-sim 1.0 text that reads back to the same workload, Chakra traces
that replay on the network written beside them, and refuses a non-empty --out. No root."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from testbed.cli import main
from workloads.training.astra_text import format_workload, parse_workload
from workloads.training.chakra import read_trace
from workloads.training.library import load

THEMIS = ("themis-resnet50", "themis-gnmt", "themis-dlrm-medium", "themis-dlrm-large",
          "themis-transformer-1t")


@pytest.mark.parametrize("name", THEMIS)
def test_a_builtin_as_astra_text_reads_back_the_same(name: str) -> None:
    workload = load(name)
    back = parse_workload(format_workload(workload), f"{name}.txt")
    assert replace(back, source=workload.source) == workload


def test_examples_writes_what_simulate_astra_replays(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ex"
    assert main(["examples", "--out", str(out)]) == 0
    assert {p.name for p in out.glob("themis-*.txt")} == {f"{n}.txt" for n in THEMIS}
    for trace in ("allreduce-8npus-1MiB", "training"):
        files = sorted((out / "chakra" / trace).glob("trace.*.et"))
        assert len(files) == 8
        assert read_trace(files[0].read_bytes(), str(files[0]))
        capsys.readouterr()
        assert main(["simulate-astra", f"--workload-configuration={out}/chakra/{trace}/trace",
                     f"--system-configuration={out}/chakra/system.txt",
                     f"--network-configuration={out}/chakra/network.yml"]) == 0
        assert capsys.readouterr().out.startswith("all passes finished at time: ")
    assert main(["export-astra", "--preset", "2d-switch", "--out", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    assert main(["simulate-astra", f"--workload-configuration={out}/themis-resnet50.txt",
                 f"--system-configuration={tmp_path}/a/system.txt",
                 f"--network-configuration={tmp_path}/a/network.json"]) == 0
    assert capsys.readouterr().out.startswith("all passes finished at time: ")


def test_examples_refuses_a_non_empty_out_unless_forced(tmp_path: Path, capsys) -> None:
    """A directory of the user's is never written into; an earlier examples output is
    replaced with --force."""
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["examples", "--out", str(tmp_path)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["examples", "--out", str(tmp_path), "--force"]) == 2
    assert "not a directory a fabriclab command wrote" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    out = tmp_path / "examples"
    assert main(["examples", "--out", str(out)]) == 0
    (out / "stale.txt").write_text("an earlier run's")
    assert main(["examples", "--out", str(out), "--force"]) == 0
    assert (out / "themis-gnmt.txt").is_file() and not (out / "stale.txt").exists()
