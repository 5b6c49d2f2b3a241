"""`fabriclab allreduce` output read as nccl-tests' all_reduce_perf output is read.

:func:`parse_nccl_tests` follows nccl-tests' published output (src/common.cu, src/util.cu):
lines starting with ``#`` are header or footer; a data line is ``size count type redop root``
then ``time algbw busbw #wrong`` out of place and again in place, whitespace separated; the
footer has ``# Out of bounds values : N OK|FAILED`` and ``# Avg bus bandwidth    : X``. It is
as strict as common third-party parsers are: 13 fields (positional parsers take busbw at
field -6 and -2), unsigned decimals without an exponent (regex parsers match ``\\d+\\.?\\d*``),
an integer or ``N/A`` for #wrong.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from testbed.cli import main
from testbed.cli.nccl_table import table_lines
from testbed.core.errors import FabricLabError
from testbed.core.traces import COLLECTIVE_SCHEMA
from workloads import launcher
from workloads.launcher import LaunchResult, SizeResult, size_results

DECIMAL = re.compile(r"^\d+(\.\d+)?$")
FAST = ["allreduce", "--ranks", "2", "-n", "1", "-w", "0", "--timeout", "10"]


@dataclass
class Group:
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None


@dataclass
class Line:
    size: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: Group
    in_place: Group


@dataclass
class Parsed:
    lines: list[Line]
    out_of_bounds: int
    out_of_bounds_ok: bool
    avg_busbw: float


def _group(fields: list[str]) -> Group:
    for f in fields[:3]:
        assert DECIMAL.match(f), f"{f!r} is not an unsigned decimal without exponent"
    assert fields[3] == "N/A" or fields[3].isdigit(), fields[3]
    return Group(float(fields[0]), float(fields[1]), float(fields[2]),
                 None if fields[3] == "N/A" else int(fields[3]))


def parse_nccl_tests(text: str) -> Parsed:
    lines, oob, avg = [], None, None
    for raw in text.splitlines():
        if raw.startswith("#"):
            if m := re.match(r"^# Out of bounds values : (\d+) (OK|FAILED)\s*$", raw):
                oob = (int(m.group(1)), m.group(2) == "OK")
            elif m := re.match(r"^# Avg bus bandwidth    : (\S+)", raw):
                avg = float(m.group(1))
            continue
        f = raw.split()
        assert len(f) == 13, f"a data line has {len(f)} fields: {raw!r}"
        assert f[0].isdigit() and f[1].isdigit() and re.match(r"^-?\d+$", f[4]), raw
        lines.append(Line(int(f[0]), int(f[1]), f[2], f[3], int(f[4]), _group(f[5:9]),
                          _group(f[9:13])))
    assert oob is not None and avg is not None, "the footer is missing"
    return Parsed(lines, oob[0], oob[1], avg)


def test_a_small_run_reads_as_nccl_tests_output(capsys) -> None:
    assert main([*FAST, "-b", "1K", "-e", "8K", "-f", "2"]) == 0
    out = capsys.readouterr().out
    parsed = parse_nccl_tests(out)
    assert [x.size for x in parsed.lines] == [1024, 2048, 4096, 8192]
    assert [x.count for x in parsed.lines] == [256, 512, 1024, 2048]
    assert {(x.type, x.redop, x.root) for x in parsed.lines} == {("float", "sum", -1)}
    groups = [g for x in parsed.lines for g in (x.out_of_place, x.in_place)]
    for x in parsed.lines:
        for g in (x.out_of_place, x.in_place):
            assert g.wrong == 0 and g.time_us > 0
            assert g.algbw > 0  # small sizes on loopback: significant digits, never 0.00
            assert g.algbw == pytest.approx(x.size / g.time_us / 1e3, rel=2e-3)  # GB/s
            assert g.busbw == pytest.approx(g.algbw, rel=1e-3)  # 2 ranks: 2(n-1)/n = 1
    assert (parsed.out_of_bounds, parsed.out_of_bounds_ok) == (0, True)
    mean = sum(g.busbw for g in groups) / len(groups)  # over both groups, as nccl-tests
    assert parsed.avg_busbw == pytest.approx(mean, rel=2e-3)
    header = [line for line in out.splitlines() if line.startswith("#")]
    assert any("GB/s = 1e9 bytes/s" in line for line in header)
    assert any(line.split()[1:5] == ["size", "count", "type", "redop"] for line in header)


def test_json_carries_the_parameters_and_csv_the_same_rows(tmp_path: Path, capsys) -> None:
    keep, table = tmp_path / "traces", tmp_path / "rows.csv"
    argv = [*FAST, "-b", "4K", "-e", "64K", "-f", "4", "--dims", "2", "--json",
            "--csv", str(table), "--out", str(keep)]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)  # one JSON document, no table
    assert doc["params"] == {
        "ranks": 2, "algo": "ring", "dim_algo": "ring", "dims": [2], "chunks": 4,
        "order": "fifo", "max_active": 1, "transport": "zerocopy", "iters": 1, "warmup": 0,
        "timeout_s": 10.0, "sizes_bytes": [4096, 16384, 65536], "type": "float",
        "redop": "sum"}
    assert doc["trace_dir"] == str(keep) and (keep / "collectives-rank0.parquet").exists()
    rows = doc["rows"]
    assert [(r["size_bytes"], r["placement"]) for r in rows] == [
        (s, p) for s in (4096, 16384, 65536) for p in ("out-of-place", "in-place")]
    assert all(r["count_elements"] == r["size_bytes"] // 4 and r["wrong"] == 0
               and r["correct"] and r["busbw_gbyte_s"] > 0 and r["time_us"] > 0 for r in rows)
    assert doc["out_of_bounds"] == 0
    assert doc["avg_busbw_gbyte_s"] == pytest.approx(
        sum(r["busbw_gbyte_s"] for r in rows) / len(rows))
    with table.open() as fh:
        written = list(csv.DictReader(fh))
    assert list(written[0]) == list(rows[0])
    assert [float(r["busbw_gbyte_s"]) for r in written] == [r["busbw_gbyte_s"] for r in rows]
    assert not list(tmp_path.glob("*.partial"))


def test_without_out_the_json_says_no_traces_were_kept(capsys) -> None:
    assert main([*FAST, "--size", "64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trace_dir"] is None and doc["params"]["sizes_bytes"] == [64]


def result(size: int, in_place: bool, wrong: int = 0, busbw: float = 0.5) -> SizeResult:
    return SizeResult(size=size, count=size // 4, time_us=10.0, algbw=busbw, busbw=busbw,
                      correct=not wrong, in_place=in_place, wrong=wrong)


def test_wrong_results_fail_the_footer_and_the_exit_code(monkeypatch, capsys) -> None:
    rows = [result(64, False), result(64, True, wrong=2, busbw=1.5)]
    monkeypatch.setattr(launcher, "run_local", lambda **kw: LaunchResult(None, rows))
    assert main([*FAST, "--size", "64"]) == 1
    parsed = parse_nccl_tests(capsys.readouterr().out)
    assert (parsed.out_of_bounds, parsed.out_of_bounds_ok) == (2, False)
    assert parsed.lines[0].in_place.wrong == 2 and parsed.avg_busbw == 1.0


def test_a_size_without_both_groups_is_an_error_not_a_made_up_number() -> None:
    with pytest.raises(FabricLabError, match="no out-of-place result for 64 bytes"):
        table_lines([result(64, True)])


def test_traces_from_before_placements_read_as_in_place(tmp_path: Path) -> None:
    older = pa.schema([f for f in COLLECTIVE_SCHEMA if f.name != "in_place"])
    row = {"run_id": "r", "job_id": "j", "rank": 0, "coll": 1, "iteration": 0,
           "warmup": False, "size": 64, "count": 16, "world": 2, "algorithm": "ring",
           "transport": "zerocopy", "chunks": 1, "start": 0.0, "time": 1e-3, "algbw": 0.0,
           "busbw": 0.0, "correct": True}
    pq.write_table(pa.Table.from_pylist([row], schema=older),
                   tmp_path / "collectives-rank0.parquet")
    [r] = size_results(tmp_path)
    assert (r.size, r.in_place, r.wrong, r.correct) == (64, True, 0, True)


def test_a_sizes_time_is_the_mean_of_each_collectives_slowest_rank(tmp_path: Path) -> None:
    """Rank 0 waits in the first iteration, rank 1 in the second: each rank's mean is 2 ms,
    the collectives' slowest ranks took 3 ms each, and the row says 3 ms, as the summary's
    collective_s (analysis.metrics) does."""
    import pandas as pd

    from analysis.metrics import collective_table

    rows = []
    for rank, times in ((0, (3e-3, 1e-3)), (1, (1e-3, 3e-3))):
        for it, t in enumerate(times):
            rows.append({"run_id": "r", "job_id": "j", "rank": rank, "coll": it,
                         "iteration": it, "warmup": False, "size": 64, "count": 16, "world": 2,
                         "algorithm": "ring", "transport": "zerocopy", "chunks": 1,
                         "start": 0.0, "time": t, "algbw": 0.0, "busbw": 0.0,
                         "correct": True, "in_place": True})
    for rank in (0, 1):
        pq.write_table(pa.Table.from_pylist([r for r in rows if r["rank"] == rank],
                                            schema=pa.schema([f for f in COLLECTIVE_SCHEMA
                                                              if f.name in rows[0]])),
                       tmp_path / f"collectives-rank{rank}.parquet")
    [r] = size_results(tmp_path)
    assert r.time_us == pytest.approx(3000.0)
    table = pd.concat([pd.read_parquet(f) for f in sorted(tmp_path.glob("*.parquet"))])
    summary_t = collective_table(table.rename(columns={"job_id": "job"}))["t"].mean()
    assert r.time_us == pytest.approx(summary_t * 1e6)
