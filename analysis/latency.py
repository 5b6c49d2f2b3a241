"""The latency headline (``experiments/latency.yaml``, #42): where halving-doubling stops
beating a ring, as the emulator measured it, as the simulator predicts it and as the model
(α-β) puts it, side by side, for every fabric on which a report has both a ring run and a
halving-doubling run (and, where there is one, a chunk-scheduled run beside them).

Each figure is read from what the runs recorded, never recomputed here:

* the emulator's: an emulated run's own collective times (``summary.json``);
* the simulator's: a simulated run's own times, or an emulated run's ``prediction/``
  (the simulator replaying it on the paths its flows took,
  :mod:`testbed.emulator.prediction`), its ``jobs.json`` results;
* the model's: the job's ``model_s`` in ``jobs.json`` (:func:`workloads.model.job_model_s`,
  what the backend recorded when it placed the job).

The crossover itself is :func:`analysis.crossover.crossover`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis import metrics
from analysis.compare import Headline, describe_setup
from analysis.crossover import crossover, factor
from analysis.load import Run
from testbed.core.units import format_size

RING, HD = "ring", "halving-doubling"
# an emulated run's prediction/<timestamp>-<name>/ (docs/results.md; named in
# testbed.emulator.prediction, which analysis does not import)
PREDICTION_DIR = "prediction"
BACKENDS = ("emulator", "simulator", "model")
_NAMES = {"emulator": "emulator", "simulator": "simulator", "model": "model (α-β)"}


def tenant_job(run: Run) -> dict[str, Any] | None:
    """The run's first job that is not a solo baseline (its jobs.json record), if any."""
    return next((j for j in run.jobs if not j.get("solo_of")), None)


def _simulated(run: Run) -> bool:
    return (run.fidelity or {}).get("verdict") == "simulated"


def measured_s(run: Run, job: str) -> dict[int, float]:
    """A job's mean collective time per size as the run measured (or simulated) it."""
    sizes = (((run.summary or {}).get("jobs") or {}).get(job) or {}).get("sizes") or {}
    return {int(s): float(t) for s, v in sizes.items()
            if (t := metrics._num(v.get("collective_s"))) is not None}


def predicted_s(run_dir: Path, job: str) -> dict[int, float]:
    """A job's times per size in an emulated run's ``prediction/<run>/jobs.json`` (the newest
    such run; empty if none)."""
    found = sorted((run_dir / PREDICTION_DIR).glob("*/jobs.json"))
    try:
        records = json.loads(found[-1].read_text()) if found else []
    except (OSError, ValueError):
        return {}
    rec = next((r for r in records if isinstance(r, dict) and r.get("name") == job), None)
    return {int(r["size"]): float(r["time_us"]) / 1e6 for r in (rec or {}).get("results") or []
            if r.get("in_place", True) and metrics._num(r.get("time_us"))}


def modelled_s(job: dict[str, Any]) -> dict[int, float]:
    """A jobs.json record's ``model_s`` per size (empty where the model does not cover it)."""
    return {int(s): float(t) for s, t in (job.get("model_s") or {}).items()
            if metrics._num(t) is not None}


def backend_times(run: Run) -> dict[str, dict[int, float]]:
    """Per backend (:data:`BACKENDS`) the run's tenant job's times per size, where known."""
    job = tenant_job(run)
    if job is None:
        return {}
    name = str(job["name"])
    own = measured_s(run, name)
    out = {"simulator": own} if _simulated(run) else {
        "emulator": own, "simulator": predicted_s(run.path, name)}
    return {**out, "model": modelled_s(job)}


def _group_key(run: Run) -> str:
    """Runs compared on one fabric: its spec (as emulated), rate scale and the sizes run."""
    job = tenant_job(run) or {}
    fabric = run.topology.get("spec") or run.spec.get("fabric") or {}
    sizes = (job.get("workload") or {}).get("sizes")
    return json.dumps({"fabric": fabric, "rate_scale": run.rate_scale, "sizes": sizes},
                      sort_keys=True, default=str)


