"""Per-worker trace files: one row per chunk phase and one row per collective (parquet).

Files in ``out_dir`` per rank ``r``: ``phases-rank{r}.parquet`` and
``collectives-rank{r}.parquet``. They are written to a temporary name and renamed atomically
when the worker finishes, so a file with the final name is always complete. While running, the
worker periodically (atomically) replaces ``*.partial.parquet`` snapshots; they are removed on
success and are what a crashed worker leaves behind, clearly named as partial.

Times are ``time.monotonic()`` seconds (comparable between processes of one host).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

PHASE_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("job_id", pa.string()), ("rank", pa.int32()),
    ("coll", pa.int64()), ("iteration", pa.int32()), ("warmup", pa.bool_()),
    ("chunk", pa.int32()), ("phase", pa.int32()), ("dim", pa.int32()), ("op", pa.string()),
    ("bytes", pa.int64()), ("start", pa.float64()), ("end", pa.float64()), ("peer", pa.int32()),
])

COLLECTIVE_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("job_id", pa.string()), ("rank", pa.int32()),
    ("coll", pa.int64()), ("iteration", pa.int32()), ("warmup", pa.bool_()),
    ("size", pa.int64()), ("count", pa.int64()), ("world", pa.int32()),
    ("algorithm", pa.string()), ("transport", pa.string()), ("chunks", pa.int32()),
    ("start", pa.float64()), ("time", pa.float64()), ("algbw", pa.float64()),
    ("busbw", pa.float64()), ("correct", pa.bool_()),
])


def bandwidths(size: int, seconds: float, world: int) -> tuple[float, float]:
    """nccl-tests All-Reduce bandwidths in GB/s: algbw = S/t, busbw = algbw·2(n-1)/n."""
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return algbw, algbw * 2 * (world - 1) / world


def _write_atomic(rows: list[dict], schema: pa.Schema, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    os.replace(tmp, path)


class TraceWriter:
    """Collects one worker's rows; :meth:`finish` writes the final files atomically."""

    def __init__(self, out_dir: Path, rank: int, partial_every: float = 2.0) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.phases: list[dict] = []
        self.collectives: list[dict] = []
        self.partial_every = partial_every
        self._last_flush = time.monotonic()

    def path(self, kind: str, partial: bool = False) -> Path:
        suffix = ".partial.parquet" if partial else ".parquet"
        return self.out_dir / f"{kind}-rank{self.rank}{suffix}"

    def maybe_flush(self) -> None:
        """Snapshot the rows so far to the partial files if enough time has passed."""
        if time.monotonic() - self._last_flush >= self.partial_every:
            self.flush_partial()

    def flush_partial(self) -> None:
        _write_atomic(self.phases, PHASE_SCHEMA, self.path("phases", partial=True))
        _write_atomic(self.collectives, COLLECTIVE_SCHEMA, self.path("collectives", partial=True))
        self._last_flush = time.monotonic()

    def finish(self) -> None:
        """Write the complete files and drop the partial snapshots."""
        _write_atomic(self.phases, PHASE_SCHEMA, self.path("phases"))
        _write_atomic(self.collectives, COLLECTIVE_SCHEMA, self.path("collectives"))
        for kind in ("phases", "collectives"):
            self.path(kind, partial=True).unlink(missing_ok=True)


def read_table(out_dir: Path, kind: str) -> pa.Table:
    """All ranks' complete ``kind`` files (``phases`` or ``collectives``) as one table."""
    schema = PHASE_SCHEMA if kind == "phases" else COLLECTIVE_SCHEMA
    files = sorted(Path(out_dir).glob(f"{kind}-rank*.parquet"))
    tables = [pq.read_table(f) for f in files if not f.name.endswith(".partial.parquet")]
    return pa.concat_tables(tables) if tables else schema.empty_table()
