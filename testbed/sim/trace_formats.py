"""Readers for three more cluster traces: Acme (Shanghai AI Lab), Alibaba PAI 2020 and Alibaba
Lingjun 2023. Pure parsing: CSV rows in, :class:`~testbed.sim.traces.TraceJob` s out.

Every reader maps a job to (id, arrival, GPUs, duration): the arrival is its submission time
in seconds from the trace's first submission, the duration (seconds) is read as its run time
on an idle cluster (:func:`~testbed.sim.traces.iterations_for`), and its model is drawn from
the seeded mix, as for Helios and Philly. Rows are skipped, silently, only for what the
simulator cannot run: jobs without GPUs (CPU jobs) and jobs that never ran or whose run time
is not positive. Anything else that cannot be read stops the read with one sentence naming
the file and its line (``trace_seren.csv line 7: gpu_num 'x' is not a number``), as the
Helios reader does: a trace with a broken row is not simulated in part.

``acme:FILE`` — ``trace_seren.csv`` or ``trace_kalos.csv`` (NSDI '24, "Characterization of
Large Language Model Development in the Datacenter"; github.com/InternLM/AcmeTrace). Header
row; columns used: ``job_id``, ``gpu_num`` (GPUs, a whole number), ``submit_time`` (a date
with a UTC offset, e.g. ``2023-03-01 00:18:22+08:00``) and ``duration`` (run time, seconds:
``end_time`` - ``start_time``). Skipped: ``gpu_num`` 0 and an empty or 0 ``duration`` (jobs
cancelled before they started). The job's ``state`` is not used: failed jobs held their GPUs
too.

``pai:DIR`` or ``pai:FILE`` — Alibaba PAI ``cluster-trace-gpu-v2020`` (NSDI '22, "MLaaS in the
Wild"; github.com/alibaba/clusterdata). The tables have no header row; their columns are, in
order, ``pai_job_table.csv``: job_name, inst_id, user, status, start_time, end_time and
``pai_task_table.csv``: job_name, task_name, inst_num, status, start_time, end_time,
plan_cpu, plan_mem, plan_gpu, gpu_type. Times are seconds (shifted by a constant). A DIR
must hold both tables; a FILE is a task table alone. A job's GPUs: every task that ran
(start and end time given) adds ``inst_num`` x ceil(``plan_gpu`` / 100) (``plan_gpu`` is a
percentage of one GPU per instance, empty for CPU tasks); an instance sharing a GPU takes a
whole one, as hosts are not shared here, so GPU-sharing jobs are counted larger than they
were. Its run time: its first task start to its last task end. Its arrival: the job table's
``start_time`` (the submission), or without the job table (or a job missing there) its first
task start. ``pai_instance_table.csv`` is not read: the task table gives the instance counts,
and its machines carry no network position.

``lingjun:DIR`` — Alibaba Lingjun 2023 (SIGCOMM '24, "Crux";
github.com/alibaba/alibaba-lingjun-dataset-2023): ``job.csv``, ``worker.csv`` and
``topo.csv``, each with a header row. ``job.csv``: ``job_name`` (the id), ``gmt_job_submitted``
(arrival), ``gmt_job_running`` and ``gmt_job_finished`` (or, where that is empty,
``gmt_job_stopped``) give the run time; dates as ``2023-08-01 10:00[:00]`` or
``2023/8/1 10:00``. ``worker.csv``: ``job_name``, ``host_ip`` and ``RES`` (JSON; its
``nvidia.com/gpu`` is the worker's GPUs); a later row of the same ``worker_name`` replaces an
earlier one. ``topo.csv``: ``ip``, ``ASW`` (the host's leaf switch), ``PSW`` and ``DSW``.
Skipped: jobs without a GPU worker, jobs that never ran (no ``gmt_job_running``) or have no
end after it, and workers of jobs not in ``job.csv``. A host has :data:`GPUS_PER_HOST` GPUs.
:func:`read_lingjun` also returns where every job ran (:class:`TracePlacement`), which
``simulate-cluster --placement trace`` replays; a job with a worker on a host ``topo.csv``
does not list (or an empty ``host_ip``) keeps its GPUs but has no recorded placement.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from testbed.core.errors import FabricLabError
from testbed.sim.traces import (
    DEFAULT_LINK_BPS,
    TraceJob,
    jobs_from_rows,
    seconds_of,
    trace_read_errors,
)

ACME_COLUMNS = ("job_id", "gpu_num", "submit_time", "duration")
PAI_JOB_TABLE = "pai_job_table.csv"
PAI_TASK_TABLE = "pai_task_table.csv"
PAI_JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
PAI_TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                    "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")
LINGJUN_FILES = ("job.csv", "worker.csv", "topo.csv")
LINGJUN_JOB_COLUMNS = ("job_name", "gmt_job_submitted", "gmt_job_running", "gmt_job_finished")
LINGJUN_WORKER_COLUMNS = ("job_name", "host_ip", "RES")
LINGJUN_TOPO_COLUMNS = ("ip", "ASW", "PSW", "DSW")
GPUS_PER_HOST = 8  # Lingjun hosts: 8 GPUs each

Row = tuple[str, float, int, float]  # (job_id, submit_s, gpus, duration_s)


# ---------------------------------------------------------------------------- CSV helpers


def _records(path: Path, what: str, columns: Sequence[str], header: bool = True
             ) -> Iterator[tuple[str, dict[str, str]]]:
    """(``"FILE line N"``, row) for every data row of the CSV ``path``, which is ``what``.

    With ``header`` the file's first row must name every one of ``columns``; without, rows are
    read as ``columns`` in order. A row with too few or too many fields is refused."""
    try:
        with trace_read_errors(path, "CSV"), path.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            names = next(reader, []) if header else list(columns)
            missing = [c for c in columns if c not in names]
            if missing:
                raise FabricLabError(f"{path} is not {what}: it has no column {missing[0]}")
            for row in reader:
                if not row:
                    continue  # a blank line
                where = f"{path} line {reader.line_num}"
                if len(row) != len(names):
                    raise FabricLabError(f"{where}: {len(row)} fields where {what} has "
                                         f"{len(names)}")
                yield where, dict(zip(names, row, strict=True))
    except csv.Error as exc:
        raise FabricLabError(f"{path} is not a CSV file: {exc}") from None


def _number(rec: dict[str, str], column: str, where: str, empty: float | None = None) -> float:
    """The finite, non-negative number in ``column``; ``empty`` stands for an empty cell
    (None: an empty cell is refused)."""
    text = (rec[column] or "").strip()
    if not text and empty is not None:
        return empty
    if not text:
        raise FabricLabError(f"{where}: {column} is empty")
    try:
        value = float(text)
    except ValueError:
        raise FabricLabError(f"{where}: {column} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise FabricLabError(f"{where}: {column} {text!r} is not a number of 0 or more")
    return value


def _count(rec: dict[str, str], column: str, where: str, empty: float | None = None) -> int:
    """The whole number in ``column`` ('8' and '8.0' alike)."""
    value = _number(rec, column, where, empty)
    if value != int(value):
        raise FabricLabError(f"{where}: {column} {rec[column].strip()!r} is not a whole number")
    return int(value)


def _when(rec: dict[str, str], column: str, where: str) -> float | None:
    """Seconds since the epoch in ``column`` (a number or a date); None for an empty cell."""
    text = (rec.get(column) or "").strip()
    if not text:
        return None
    seconds = seconds_of(text)
    if seconds is None:
        raise FabricLabError(f"{where}: {column} {text!r} is neither seconds nor a date")
    return seconds


# ---------------------------------------------------------------------------- Acme


def read_acme(path: str | Path, seed: int = 0, link_bps: float = DEFAULT_LINK_BPS
              ) -> list[TraceJob]:
    """Acme ``trace_seren.csv`` / ``trace_kalos.csv``: see the module docstring."""
    path = Path(path)
    rows: list[Row] = []
    for where, rec in _records(path, "an Acme job trace (trace_seren.csv, trace_kalos.csv)",
                               ACME_COLUMNS):
        gpus = _count(rec, "gpu_num", where)
        duration_s = _number(rec, "duration", where, empty=0.0)
        if gpus < 1 or duration_s <= 0:
            continue
        submit_s = _when(rec, "submit_time", where)
        if submit_s is None:
            raise FabricLabError(f"{where}: submit_time is empty")
        rows.append((rec["job_id"].strip(), submit_s, gpus, duration_s))
    return jobs_from_rows(rows, seed, link_bps)


# ---------------------------------------------------------------------------- Alibaba PAI 2020


def read_pai(path: str | Path, seed: int = 0, link_bps: float = DEFAULT_LINK_BPS
             ) -> list[TraceJob]:
    """Alibaba PAI 2020: a directory with ``pai_job_table.csv`` and ``pai_task_table.csv``,
    or a task table alone (see the module docstring)."""
    path = Path(path)
    task_table = path / PAI_TASK_TABLE if path.is_dir() else path
    submit_s: dict[str, float] = {}
    if path.is_dir():
        for where, rec in _records(path / PAI_JOB_TABLE, "a PAI job table", PAI_JOB_COLUMNS,
                                   header=False):
            when = _when(rec, "start_time", where)
            if when is not None:
                submit_s[rec["job_name"].strip()] = when
    gpus: dict[str, int] = {}
    first_s: dict[str, float] = {}
    last_s: dict[str, float] = {}
    for where, rec in _records(task_table, "a PAI task table", PAI_TASK_COLUMNS, header=False):
        instances = _count(rec, "inst_num", where)
        per_instance = math.ceil(_number(rec, "plan_gpu", where, empty=0.0) / 100)
        start, end = _when(rec, "start_time", where), _when(rec, "end_time", where)
        if start is None or end is None:
            continue  # the task never ran, or had not ended when the trace was taken
        job = rec["job_name"].strip()
        gpus[job] = gpus.get(job, 0) + instances * per_instance
        first_s[job] = min(first_s.get(job, start), start)
        last_s[job] = max(last_s.get(job, end), end)
    rows: list[Row] = [(job, submit_s.get(job, first_s[job]), n, last_s[job] - first_s[job])
                       for job, n in gpus.items() if n >= 1 and last_s[job] > first_s[job]]
    return jobs_from_rows(rows, seed, link_bps)


# ---------------------------------------------------------------------------- Alibaba Lingjun 2023


@dataclass(frozen=True)
class HostSwitches:
    """A host's switches in ``topo.csv``: its leaf (ASW), aggregation (PSW) and core (DSW)."""

    asw: str
    psw: str
    dsw: str


