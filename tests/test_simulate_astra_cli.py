"""`fabriclab simulate-astra`: AnalyticalAstra's three files in, its finish line out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.cli import main

NETWORK = {"topology-name": "Hierarchical", "topologies-per-dim": ["Switch", "Switch"],
           "dimension-type": ["N", "N"], "dimensions-count": 2, "units-count": [4, 4],
           "links-count": [1, 1], "link-latency": [1, 1], "link-bandwidth": [40, 20],
           "nic-latency": [0, 0], "router-latency": [0, 0], "hbm-latency": [1, 1],
           "hbm-bandwidth": [1, 1], "hbm-scale": [0, 0]}
SYSTEM = """scheduling-policy: LIFO
endpoint-delay: 1
active-chunks-per-dimension: 1
preferred-dataset-splits: 16
boost-mode: 1
all-reduce-implementation: halvingDoubling_halvingDoubling
all-gather-implementation: halvingDoubling_halvingDoubling
reduce-scatter-implementation: halvingDoubling_halvingDoubling
all-to-all-implementation: direct_direct
collective-optimization: localBWAware
intra-dimension-scheduling: SCF
inter-dimension-scheduling: themis
"""
WORKLOAD = "DATA\n2\na -1 100 NONE 0 90 NONE 0 80 ALLREDUCE 16777216 10\n" \
           "b -1 50 NONE 0 40 NONE 0 30 NONE 0 10\n"


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "n.json").write_text(json.dumps(NETWORK))
    (tmp_path / "s.txt").write_text(SYSTEM)
    (tmp_path / "w.txt").write_text(WORKLOAD)
    return [f"--workload-configuration={tmp_path / 'w.txt'}",
            f"--system-configuration={tmp_path / 's.txt'}",
            f"--network-configuration={tmp_path / 'n.json'}"]


def test_prints_astra_finish_line_first(files, capsys):
    assert main(["simulate-astra", *files, "--path=/nonexistent/", "--run-name=x"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("all passes finished at time: ")
    assert int(lines[0].rsplit(" ", 1)[1]) > 100 + 50 + 80 + 30 + 40


def test_json_breakdown(files, capsys):
    assert main(["simulate-astra", *files, "--json", "--num-passes", "2"]) == 0
    out = capsys.readouterr().out
    first, rest = out.split("\n", 1)
    data = json.loads(rest)
    assert round(data["finish_time_ns"]) == int(first.rsplit(" ", 1)[1])
    assert len(data["passes"]) == 2 and [x["name"] for x in data["layers"]] == ["a", "b"]
    first_collective = data["collectives"][0]
    assert first_collective["kind"] == "ALLREDUCE" and first_collective["dims"] == [0, 1]


@pytest.mark.parametrize("line, words", [
    ("intra-dimension-scheduling: RG\n", "intra-dimension-scheduling"),
    ("made-up-key: 3\n", "made-up-key"),
    ("active-chunks-per-dimension: 2\n", "active-chunks-per-dimension"),
])
def test_unsupported_system_key_is_one_sentence(files, tmp_path, capsys, line, words):
    (tmp_path / "s.txt").write_text(SYSTEM.replace("intra-dimension-scheduling: SCF\n", "")
                                    .replace("active-chunks-per-dimension: 1\n", "") + line)
    assert main(["simulate-astra", *files]) != 0
    err = capsys.readouterr().err.strip()
    assert "s.txt" in err and words in err and "\n" not in err and "Traceback" not in err


def test_a_pass_ending_in_its_all_reduce_has_that_wait_exposed(files, capsys):
    # one pass: layer a's All-Reduce is issued at the end of the backward pass and nothing
    # waits for it but the end of the run, so every exposed nanosecond is after the compute
    assert main(["simulate-astra", *files, "--json"]) == 0
    _first, rest = capsys.readouterr().out.split("\n", 1)
    data = json.loads(rest)
    drain = data["finish_time_ns"] - data["passes"][-1]["end_ns"]
    assert drain > 1000 and data["exposed_after_last_pass_ns"] == pytest.approx(drain)
    assert data["exposed_communication_ns"] == pytest.approx(
        drain + sum(sum(x["waiting_for_communication_ns"].values()) for x in data["layers"]))
    assert main(["simulate-astra", *files]) == 0
    summary = capsys.readouterr().out.splitlines()[2]
    assert f"exposed communication {drain / 1e6:.3f} ms ({drain / 1e6:.3f} ms of it after the " \
           "last pass's compute)" in summary, summary