def headlines(runs: Sequence[Run]) -> list[Headline]:
    """One latency headline per fabric with a ring run and a halving-doubling run (the first
    of each), in the order the runs were given; [] when no fabric has both."""
    groups: dict[str, dict[str, Run]] = {}
    for run in runs:
        job = tenant_job(run)
        if job is None or (job.get("workload") or {}).get("kind") != "allreduce":
            continue
        groups.setdefault(_group_key(run), {}).setdefault(str(job.get("algorithm")), run)
    return [headline(g) for g in groups.values() if RING in g and HD in g]


def headline(by_algorithm: dict[str, Run]) -> Headline:
    """The headline of one fabric's runs, ``by_algorithm`` (ring and halving-doubling at
    least): each backend's crossover, the emulator's (else the simulator's) factor from the
    model's as its number, the fastest algorithm per size, and ring-vs-halving-doubling
    times per size as its rows."""
    ring, hd = by_algorithm[RING], by_algorithm[HD]
    t_ring, t_hd = backend_times(ring), backend_times(hd)
    found = {b: crossover(t_hd[b], t_ring[b]) for b in BACKENDS if t_hd.get(b) and t_ring.get(b)}
    first = next((b for b in ("emulator", "simulator") if b in found), None)
    apart = factor(found[first], found["model"]) if first and "model" in found else None
    parts = [f"{_NAMES[b]} {found[b].describe() if b in found else 'no times'}"
             for b in BACKENDS]
    sentence = f"where {HD} stops beating {RING}: " + "; ".join(parts)
    if apart is not None:
        sentence += f" — the {first}'s is {apart:.2f}× from the model's"
    if fastest := _fastest(by_algorithm, first):
        sentence += f"; fastest at each size ({first}): {fastest}"
    caveats = [f"run “{r.label}” failed its fidelity check: do not trust this comparison"
               for r in (ring, hd) if (r.fidelity or {}).get("verdict") not in
               ("faithful", "simulated")]
    if first is None:
        caveats.append("no emulated or simulated times to compare")
    rows = _rows(ring, hd)
    return Headline(f"Latency: where {HD} stops beating {RING} on {describe_setup(ring)}",
                    sentence, ring.label, hd.label, apart, rows, caveats, kind="latency")


def _fastest(by_algorithm: dict[str, Run], backend: str | None) -> str:
    """``4 KiB halving-doubling, ..., 64 MiB ring``: the fastest run's algorithm per size."""
    if backend is None:
        return ""
    times = {alg: backend_times(r).get(backend) or {} for alg, r in by_algorithm.items()}
    sizes = sorted(set().union(*times.values()))
    parts = []
    for size in sizes:
        have = {alg: t[size] for alg, t in times.items() if size in t}
        if have:
            parts.append(f"{format_size(size, sep=' ')} {min(have, key=have.__getitem__)}")
    return ", ".join(parts)


def _rows(ring: Run, hd: Run) -> list[dict[str, Any]]:
    """Per size both runs measured: their times (and real-rate times), ring ÷ halving-doubling."""
    a, b = tenant_job(ring) or {}, tenant_job(hd) or {}
    sa = ((ring.summary or {}).get("jobs") or {}).get(str(a.get("name"))) or {}
    sb = ((hd.summary or {}).get("jobs") or {}).get(str(b.get("name"))) or {}
    rows = []
    for size in sorted(set(sa.get("sizes") or {}) & set(sb.get("sizes") or {}), key=int):
        x, y = sa["sizes"][size], sb["sizes"][size]
        rs, hs = metrics._num(x.get("collective_s")), metrics._num(y.get("collective_s"))
        rows.append({"job": str(a.get("name")), "size_bytes": int(size), "ref_s": rs,
                     "ref_real_s": metrics._num(x.get("collective_real_s")), "other_s": hs,
                     "other_real_s": metrics._num(y.get("collective_real_s")),
                     "speedup": rs / hs if rs is not None and hs else None})
    return rows
