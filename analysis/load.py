"""Load one run directory (``results/<timestamp>-<name>/``) into a :class:`Run`.

Required: the path is a directory holding at least one of ``spec.yaml``, ``topology.json`` or
``jobs.json``, or the ``config-rank*.json`` and traces ``fabriclab allreduce --out`` keeps (one
job over loopback, no fabric: :func:`_loopback_job`). Everything else is optional and loads as
empty (a crashed run still gets a report): missing traces give empty DataFrames with the right
columns, a missing ``fidelity.json`` gives ``None``. Worker traces are read with
:func:`testbed.core.traces.read_table`; a rank that left only a ``*.partial.parquet`` snapshot
(it crashed) is read from that snapshot and named in :attr:`Run.notes`.

``jobs.json`` is read through the job contract: :attr:`Run.resolved` holds every placed job as
the typed :class:`~testbed.core.jobs.ResolvedJob` its workers and the simulator ran
(:func:`resolved_jobs`); :attr:`Run.jobs` keeps each record's run facts (status, times,
results). A run directory written by an older version is brought to today's names and fields
by :mod:`analysis.compat` as it is read, and nowhere else: a :class:`Run` is always current
(docs/results.md).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import yaml

from analysis import compat
from testbed.core.errors import FabricLabError
from testbed.core.experiment import CollectiveOptions
from testbed.core.jobs import ResolvedJob
from testbed.core.samples import CPU_SAMPLE_SCHEMA, LINK_SAMPLE_SCHEMA, QDISC_SAMPLE_SCHEMA
from testbed.core.scaling import UNSCALED
from testbed.core.traces import COLLECTIVE_SCHEMA, PHASE_SCHEMA, conform, read_table

MARKERS = ("spec.yaml", "topology.json", "jobs.json", "calibration.json", "run.json")
LINK_COLUMNS = LINK_SAMPLE_SCHEMA.names
CPU_COLUMNS = CPU_SAMPLE_SCHEMA.names
ITERATION_COLUMNS = ["job", "rank", "iteration", "warmup", "start", "end",
                     "iteration_s", "compute_s", "exposed_comm_s", "compute_share", "bytes",
                     "exposed_dim_s"]

# Accepted spellings of the DNN iteration columns (after lower-casing, non-alphanumerics -> _).
_ITERATION_ALIASES = {
    "iteration_s": ("iteration_s", "iteration_time", "iteration_time_s", "iter_time", "time"),
    "compute_s": ("compute_s", "compute_time", "compute_time_s", "compute"),
    "exposed_comm_s": ("exposed_comm_s", "exposed_comm", "exposed_communication",
                       "exposed_communication_s", "exposed_comm_time", "exposed"),
    "compute_share": ("compute_share", "compute_fraction", "compute_ratio"),
}
_TIMESTAMP = re.compile(r"^\d{8}[-T_]?\d{4,6}(?:[-_.]\d+)?[-_]")


@dataclass
class Run:
    """A parsed run directory. Times are ``time.monotonic()`` seconds, as recorded."""

    path: Path
    name: str  # the directory name
    label: str  # short name for tables: the spec's name, else the directory name sans timestamp
    spec: dict[str, Any]
    env: dict[str, Any]
    topology: dict[str, Any]
    jobs: list[dict[str, Any]]
    phases: pd.DataFrame  # PHASE_SCHEMA columns + job
    collectives: pd.DataFrame  # COLLECTIVE_SCHEMA columns + job
    iterations: pd.DataFrame  # ITERATION_COLUMNS (empty when no DNN job wrote them)
    links: pd.DataFrame  # LINK_COLUMNS: cumulative byte counters per link direction
    cpu: pd.DataFrame  # CPU_COLUMNS
    qdisc: pd.DataFrame  # QDISC_SAMPLE_SCHEMA: egress queues (empty for runs without them)
    fidelity: dict[str, Any] | None
    controller_log: str | None = None
    notes: list[str] = field(default_factory=list)
    calibration: dict[str, Any] | None = None  # calibration.json of a `fabriclab calibrate` dir
    # emulated rate ÷ real rate of every rate in the run (testbed.core.scaling); 1: unscaled
    rate_scale: float = UNSCALED
    # run.json: how the run went as its runner recorded it (status, error, the backend's own
    # facts); None for runs older than the file
    record: dict[str, Any] | None = None
    # summary.json as the run wrote it (None if it has none): what reports read
    summary: dict[str, Any] | None = None
    # every placed job of jobs.json as its typed contract, by name (resolved_jobs)
    resolved: dict[str, ResolvedJob] = field(default_factory=dict)

    def job(self, name: str) -> dict[str, Any]:
        for j in self.jobs:
            if j.get("name") == name:
                return j
        raise KeyError(name)

    @property
    def job_names(self) -> list[str]:
        return [str(j["name"]) for j in self.jobs]

    def window(self) -> tuple[float, float] | None:
        """[first job start, last job end], else the span of the link samples, else None."""
        starts = [j["start"] for j in self.jobs if _is_num(j.get("start"))]
        ends = [j["end"] for j in self.jobs if _is_num(j.get("end"))]
        if starts and ends and max(ends) > min(starts):
            return float(min(starts)), float(max(ends))
        if len(self.links):
            return float(self.links["time"].min()), float(self.links["time"].max())
        return None

    def t0(self) -> float:
        """The origin of every time axis: the earliest recorded instant of the run."""
        cands = [j["start"] for j in self.jobs if _is_num(j.get("start"))]
        for df, col in ((self.links, "time"), (self.phases, "start"),
                        (self.collectives, "start")):
            if len(df):
                cands.append(float(df[col].min()))
        return float(min(cands)) if cands else 0.0


def _is_num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and x == x


def _read_json(path: Path, default: Any) -> Any:
    if not path.exists():
        return default
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FabricLabError(f"cannot read {path}: {exc}") from None


def _read_parquet(path: Path, columns: list[str]) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in columns})
    try:
        return pq.read_table(path).to_pandas()
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise FabricLabError(f"cannot read {path}: {exc}") from None


def resolved_jobs(records: list[dict[str, Any]], notes: list[str]) -> dict[str, ResolvedJob]:
    """Every placed job of ``records`` (jobs.json, brought up to date by
    :func:`analysis.compat.upgrade_job`) as the :class:`ResolvedJob` it ran, by name. A knob
    the record leaves null (one that means nothing for its workload) takes its default; a job
    never placed (no hosts) has none; a record the contract refuses is named in ``notes``."""
    fields = set(ResolvedJob.model_fields)
    out = {}
    for rec in records:
        if not rec.get("hosts") or not rec.get("dims"):
            continue
        data = {k: v for k, v in rec.items() if k in fields
                and not (v is None and k in CollectiveOptions.model_fields)}
        try:
            out[str(rec["name"])] = ResolvedJob.model_validate(data)
        except ValueError as exc:
            notes.append(f"job {rec['name']}: its jobs.json record is not a job this fabriclab "
                         f"reads ({str(exc).splitlines()[0]})")
    return out


def _label(name: str, spec: dict[str, Any]) -> str:
    if isinstance(spec.get("name"), str) and spec["name"]:
        return spec["name"]
    return _TIMESTAMP.sub("", name) or name


def _traces(job_dir: Path, kind: str, notes: list[str], job: str) -> pd.DataFrame:
    schema = PHASE_SCHEMA if kind == "phases" else COLLECTIVE_SCHEMA
    tables = [read_table(job_dir, kind)]  # complete files only; none if the dir is missing
    complete = {p.name.removesuffix(".parquet") for p in job_dir.glob(f"{kind}-rank*.parquet")}
    for part in sorted(job_dir.glob(f"{kind}-rank*.partial.parquet")):
        final = part.name.removesuffix(".partial.parquet")
        if final not in complete:
            tables.append(conform(pq.read_table(part), schema))
            notes.append(f"job {job}: {final} is a partial snapshot (the worker did not finish)")
    df = pd.concat([t.to_pandas() for t in tables], ignore_index=True)
    df.insert(0, "job", job)
    return df


def _norm(col: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", col.lower()).strip("_")


def _iterations(job_dir: Path, job: str) -> pd.DataFrame | None:
    files = [f for f in sorted(job_dir.glob("iterations-rank*.parquet"))
             if not f.name.endswith(".partial.parquet")]
    if not files:
        return None
    raw = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    raw.columns = [_norm(c) for c in raw.columns]
    out = pd.DataFrame({"job": job}, index=raw.index)
    for col in ("rank", "iteration", "warmup", "start", "end", "bytes"):
        out[col] = raw.get(col)
    for col, aliases in _ITERATION_ALIASES.items():
        found = next((a for a in aliases if a in raw), None)
        out[col] = raw[found].astype(float) if found else float("nan")
    if out["iteration_s"].isna().all() and {"start", "end"} <= set(raw):
        out["iteration_s"] = raw["end"].astype(float) - raw["start"].astype(float)
    if out["compute_share"].isna().all():
        out["compute_share"] = out["compute_s"] / out["iteration_s"]
    out["warmup"] = out["warmup"].fillna(False).astype(bool)
    # a training workload's exposed communication per logical dimension (a list, or None)
    out["exposed_dim_s"] = raw.get("exposed_dim")
    return out


def _loopback_job(root: Path) -> dict[str, Any] | None:
    """The job record of a ``fabriclab allreduce --out`` directory (the resolved job in rank
    0's config, with the traces' time span), or None when ``root`` is not one."""
    config = _read_json(root / "config-rank0.json", None)
    job = config.get("job") if isinstance(config, dict) else None
    if not isinstance(job, dict) or "name" not in job:
        return None
    colls = read_table(root, "collectives").to_pandas()
    world = len(job.get("hosts") or [])
    finished = colls["rank"].nunique() == world if len(colls) else False
    return {**job, "name": str(job["name"]), "solo_of": None, "policy": None,
            "start": float(colls["start"].min()) if len(colls) else None,
            "end": float((colls["start"] + colls["time"]).max()) if len(colls) else None,
            "status": "ok" if finished else "incomplete"}


def load_run(path: str | Path) -> Run:
    """Parse a run directory; raise :class:`FabricLabError` if ``path`` is not one."""
    root = Path(path)
    if not root.exists():
        raise FabricLabError(f"{path} does not exist")
    loopback = _loopback_job(root) if root.is_dir() else None
    if loopback is None and (not root.is_dir()
                             or not any((root / m).exists() for m in MARKERS)):
        raise FabricLabError(
            f"{path} is not a run directory (it has none of {', '.join(MARKERS)}, nor the "
            "config-rank0.json of fabriclab allreduce --out)"
        )
    notes: list[str] = []
    record = _mapping(_read_json(root / "run.json", None))
    compat.schema(record, notes)
    spec: dict[str, Any] = {}
    if (root / "spec.yaml").exists():
        try:
            spec = yaml.safe_load((root / "spec.yaml").read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise FabricLabError(f"cannot read {root / 'spec.yaml'}: {exc}") from None
        spec = compat.upgrade_spec(spec) if isinstance(spec, dict) else {}
    topology = compat.upgrade_topology(_read_json(root / "topology.json", {}))
    jobs = _read_json(root / "jobs.json", [loopback] if loopback else [])
    if not isinstance(jobs, list):
        raise FabricLabError(f"{root / 'jobs.json'} is not a list of jobs")
    jobs = [compat.upgrade_job(j, topology, lambda name=j["name"]: _read_json(
                root / "jobs" / str(name) / "config-rank0.json", None))
            for j in jobs if isinstance(j, dict) and "name" in j]
    known = {str(j["name"]) for j in jobs}
    jobs_dir = root / "jobs"
    if jobs_dir.is_dir():  # trace directories the job list does not mention still count
        for d in sorted(jobs_dir.iterdir()):
            if d.is_dir() and d.name not in known:
                jobs.append({"name": d.name, "status": "incomplete"})
                notes.append(f"job {d.name} has traces but is not in jobs.json")
    phases, colls, iters = [], [], []
    for j in jobs:
        name = str(j["name"])
        jd = root if loopback else jobs_dir / name
        phases.append(_traces(jd, "phases", notes, name))
        colls.append(_traces(jd, "collectives", notes, name))
        it = _iterations(jd, name) if jd.is_dir() else None
        if it is not None:
            iters.append(it)
    empty_p = PHASE_SCHEMA.empty_table().to_pandas().assign(job="")
    empty_c = COLLECTIVE_SCHEMA.empty_table().to_pandas().assign(job="")
    links = _read_parquet(root / "link_samples.parquet", LINK_COLUMNS).rename(
        columns=compat.OLD_LINK_COLUMNS)
    cpu = _read_parquet(root / "cpu_samples.parquet", CPU_COLUMNS)
    qdisc = _read_parquet(root / "qdisc_samples.parquet", QDISC_SAMPLE_SCHEMA.names)
    calibration = _read_json(root / "calibration.json", None)
    calibration = calibration if isinstance(calibration, dict) else None
    fidelity = _read_json(root / "fidelity.json",
                          {"verdict": "loopback", "reasons": []} if loopback
                          else _calibration_fidelity(calibration))
    log = root / "controller.log"
    return Run(
        path=root,
        name=root.resolve().name,
        label=_label(root.resolve().name, spec),
        spec=spec,
        env=_read_json(root / "env.json", {}),
        topology=topology,
        jobs=jobs,
        phases=pd.concat(phases, ignore_index=True) if phases else empty_p,
        collectives=pd.concat(colls, ignore_index=True) if colls else empty_c,
        iterations=(pd.concat(iters, ignore_index=True) if iters
                    else pd.DataFrame({c: pd.Series(dtype="float64")
                                       for c in ITERATION_COLUMNS})),
        links=links,
        cpu=cpu,
        qdisc=qdisc,
        fidelity=compat.upgrade_fidelity(fidelity),
        controller_log=log.read_text(errors="replace") if log.exists() else None,
        notes=notes,
        calibration=calibration,
        rate_scale=compat.rate_scale(topology, calibration or {}),
        record=record,
        summary=_mapping(_read_json(root / "summary.json", None)),
        resolved=resolved_jobs(jobs, notes),
    )


def _mapping(x: Any) -> dict[str, Any] | None:
    return x if isinstance(x, dict) else None


def _calibration_fidelity(calibration: dict[str, Any] | None) -> dict[str, Any] | None:
    """A calibration directory's fidelity record: the calibration's own verdict and reasons."""
    if calibration is None:
        return None
    return {"verdict": calibration.get("verdict"),
            "reasons": list(calibration.get("failures") or []),
            "cpu_idle_min": calibration.get("cpu_idle_min"),
            "cpu_idle_mean": calibration.get("cpu_idle_mean"), "links": []}
