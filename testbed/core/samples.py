"""The emulator's sample tables in a run directory.

``link_samples.parquet``: one row per sample and link direction, the cumulative byte counter of
that direction and the link's configured rate. ``cpu_samples.parquet``: one row per sample
interval, the machine's idle fraction. Times are ``time.monotonic()`` seconds, the clock of the
worker traces (:mod:`workloads.traces`).
"""

from __future__ import annotations

import pyarrow as pa

LINK_SAMPLE_SCHEMA = pa.schema([
    ("time", pa.float64()), ("link", pa.string()), ("src", pa.string()), ("dst", pa.string()),
    ("capacity_mbit_s", pa.float64()), ("bytes", pa.int64()),
])

CPU_SAMPLE_SCHEMA = pa.schema([("time", pa.float64()), ("idle", pa.float64())])

SAMPLE_SCHEMAS = {"link_samples": LINK_SAMPLE_SCHEMA, "cpu_samples": CPU_SAMPLE_SCHEMA}
