"""What each job of an emulated run should have taken: the simulator's prediction on the paths
its flows actually took.

The simulator (:class:`testbed.sim.backend.SimRunner`) replays the same experiment — the
same jobs on the hosts the controller gave them, the same legs (each solo baseline, then all
jobs together) — with its max-min rate engine, and every connection of a host pair the
spines counted (``paths.json``, :mod:`testbed.emulator.path_reader`) takes the spine that
carried the pair's bytes, not the one the policy or a hash would pick. Its run directory is
kept as ``prediction/`` inside the emulated run, so the prediction can be read and re-made.

A job the model does not cover is listed with why: a program (``command``), a transport whose
own cost the simulator does not model, or a fabric without a routing policy (``static``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError
from testbed.core.experiment import STATIC_POLICY, Experiment
from testbed.core.jobs import JobRun
from testbed.core.registry import TRANSPORTS, RegistryError

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


def predict(exp: Experiment, jobs: list[JobRun], paths: dict[str, Any], run_dir: Path
            ) -> dict[str, dict[str, Any]]:
    """Per job that ran (solo baselines included): ``{"times_s": {(size, in_place): s}}``
    from the simulator on the run's observed paths, or ``{"why_not": sentence}``."""
    from testbed.sim.backend import SimRunner

    base = [j for j in jobs if j.solo_of is None]
    why = {j.name: not_modelled(j) for j in base}
    placed = [j for j in base if why[j.name] is None and j.hosts]
    out: dict[str, dict[str, Any]] = {}
    for j in jobs:
        reason = why.get(j.solo_of or j.name)
        if reason:
            out[j.name] = {"why_not": reason}
    if exp.policy == STATIC_POLICY and exp.fabric.kind != "multidim":
        return out | {j.name: {"why_not": "no routing policy runs (static): the simulator "
                               "has no paths to replay it on"} for j in jobs if j.name not in out}
    if not placed:
        return out
    specs = [j.spec.model_copy(update={"hosts": list(j.hosts), "hosts_wanted": None})
             for j in placed]
    model = exp.model_copy(update={"jobs": specs, "calibrate": False})
    target = run_dir / PREDICTION_DIR
    shutil.rmtree(target, ignore_errors=True)
    try:
        sim_dir = SimRunner(model, target, paths=paths.get("legs") or {}).run()
        records = json.loads((sim_dir / "jobs.json").read_text())
    except (FabricLabError, OSError, ValueError) as exc:
        return out | {j.name: {"why_not": f"the simulator could not replay the run: {exc}"}
                      for j in jobs if j.name not in out}
    for rec in records:
        times = {(int(r["size"]), bool(r.get("in_place", True))): r["time_us"] / 1e6
                 for r in rec.get("results") or []}
        out.setdefault(rec["name"], {"times_s": times,
                                     "run": str(sim_dir.relative_to(run_dir))})
    return out
