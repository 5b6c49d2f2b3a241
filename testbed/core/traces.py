"""The schema of the per-worker trace files, and how to read them: one row per chunk phase and
one row per collective (parquet). Workers write them (:mod:`workloads.traces`), the simulator
writes the same, and the analysis reads them: this module is the contract between the three.

Files in ``out_dir`` per rank ``r``: ``phases-rank{r}.parquet`` and
``collectives-rank{r}.parquet``. They are written to a temporary name and renamed atomically
when the worker finishes, so a file with the final name is always complete. While running, the
worker periodically (atomically) replaces ``*.partial.parquet`` snapshots; they are removed on
success and are what a crashed worker leaves behind, clearly named as partial.

A worker in DNN mode (:mod:`workloads.dnn`) also writes ``iterations-rank{r}.parquet`` (one
row per training iteration) and ``buckets-rank{r}.parquet`` (one row per gradient bucket and
iteration; ``coll`` links it to the collective and phase rows), the same way.

Times are ``time.monotonic()`` seconds (comparable between processes of one host). Every
column records its unit as field metadata (:func:`testbed.core.units.unit_field`);
docs/results.md describes every column.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from testbed.core import formulas
from testbed.core.units import DIMENSIONLESS, NOT_A_QUANTITY, unit_field

_S, _BYTES = "s", "bytes"
# nccl-tests reports algbw and busbw in GB/s; the collective traces keep that unit.
GBYTE_S = "GB/s (1e9 bytes/s, as nccl-tests)"
_N, _LABEL = DIMENSIONLESS, NOT_A_QUANTITY


def _schema(*fields: tuple[str, pa.DataType, str]) -> pa.Schema:
    """A schema whose every column records its unit (docs/results.md explains each)."""
    return pa.schema([unit_field(*f) for f in fields])


_WHO = (("run_id", pa.string(), _LABEL), ("job_id", pa.string(), _LABEL), ("rank", pa.int32(), _N))

PHASE_SCHEMA = _schema(
    *_WHO, ("coll", pa.int64(), _N), ("iteration", pa.int32(), _N), ("warmup", pa.bool_(), _LABEL),
    ("chunk", pa.int32(), _N), ("phase", pa.int32(), _N), ("dim", pa.int32(), _N),
    ("op", pa.string(), _LABEL), ("bytes", pa.int64(), _BYTES), ("start", pa.float64(), _S),
    ("end", pa.float64(), _S),
    # the ranks the phase ran among, and the bytes this rank sent in it (the collective's
    # own count); null in traces older than these columns
    ("group", pa.int32(), _N), ("sent_bytes", pa.int64(), _BYTES),
)

COLLECTIVE_SCHEMA = _schema(
    *_WHO, ("coll", pa.int64(), _N), ("iteration", pa.int32(), _N), ("warmup", pa.bool_(), _LABEL),
    ("size", pa.int64(), _BYTES), ("count", pa.int64(), _N), ("world", pa.int32(), _N),
    ("algorithm", pa.string(), _LABEL), ("transport", pa.string(), _LABEL),
    ("chunks", pa.int32(), _N), ("start", pa.float64(), _S), ("time", pa.float64(), _S),
    ("algbw", pa.float64(), GBYTE_S), ("busbw", pa.float64(), GBYTE_S),
    ("correct", pa.bool_(), _LABEL),
    ("in_place", pa.bool_(), _LABEL),  # false: out of place (input kept); null in older traces
    # allreduce or alltoall (testbed.core.formulas.COLLECTIVE_KINDS); null in older traces,
    # which are All-Reduces
    ("collective", pa.string(), _LABEL),
    # the worker's CPU time during the collective and the bytes its transport copied in user
    # space (workloads.transports.base); null where not measured (DNN buckets, simulator)
    ("cpu", pa.float64(), _S), ("copied_bytes", pa.int64(), _BYTES),
)


# One DNN training iteration (or training-workload pass) of one rank. time = end - start
# (from forward start to the last bucket reduced); compute = the time actually spent in
# forward + backward compute;
# nominal_compute = the profile's; backward_end = when the last backward compute ended;
# comm = the sum of the bucket All-Reduce durations (what serial communication would add);
# exposed_comm = max(0, time - compute); compute_share = compute / time; bytes = all buckets.
ITERATION_SCHEMA = _schema(
    *_WHO, ("iteration", pa.int32(), _N), ("warmup", pa.bool_(), _LABEL),
    ("model", pa.string(), _LABEL), ("algorithm", pa.string(), _LABEL),
    ("transport", pa.string(), _LABEL), ("world", pa.int32(), _N), ("buckets", pa.int32(), _N),
    ("bytes", pa.int64(), _BYTES), ("start", pa.float64(), _S), ("end", pa.float64(), _S),
    ("time", pa.float64(), _S), ("compute", pa.float64(), _S),
    ("nominal_compute", pa.float64(), _S), ("backward_end", pa.float64(), _S),
    ("comm", pa.float64(), _S), ("exposed_comm", pa.float64(), _S),
    ("compute_share", pa.float64(), _N), ("correct", pa.bool_(), _LABEL),
    # a training workload's exposed communication per logical dimension: the time it waited
    # while that dimension carried a phase (dimensions busy together each count it); null
    # for DNN profiles and in older traces
    ("exposed_dim", pa.list_(pa.field("element", pa.float64())), _S),
)

# One gradient bucket of one iteration: backward = its nominal backward compute; ready = when
# that compute ended and the bucket was queued; start/end = its All-Reduce on the comm thread.
BUCKET_SCHEMA = _schema(
    *_WHO, ("iteration", pa.int32(), _N), ("warmup", pa.bool_(), _LABEL),
    ("bucket", pa.int32(), _N), ("coll", pa.int64(), _N), ("bytes", pa.int64(), _BYTES),
    ("backward", pa.float64(), _S), ("ready", pa.float64(), _S), ("start", pa.float64(), _S),
    ("end", pa.float64(), _S), ("correct", pa.bool_(), _LABEL),
)

SCHEMAS = {"phases": PHASE_SCHEMA, "collectives": COLLECTIVE_SCHEMA,
           "iterations": ITERATION_SCHEMA, "buckets": BUCKET_SCHEMA}


def bandwidths(size: int, seconds: float, world: int,
               kind: str = formulas.ALLREDUCE) -> tuple[float, float]:
    """nccl-tests bandwidths in GB/s: algbw = S/t, busbw = algbw·2(n-1)/n for an All-Reduce,
    algbw·(n-1)/n for an all-to-all (:func:`testbed.core.formulas.busbw_factor`)."""
    algbw, busbw = formulas.bandwidths(size, seconds, world, kind)
    return algbw / 1e9, busbw / 1e9


def collective_kinds(table) -> list[str]:
    """Each row's collective kind of a collectives DataFrame (null or absent: allreduce)."""
    if "collective" not in table:
        return [formulas.ALLREDUCE] * len(table)
    return [k if isinstance(k, str) else formulas.ALLREDUCE for k in table["collective"]]


def read_table(out_dir: Path, kind: str) -> pa.Table:
    """All ranks' complete ``kind`` files (``phases``, ``collectives``, ``iterations`` or
    ``buckets``) as one table."""
    schema = SCHEMAS[kind]
    files = sorted(Path(out_dir).glob(f"{kind}-rank*.parquet"))
    tables = [conform(pq.read_table(f), schema) for f in files
              if not f.name.endswith(".partial.parquet")]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def collective_windows(run_dir: Path, warmup: bool = False
                       ) -> dict[str, list[tuple[float, float]]]:
    """Per job of a run directory (its ``jobs/<name>/`` traces), (start, end) of every measured
    collective of every rank (and with ``warmup``, of every warm-up one too)."""
    windows = {}
    for job_dir in sorted((Path(run_dir) / "jobs").glob("*")):
        t = read_table(job_dir, "collectives").to_pandas()
        if not warmup:
            t = t[~t["warmup"]]
        windows[job_dir.name] = list(zip(t["start"], t["start"] + t["time"], strict=True))
    return windows


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` in ``schema``; a column older traces lack (``in_place``, ``collective``) is
    added as nulls."""
    for field in schema:
        if field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(len(table), field.type))
    return table.select(schema.names).cast(schema)
