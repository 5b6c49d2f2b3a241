"""How a worker writes its trace files (the schema and readers are
:mod:`testbed.core.traces`): rows are collected while it runs and written atomically.

Files in ``out_dir`` per rank ``r``: ``phases-rank{r}.parquet`` and
``collectives-rank{r}.parquet`` (with ``iterations`` and ``buckets`` in DNN mode). They are
written to a temporary name and renamed when the worker finishes, so a file with the final name
is always complete. While running, the worker periodically (atomically) replaces
``*.partial.parquet`` snapshots; they are removed on success and are what a crashed worker
leaves behind, clearly named as partial.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from testbed.core.traces import SCHEMAS


def write_rows(path: Path, rows: list[dict], schema: pa.Schema) -> None:
    """Write ``rows`` as a parquet file of ``schema``, atomically (a temporary name, renamed)."""
    _write_atomic(rows, schema, path)


def _write_atomic(rows: list[dict], schema: pa.Schema, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    os.replace(tmp, path)


class TraceWriter:
    """Collects one worker's rows; :meth:`finish` writes the final files atomically.

    With ``dnn`` it also writes the ``iterations`` and ``buckets`` tables.
    """

    def __init__(self, out_dir: Path, rank: int, partial_every: float = 2.0,
                 dnn: bool = False) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.phases: list[dict] = []
        self.collectives: list[dict] = []
        self.iterations: list[dict] = []
        self.buckets: list[dict] = []
        self.kinds = ("phases", "collectives", *(("iterations", "buckets") if dnn else ()))
        self.partial_every = partial_every
        # the first parquet write of a process costs about 0.3 CPU-s (pyarrow sets its writer
        # up): pay it now, while the worker starts, not inside its first measured collectives
        # (eight workers doing so at once kept the switch waiting for a CPU; BENCHMARKS.md)
        self.flush_partial()

    def path(self, kind: str, partial: bool = False) -> Path:
        suffix = ".partial.parquet" if partial else ".parquet"
        return self.out_dir / f"{kind}-rank{self.rank}{suffix}"

    def maybe_flush(self) -> None:
        """Snapshot the rows so far to the partial files if enough time has passed."""
        if time.monotonic() - self._last_flush >= self.partial_every:
            self.flush_partial()

    def flush_partial(self) -> None:
        for kind in self.kinds:
            _write_atomic(getattr(self, kind), SCHEMAS[kind], self.path(kind, partial=True))
        self._last_flush = time.monotonic()

    def finish(self) -> None:
        """Write the complete files and drop the partial snapshots."""
        for kind in self.kinds:
            _write_atomic(getattr(self, kind), SCHEMAS[kind], self.path(kind))
        for kind in self.kinds:
            self.path(kind, partial=True).unlink(missing_ok=True)


