"""What each job of an emulated run should have taken: the simulator's prediction on the paths
its flows actually took.

The simulator (:class:`testbed.sim.backend.SimRunner`) replays the same experiment — the
same jobs on the hosts the controller gave them, the same legs (each solo baseline, then all
jobs together), each collective of the jobs together starting no earlier after the first job's
first one than it did in the run (workers take a moment to start, and a job's barrier between
collectives takes its own time, so jobs that share a link drift apart and one may have it
alone for a while) — with its max-min rate engine, and every connection of a host pair
the spines counted (``paths.json``, :mod:`testbed.emulator.path_reader`) takes the spine that
carried the pair's bytes, not the one the policy or a hash would pick. Its run directory is
kept as ``prediction/`` inside the emulated run, and the times per job as ``prediction.json``,
so the prediction can be read, judged again and re-made.

A job the model does not cover is listed with why: a program (``command``), a transport whose
own cost the simulator does not model, or static rules on a fabric where hosts have several
paths (the simulator refuses to guess which the rules take: :class:`SimRunner`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from analysis.job_invariant import PREDICTION_FILE, prediction_record
from testbed.core.atomic import write_json
from testbed.core.errors import FabricLabError
from testbed.core.experiment import Experiment
from testbed.core.jobs import JobRun, ResolvedJob
from testbed.core.registry import TRANSPORTS, RegistryError
from testbed.core.topology import build_plan

PREDICTION_DIR = "prediction"


def not_modelled(job: JobRun) -> str | None:
    """Why the simulator cannot predict ``job``'s times, or None."""
    spec = job.spec
    if spec.workload.kind == "command":
        return "it runs a program, whose own pace the simulator does not model"
    try:
        wire = TRANSPORTS.get(spec.transport).wire_speed
    except RegistryError:
        wire = False
    if not wire:
        return (f"its transport {spec.transport} costs time of its own that the simulator "
                "does not model")
    return None


def issue_times(run_dir: Path, jobs: list[str]) -> dict[str, list[float]]:
    """Per job of ``jobs`` that left traces: when each of its collectives (warm-up included,
    in the order it ran them) began on its earliest rank (``time.monotonic()`` s)."""
    from testbed.core.traces import read_table

    found = {}
    for name in jobs:
        try:
            t = read_table(run_dir / "jobs" / name, "collectives").to_pandas()
        except (OSError, ValueError):
            continue
        if len(t):
            found[name] = [float(s) for s in t.groupby("coll")["start"].min().sort_index()]
    return found


def predict(exp: Experiment, jobs: list[JobRun], paths: dict[str, Any], run_dir: Path,
            step_latency_s: float = 0.0) -> dict[str, dict[str, Any]]:
    """Per job that ran (solo baselines included): ``{"times_s": {(size, in_place): s}}``
    from the simulator on the run's observed paths (each step or slice a rank sends
    ``step_latency_s`` later: the workers' latency per step, where the run measured it), or
    ``{"why_not": sentence}``; recorded as the run's ``prediction.json``
    (:func:`analysis.job_invariant.prediction_record`), which the job invariant reads."""
    out = _predict(exp, jobs, paths, run_dir, step_latency_s)
    write_json(run_dir / PREDICTION_FILE, prediction_record(out))
    return out


def _predict(exp: Experiment, jobs: list[JobRun], paths: dict[str, Any], run_dir: Path,
             step_latency_s: float) -> dict[str, dict[str, Any]]:
    from testbed.sim.backend import SimRunner

    base = [j for j in jobs if j.solo_of is None]
    why = {j.name: not_modelled(j) for j in base}
    placed = [j for j in base if why[j.name] is None and j.hosts]
    out: dict[str, dict[str, Any]] = {}
    for j in jobs:
        reason = why.get(j.solo_of or j.name)
        if reason:
            out[j.name] = {"why_not": reason}
    if not placed:
        return out
    began = issue_times(run_dir, [j.name for j in placed])
    t0 = min((starts[0] for starts in began.values()), default=0.0)
    issued = {name: [round(s - t0, 6) for s in starts] for name, starts in began.items()}
    specs = [j.spec.model_copy(update={"hosts": list(j.hosts), "hosts_wanted": None,
                                       "start_offset_s": issued.get(j.name, [0.0])[0]})
             for j in placed]
    model = exp.model_copy(update={"jobs": specs, "calibrate": False})
    target = run_dir / PREDICTION_DIR
    shutil.rmtree(target, ignore_errors=True)
    try:
        sim_dir = SimRunner(model, target, step_latency_s=step_latency_s,
                            paths=paths.get("legs") or {}, issued=issued).run()
        records = json.loads((sim_dir / "jobs.json").read_text())
    except (FabricLabError, OSError, ValueError) as exc:
        return out | {j.name: {"why_not": f"the simulator could not replay the run: {exc}"}
                      for j in jobs if j.name not in out}
    for name, rec in replay_times(records, sim_dir.relative_to(run_dir)).items():
        out.setdefault(name, rec)
    return out


