"""A transport's costs per size from made-up traces: the slower rank sets an iteration's time,
warm-ups count for nothing, CPU and copies are per byte the phases sent."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.transport_costs import size_costs
from testbed.core.traces import COLLECTIVE_SCHEMA, PHASE_SCHEMA


def write(out: Path, kind: str, schema: pa.Schema, rows: list[dict]) -> None:
    """One rank's ``kind`` file per rank in ``rows`` (other columns null)."""
    for rank in sorted({r["rank"] for r in rows}):
        mine = [r for r in rows if r["rank"] == rank]
        cols = {f.name: pa.array([r.get(f.name) for r in mine], f.type) for f in schema}
        pq.write_table(pa.table(cols, schema=schema), out / f"{kind}-rank{rank}.parquet")


def test_costs_per_size_over_the_measured_iterations(tmp_path: Path) -> None:
    colls, phases = [], []
    for rank in (0, 1):
        for it, (warmup, size) in enumerate([(True, 1000), (False, 1000), (False, 1000),
                                             (False, 1000), (False, 4000)]):
            coll = it
            slow = 0.5 if warmup else (0.1 + 0.01 * it + 0.05 * rank)
            colls.append({"rank": rank, "coll": coll, "iteration": it, "warmup": warmup,
                          "size": size, "time": slow, "cpu": 0.002,
                          "copied_bytes": 2 * size})
            phases.append({"rank": rank, "coll": coll, "iteration": it, "warmup": warmup,
                           "sent_bytes": size})
    write(tmp_path, "collectives", COLLECTIVE_SCHEMA, colls)
    write(tmp_path, "phases", PHASE_SCHEMA, phases)
    costs = size_costs(tmp_path)
    assert sorted(costs) == [1000, 4000]
    seconds, cpu_s_per_gb, copies = costs[1000]
    assert seconds == pytest.approx(0.17)  # iterations 1-3: rank 1's 0.16, 0.17, 0.18
    assert cpu_s_per_gb == pytest.approx(6 * 0.002 / 6000 * 1e9)
    assert copies == pytest.approx(2.0)
    assert costs[4000][0] == pytest.approx(0.19)