@dataclass(frozen=True)
class TracePlacement:
    """Where a trace's jobs ran: ``gpus_of[job][host]`` GPUs of each job on each host (jobs
    whose hosts are all in ``topo.csv``), and each host's switches (``switches[host]``)."""

    gpus_of: dict[str, dict[str, int]]
    switches: dict[str, HostSwitches]
    gpus_per_host: int = GPUS_PER_HOST

    def fabric_slots(self, leaves: int, hosts_per_leaf: int) -> dict[str, tuple[int, int]]:
        """Each trace host's (leaf, first slot) on a leaf-spine fabric of one GPU per slot.

        The trace's leaf switches (ASW), in natural order (S2 before S10), become leaves
        0, 1, ...; the k-th host of an ASW in ``topo.csv`` order holds slots
        k x gpus_per_host .. (k + 1) x gpus_per_host - 1 of its leaf. The aggregation and core
        tiers (PSW, DSW) are not mapped: the simulated fabric is two-tier, every leaf reaching
        every spine. A fabric too small for the trace is refused in one sentence."""
        by_asw: dict[str, list[str]] = {}
        for host, sw in self.switches.items():
            by_asw.setdefault(sw.asw, []).append(host)
        order = sorted(by_asw, key=_natural)
        widest = max((len(h) for h in by_asw.values()), default=0) * self.gpus_per_host
        if len(order) > leaves or widest > hosts_per_leaf:
            raise FabricLabError(
                f"--placement trace cannot map the trace onto this fabric: its topo.csv has "
                f"{len(order)} leaf switches (ASW) holding up to {widest} GPUs each "
                f"({self.gpus_per_host} per host), so it needs --leaves {len(order)} "
                f"--hosts-per-leaf {widest} or more (given {leaves} and {hosts_per_leaf})")
        return {host: (leaf, k * self.gpus_per_host)
                for leaf, asw in enumerate(order) for k, host in enumerate(by_asw[asw])}