def probe_s(exp: Experiment, job: JobRun, probe: ResolvedJob, step_latency_s: float,
            out: Path) -> float:
    """The simulator's time for ``probe`` (``job``'s step-latency probe: its hosts, algorithm
    and schedule at another size) alone on ``exp``'s fabric, ``step_latency_s`` before each
    step a rank sends: its collective time (the mean of each iteration's slowest rank), as
    the emulator's results give it. The simulator's run is kept in ``out``."""
    from testbed.sim.backend import SimRunner

    spec = job.spec.model_copy(update={
        "name": probe.name, "workload": probe.workload, "hosts": list(probe.hosts),
        "hosts_wanted": None, "start_offset_s": 0.0})
    model = exp.model_copy(update={"jobs": [spec], "calibrate": False, "solo_baselines": False})
    shutil.rmtree(out, ignore_errors=True)
    sim_dir = SimRunner(model, out, step_latency_s=step_latency_s).run()
    records = json.loads((sim_dir / "jobs.json").read_text())
    return max(replay_times(records, sim_dir)[probe.name]["times_s"].values())


def replay_times(records: list[dict[str, Any]], run: Path) -> dict[str, dict[str, Any]]:
    """Per job of a replay's ``jobs.json`` records: ``times_s`` ({(size, in_place): s}) and
    ``run``, the replay's directory as given."""
    return {rec["name"]: {"times_s": {(int(r["size"]), bool(r.get("in_place", True))):
                                      r["time_us"] / 1e6 for r in rec.get("results") or []},
                          "run": str(run)} for rec in records}


def repredict(run_dir: Path) -> dict[str, dict[str, Any]]:
    """:func:`predict` again for a recorded emulated run (its ``spec.yaml``, ``jobs.json``,
    ``paths.json``, traces and the latency per step ``fidelity.json`` records, if measured),
    e.g. after the model changed; rewrites its ``prediction/``."""
    import yaml

    from testbed.core.experiment import expand
    from testbed.core.jobs import resolve

    def given(x: Any) -> Any:  # spec.yaml lists every field, unset ones as null
        if isinstance(x, dict):
            return {k: given(v) for k, v in x.items() if v is not None}
        return [given(v) for v in x] if isinstance(x, list) else x

    data = given(yaml.safe_load((run_dir / "spec.yaml").read_text()))
    if (data.get("hosts") or {}).get("runtime") == "namespace":
        del data["hosts"]  # the container fields' defaults, which namespace hosts refuse
    if data.get("preset") and data.get("fabric"):
        del data["preset"]  # its name, kept beside the fabric and rate_scale it expanded to
    (exp,) = expand(data, str(run_dir))
    plan = build_plan(exp.fabric, exp.rate_scale)
    specs = {j.name: j for j in exp.jobs}
    runs = []
    for rec in json.loads((run_dir / "jobs.json").read_text()):
        spec = specs.get(rec.get("solo_of") or rec["name"])
        if spec is None or not rec.get("hosts"):
            continue
        run = JobRun(rec["name"], spec, resolve(spec, plan, rec["hosts"]),
                     solo_of=rec.get("solo_of"))
        runs.append(run)
    paths_file = run_dir / "paths.json"
    paths = json.loads(paths_file.read_text()) if paths_file.exists() else {}
    fidelity = run_dir / "fidelity.json"
    measured = (json.loads(fidelity.read_text()).get("step_latency")
                if fidelity.exists() else None) or {}
    return predict(exp, runs, paths, run_dir, measured.get("step_latency_s", 0.0))
