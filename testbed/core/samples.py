"""The emulator's sample tables in a run directory, with the unit of every column.

``link_samples.parquet``: one row per sample and link direction, the cumulative byte counter of
that direction and the link's configured rate. ``qdisc_samples.parquet``: one row per (faster)
sample and link direction, the counters of the egress qdisc where that direction queues.
``cpu_samples.parquet``: one row per sample interval, the machine's idle fraction and the
share of its CPU time a hypervisor stole.
``sched_samples.parquet``: one row per sample and thread of a worker or ``ovs-vswitchd``, its
cumulative time run and time waited runnable for a CPU (``/proc/PID/task/TID/schedstat``), and
its state letter. Times are
``time.monotonic()`` seconds, the clock of the worker traces (:mod:`testbed.core.traces`).
docs/results.md describes every column.
"""

from __future__ import annotations

import pyarrow as pa

from testbed.core.units import DIMENSIONLESS, NOT_A_QUANTITY, unit_field

# The columns every per-link-direction sample starts with: when, which direction, its rate.
_LINK_DIRECTION_FIELDS = [
    unit_field("time", pa.float64(), "s"),
    unit_field("link", pa.string(), NOT_A_QUANTITY),
    unit_field("src", pa.string(), NOT_A_QUANTITY),
    unit_field("dst", pa.string(), NOT_A_QUANTITY),
    unit_field("capacity_mbit_s", pa.float64(), "Mbit/s"),
]

LINK_SAMPLE_SCHEMA = pa.schema([
    *_LINK_DIRECTION_FIELDS,
    unit_field("bytes", pa.int64(), "bytes"),
])

QDISC_SAMPLE_SCHEMA = pa.schema([
    *_LINK_DIRECTION_FIELDS,
    unit_field("sent_bytes", pa.int64(), "bytes"),
    unit_field("backlog_bytes", pa.int64(), "bytes"),
    unit_field("drops", pa.int64(), DIMENSIONLESS),
])

CPU_SAMPLE_SCHEMA = pa.schema([
    unit_field("time", pa.float64(), "s"),
    unit_field("idle", pa.float64(), DIMENSIONLESS),
    unit_field("steal", pa.float64(), DIMENSIONLESS),
])

SCHED_SAMPLE_SCHEMA = pa.schema([
    unit_field("time", pa.float64(), "s"),
    unit_field("job", pa.string(), NOT_A_QUANTITY),  # "" for the switch: it serves every job
    unit_field("process", pa.string(), NOT_A_QUANTITY),
    unit_field("pid", pa.int64(), NOT_A_QUANTITY),
    unit_field("tid", pa.int64(), NOT_A_QUANTITY),
    unit_field("thread", pa.string(), NOT_A_QUANTITY),
    unit_field("run_s", pa.float64(), "s"),
    unit_field("wait_s", pa.float64(), "s"),
    # the thread's state letter when read (R runnable or running, S sleeping, D ...): a wait
    # the kernel counts while the thread was seen asleep is not a wait for a CPU
    unit_field("state", pa.string(), NOT_A_QUANTITY),
])

SAMPLE_SCHEMAS = {"link_samples": LINK_SAMPLE_SCHEMA, "qdisc_samples": QDISC_SAMPLE_SCHEMA,
                  "cpu_samples": CPU_SAMPLE_SCHEMA, "sched_samples": SCHED_SAMPLE_SCHEMA}
