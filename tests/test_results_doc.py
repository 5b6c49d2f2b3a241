"""Every parquet column a run writes records its unit, and docs/results.md describes it with the
schema's type and unit, in order: the reference cannot drift from the schemas."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from testbed.core.samples import CPU_SAMPLE_SCHEMA, LINK_SAMPLE_SCHEMA, SAMPLE_SCHEMAS
from testbed.core.traces import GBYTE_S, SCHEMAS
from testbed.core.units import DIMENSIONLESS, NOT_A_QUANTITY, unit_of
from testbed.emulator.sampler import write_parquet
from workloads.traces import TraceWriter

DOC = Path(__file__).parent.parent / "docs" / "results.md"
UNITS = {"s", "bytes", "Mbit/s", GBYTE_S, DIMENSIONLESS, NOT_A_QUANTITY}
# docs/results.md heading -> the schema it documents
TABLES = {f"jobs/<job>/{kind}-rank{{r}}.parquet": s for kind, s in SCHEMAS.items()} | {
    f"{name}.parquet": s for name, s in SAMPLE_SCHEMAS.items()}


def documented(heading: str) -> list[tuple[str, str, str]]:
    """(column, type, unit) rows of the table under ``### `heading` `` in docs/results.md."""
    text = DOC.read_text(encoding="utf-8")
    marker = f"### `{heading}`\n"
    assert marker in text, f"docs/results.md has no section for {heading}"
    section = text.split(marker, 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows.append((cells[0].strip("`"), cells[1], cells[2]))
    return rows


@pytest.mark.parametrize("heading", sorted(TABLES))
def test_every_column_has_a_unit_and_is_documented(heading: str) -> None:
    schema = TABLES[heading]
    for f in schema:
        assert unit_of(f) in UNITS, f"{heading}: {f.name} has unit {unit_of(f)!r}"
    assert documented(heading) == [(f.name, str(f.type), unit_of(f)) for f in schema]


def test_written_files_carry_their_units(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, rank=0, dnn=True)
    writer.finish()
    for kind, schema in SCHEMAS.items():
        assert pq.read_schema(writer.path(kind)).equals(schema, check_metadata=True)
    samples = {
        LINK_SAMPLE_SCHEMA: pd.DataFrame([(1.0, "h0:0-leaf0:1", "h0", "leaf0", 50.0, 125)],
                                         columns=LINK_SAMPLE_SCHEMA.names),
        CPU_SAMPLE_SCHEMA: pd.DataFrame({"time": [1.0], "idle": [0.5], "steal": [0.0]}),
    }
    for schema, df in samples.items():
        path = tmp_path / "samples.parquet"
        write_parquet(df, path, schema)
        got = pq.read_schema(path)
        assert [(f.name, f.type, unit_of(f)) for f in got] == [
            (f.name, f.type, unit_of(f)) for f in schema]


def test_a_column_written_without_a_unit_reads_as_none() -> None:
    assert unit_of(pa.field("mbps", pa.float64())) is None


def test_every_summary_key_is_documented(tmp_path: Path) -> None:
    from analysis_fixtures import build_multidim_run

    from analysis.metrics import summarise

    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## summary.json\n", 1)[1].split("\n## ", 1)[0]
    s = summarise(build_multidim_run(tmp_path))
    nested = {"jobs", "dimensions", "links", "speedup", "fidelity"}
    keys = [f"`{k}`" for k in s if k not in nested]
    job = next(iter(s["jobs"].values()))
    keys += [f"`{k}`" for k in job if k != "sizes"]
    keys += [f"`sizes.<bytes>.{k}`" for k in next(iter(job["sizes"].values()))]
    keys += [f"`{k}`" for k in s["speedup"]["pairs"][0]]
    assert [k for k in keys if k not in section] == []