@dataclass(frozen=True)
class LingjunTrace:
    """The jobs of a Lingjun trace and where they ran."""

    jobs: list[TraceJob]
    placement: TracePlacement


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders the numbers inside names by value: S2 < S10."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name) if p)


def read_lingjun(path: str | Path, seed: int = 0, link_bps: float = DEFAULT_LINK_BPS
                 ) -> LingjunTrace:
    """Alibaba Lingjun 2023: a directory with ``job.csv``, ``worker.csv`` and ``topo.csv``
    (see the module docstring)."""
    path = Path(path)
    switches: dict[str, HostSwitches] = {}
    for where, rec in _records(path / "topo.csv", "a Lingjun topo.csv", LINGJUN_TOPO_COLUMNS):
        host, asw = rec["ip"].strip(), rec["ASW"].strip()
        if not host or not asw:
            raise FabricLabError(f"{where}: ip or ASW is empty")
        if host in switches:
            raise FabricLabError(f"{where}: host {host} is listed twice")
        switches[host] = HostSwitches(asw, rec["PSW"].strip(), rec["DSW"].strip())

    runs: dict[str, tuple[float, float]] = {}  # job -> (submit_s, duration_s)
    for where, rec in _records(path / "job.csv", "a Lingjun job.csv", LINGJUN_JOB_COLUMNS):
        job = rec["job_name"].strip()
        submit_s = _when(rec, "gmt_job_submitted", where)
        start_s = _when(rec, "gmt_job_running", where)
        end_s = _when(rec, "gmt_job_finished", where)
        if end_s is None:
            end_s = _when(rec, "gmt_job_stopped", where)
        if submit_s is None:
            raise FabricLabError(f"{where}: gmt_job_submitted is empty")
        if start_s is not None and end_s is not None and end_s > start_s:
            runs[job] = (submit_s, end_s - start_s)

    workers: dict[tuple[str, str], tuple[str, int, str]] = {}  # (job, worker) -> host, GPUs
    for where, rec in _records(path / "worker.csv", "a Lingjun worker.csv",
                               LINGJUN_WORKER_COLUMNS):
        job, host = rec["job_name"].strip(), rec["host_ip"].strip()
        name = (rec.get("worker_name") or "").strip() or where  # unnamed: every row its own
        workers[(job, name)] = (host, _worker_gpus(rec["RES"], where), where)

    gpus: dict[str, int] = {}
    gpus_of: dict[str, dict[str, int]] = {}
    off_topo: set[str] = set()  # jobs with a worker on a host topo.csv does not list
    for (job, _name), (host, n, where) in workers.items():
        if n == 0 or job not in runs:
            continue
        gpus[job] = gpus.get(job, 0) + n
        if host not in switches:
            off_topo.add(job)
            continue
        on_host = gpus_of.setdefault(job, {})
        on_host[host] = on_host.get(host, 0) + n
        if on_host[host] > GPUS_PER_HOST:
            raise FabricLabError(f"{where}: job {job} holds {on_host[host]} GPUs on host "
                                 f"{host}, which has {GPUS_PER_HOST}")
    for job in off_topo:
        gpus_of.pop(job, None)
    rows: list[Row] = [(job, runs[job][0], n, runs[job][1]) for job, n in gpus.items()]
    jobs = jobs_from_rows(rows, seed, link_bps)
    return LingjunTrace(jobs, TracePlacement(gpus_of, switches))


def _worker_gpus(res: str, where: str) -> int:
    """The ``nvidia.com/gpu`` count of a worker's ``RES`` JSON (0 when it names none)."""
    try:
        resources = json.loads(res or "{}")
    except json.JSONDecodeError:
        raise FabricLabError(f"{where}: RES {res!r} is not JSON") from None
    if not isinstance(resources, dict):
        raise FabricLabError(f"{where}: RES {res!r} is not a JSON object")
    text = str(resources.get("nvidia.com/gpu", 0)).strip()
    if not text.isdigit():
        raise FabricLabError(f"{where}: RES nvidia.com/gpu {text!r} is not a whole number")
    return int(text)


def files_read(kind: str, path: Path) -> list[Path]:
    """The files a trace ``kind`` reads at ``path``, for its digest in summary.json."""
    if kind == "lingjun":
        return [path / name for name in LINGJUN_FILES]
    if kind == "pai" and path.is_dir():
        return [path / PAI_JOB_TABLE, path / PAI_TASK_TABLE]
    return [path]
