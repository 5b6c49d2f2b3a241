"""Training workloads end to end: per system and workload, the iteration time under each
chunk schedule and Themis's gain over the baseline, beside the Themis paper's figures.

Pure: run summaries (``summary.json``) in, rows out. Runs are grouped by their fabric
(``fabric`` in the summary) and the training job's workload (``model``); within a group the
baseline is the run whose job has ``algorithm: baseline``, Themis+FIFO and Themis+SCF those
with ``algorithm: themis`` and that ``order``. A gain is the baseline's mean iteration time
over Themis's; a workload's mean gain is the arithmetic mean over the systems it ran on (as
the paper averages its six). Where a fabric is one of the paper's systems at full size
(``system`` in the summary), ASTRA-sim 1.0's recorded times and gains for the same case stand
beside ours (:mod:`analysis.astra_reference`).

A training job run on both backends (an emulated run and a simulated one of the same fabric
and job) is judged on what the emulator emulates: measured ÷ simulated of its exposed
communication, in all and per logical dimension, beside its pass time
(:func:`emulated_vs_simulated`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.astra_reference import astra_finish_s
from testbed.core.presets import E2E_GAINS

Summary = Mapping[str, Any]
SCHEDULES = (("baseline", "baseline", None), ("themis-fifo", "themis", "fifo"),
             ("themis-scf", "themis", "scf"))


def _training_jobs(summary: Summary) -> list[Mapping[str, Any]]:
    return [j for j in (summary.get("jobs") or {}).values()
            if j.get("workload") == "training" and not j.get("solo_of")]


def e2e_table(summaries: Sequence[Summary]) -> list[dict[str, Any]]:
    """One row per (fabric, workload) that ran under the baseline and at least one Themis
    schedule: ``{fabric, system, workload, baseline_s, themis-fifo_s, themis-scf_s, gain_fifo,
    gain_scf, exposed_dim_s (the baseline's, per dimension)}`` and ASTRA-sim's
    ``astra_baseline_s``, ``astra_themis-fifo_s``, ``astra_themis-scf_s``, ``astra_gain_fifo``,
    ``astra_gain_scf`` (None where not run or not recorded)."""
    groups: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    systems: dict[str, str | None] = {}
    for s in summaries:
        systems[str(s.get("fabric"))] = s.get("system")
        for job in _training_jobs(s):
            for name, algorithm, order in SCHEDULES:
                if job.get("algorithm") == algorithm and (order is None
                                                          or job.get("order") == order):
                    key = (str(s.get("fabric")), str(job.get("model")))
                    groups.setdefault(key, {})[name] = job
    rows = []
    for (fabric, workload), jobs in groups.items():
        base = jobs.get("baseline", {}).get("mean_s")
        if not base:
            continue
        exposed = jobs["baseline"].get("exposed_comm_s")
        system = systems.get(fabric)
        astra = {name: astra_finish_s(system, workload, name) for name, _, _ in SCHEDULES}
        row: dict[str, Any] = {
            "fabric": fabric, "system": system, "workload": workload, "baseline_s": base,
            **{f"astra_{name}_s": t for name, t in astra.items()},
            "exposed_comm_s": exposed, "exposed_dim_s": jobs["baseline"].get("exposed_dim_s"),
            # the most any schedule could gain: every exposed communication hidden
            "ceiling": base / (base - exposed) if exposed is not None and base > exposed
            else None}
        for name, _, _ in SCHEDULES[1:]:
            t = jobs.get(name, {}).get("mean_s")
            row[f"{name}_s"] = t
            row[f"gain_{name.split('-')[1]}"] = base / t if t else None
            a = astra[name]
            row[f"astra_gain_{name.split('-')[1]}"] = (astra["baseline"] / a
                                                       if a and astra["baseline"] else None)
        rows.append(row)
    return rows


def e2e_gains(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per workload: the mean Themis+FIFO and Themis+SCF gains over the systems in ``rows``,
    their range, the mean ceiling (the baseline's time over its compute: the gain were all its
exposed communication hidden), and the paper's figures (camera-ready, arXiv) where it gives
one."""
    out = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == workload]
        scf = [r["gain_scf"] for r in mine if r.get("gain_scf")]
        fifo = [r["gain_fifo"] for r in mine if r.get("gain_fifo")]
        paper = E2E_GAINS.get(workload)
        ceilings = [r["ceiling"] for r in mine if r.get("ceiling")]
        astra = {k: [r[f"astra_gain_{k}"] for r in mine if r.get(f"astra_gain_{k}")]
                 for k in ("fifo", "scf")}
        out.append({
            "workload": workload, "systems": len(mine),
            **{f"astra_gain_{k}": statistics.fmean(v) if v else None for k, v in astra.items()},
            "gain_fifo": statistics.fmean(fifo) if fifo else None,
            "gain_scf": statistics.fmean(scf) if scf else None,
            "gain_scf_min": min(scf) if scf else None, "gain_scf_max": max(scf) if scf else None,
            "ceiling": statistics.fmean(ceilings) if ceilings else None,
            "paper": paper.camera_ready if paper else None,
            "paper_arxiv": paper.arxiv if paper else None,
            "note": paper.note if paper else ""})
    return out


def e2e_section(summaries: Sequence[Summary]) -> dict[str, Any] | None:
    """The report's section, or None when no run has a baseline and a Themis training job."""
    rows = e2e_table(summaries)
    if not rows:
        return None
    return {"rows": rows, "gains": e2e_gains(rows)}


# A training job's figures compared across backends: the summary's keys (mean over passes).
PASS_FIGURES = (("pass", "mean_s"), ("exposed", "exposed_comm_s"))


def _ratio(measured: Any, simulated: Any) -> float | None:
    return measured / simulated if measured is not None and simulated else None


def measured_over_simulated(measured: Mapping[str, Any], simulated: Mapping[str, Any]
                            ) -> dict[str, Any]:
    """Measured ÷ simulated of a training job's figures, each a summary job's keys: ``pass``
    (``mean_s``), ``exposed`` (``exposed_comm_s``, the communication the workload waited for)
    and ``exposed_dim`` (``exposed_dim_s``, per logical dimension: a list, None where either
    side lacks the split or their dimensions differ). A ratio is None where the simulated
    figure is zero or missing."""
    out: dict[str, Any] = {name: _ratio(measured.get(key), simulated.get(key))
                           for name, key in PASS_FIGURES}
    got, want = measured.get("exposed_dim_s"), simulated.get("exposed_dim_s")
    out["exposed_dim"] = ([_ratio(g, w) for g, w in zip(got, want, strict=True)]
                          if got is not None and want is not None and len(got) == len(want)
                          else None)
    return out


def _is_simulated(summary: Summary) -> bool:
    return (summary.get("fidelity") or {}).get("verdict") == "simulated"


def _backend_key(summary: Summary, job: Mapping[str, Any], name: str) -> tuple[str, ...]:
    return (str(summary.get("fabric")), name, str(job.get("model")), str(job.get("algorithm")),
            str(job.get("order")))


def emulated_vs_simulated(summaries: Sequence[Summary]) -> list[dict[str, Any]]:
    """Per training job of an emulated run that a simulated run of the same fabric also ran
    (the same job name, workload, schedule and order): ``{label, verdict, fabric, workload,
    job, algorithm, order, emulated, simulated}`` (each the job's summary) and the ratios of
    :func:`measured_over_simulated` (``pass``, ``exposed``, ``exposed_dim``). Judging the
    emulator on the exposed communication, not only the pass: the workers sleep the compute
    the simulator models, so the pass agrees largely by construction."""
    sims: dict[tuple[str, ...], Mapping[str, Any]] = {}
    for s in summaries:
        if _is_simulated(s):
            for name, job in (s.get("jobs") or {}).items():
                if job.get("workload") == "training" and not job.get("solo_of"):
                    sims.setdefault(_backend_key(s, job, name), job)
    rows = []
    for s in summaries:
        if _is_simulated(s):
            continue
        for name, job in (s.get("jobs") or {}).items():
            sim = sims.get(_backend_key(s, job, name))
            if sim is None or job.get("workload") != "training" or job.get("solo_of"):
                continue
            rows.append({
                "label": s.get("label"), "verdict": (s.get("fidelity") or {}).get("verdict"),
                "fabric": s.get("fabric"), "workload": job.get("model"), "job": name,
                "algorithm": job.get("algorithm"), "order": job.get("order"),
                "emulated": job, "simulated": sim, **measured_over_simulated(job, sim)})
    return rows
