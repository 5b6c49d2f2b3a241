"""The job invariant: a job on paths the policy isolates reaches what its links allow.

Where a job has its links to itself — its routing policy says it isolates jobs
(``isolates_jobs`` of the policy registered in :data:`testbed.core.registry.POLICIES`: vClos
and OCS-vClos give each job its own spines), or no controller runs (the static policy) or
kernel bridges stand in for the switches, both routing a multidim fabric's dimensions over
dedicated links — nothing but its own links should set its pace. Its expected figure is then:

- on a multidim fabric, the model's time of each size (``model_s`` in jobs.json, from
  :func:`workloads.model.job_model_s`): the job must finish within ``model_s ÷ (1 − tol)``;
- on a leaf-spine fabric, for a ring over its hosts (one logical dimension), the TCP goodput of
  the slowest link its traffic may cross (its hosts' links, and the uplinks of its leaves if it
  spans several): its busbw must reach ``(1 − tol)`` of it.

A job short of that is a violation naming the job: the machine, not the network, set its pace.
:data:`TOLERANCE` is the 10 % the issue allows a faithful run; quiet runs of two isolated
2-host jobs measured 0.98–0.99 of their links' goodput (BENCHMARKS.md). Where the model
cannot say — ECMP hashes jobs onto shared uplinks, and other shapes the model does not cover —
the job is listed as not judged, with why.
"""

from __future__ import annotations

from typing import Any

from testbed.core.experiment import STATIC_POLICY
from testbed.core.formulas import TCP_GOODPUT
from testbed.core.registry import POLICIES, RegistryError
from testbed.core.topology import FabricPlan

TOLERANCE = 0.10
# Sizes the model predicts to take less than this are not judged: per-step latency, which the
# model leaves out, is then a large share of them (a ring step costs 1-2 ms emulated).
MIN_JUDGED_S = 0.2


def isolated_by(policy: str | None, switches: str | None) -> bool:
    """Whether a job's paths are its own under ``policy`` (None or ``static``: no
    controller) on ``switches``: what the registered policy declares (``isolates_jobs``); a
    policy not registered here is not known to isolate."""
    if switches == "kernel" or policy is None or policy == STATIC_POLICY:
        return True
    try:
        return POLICIES.get(policy).isolates_jobs is True
    except RegistryError:
        return False


def path_rate_mbit_s(plan: FabricPlan, hosts: list[str]) -> float:
    """The slowest link a ring over ``hosts`` of a leaf-spine plan may cross: their own links,
    and, if they sit under several leaves, every link above those leaves."""
    host_links = [lk for lk in plan.links if lk.kind == "host" and (lk.a in hosts or
                                                                    lk.b in hosts)]
    leaves = {lk.b if lk.a in hosts else lk.a for lk in host_links}
    rates = [lk.mbit_s for lk in host_links]
    if len(leaves) > 1:
        rates += [lk.mbit_s for lk in plan.links
                  if lk.kind != "host" and (lk.a in leaves or lk.b in leaves)]
    return min(rates)


def expected(job: dict[str, Any], plan: FabricPlan, switches: str | None
             ) -> tuple[dict[int, float] | None, str, str]:
    """(expected figure per size, what it is — ``time_s`` or ``busbw_gbyte_s`` — and why
    not judged if None) for one jobs.json record."""
    if not isolated_by(job.get("policy"), switches):
        return None, "", (f"policy {job.get('policy')} may share links between jobs: the "
                          "model cannot say what the job should reach")
    if job.get("model_s"):
        return {int(k): float(v) for k, v in job["model_s"].items()}, "time_s", ""
    if plan.kind == "multidim":
        return None, "", "the model does not cover this job's shape"
    dims = [d for d in (job.get("dims") or []) if d > 1]
    if len(dims) > 1 or job.get("workload", {}).get("kind") != "allreduce":
        return None, "", "the model covers only an All-Reduce ring on a leaf-spine fabric"
    rate = path_rate_mbit_s(plan, job["hosts"]) * TCP_GOODPUT
    return ({int(r["size"]): rate * 1e6 / 8 / 1e9 for r in job.get("results") or []},
            "busbw_gbyte_s", "")


def judge(jobs: list[dict[str, Any]], plan: FabricPlan, switches: str | None = None,
          tolerance: float = TOLERANCE,
          predicted: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Per job that ran (solo baselines included): ``judged`` (or ``why_not``), and per size
    the ``ratio`` of the expected figure to the measured one (1 = what its paths allow, below 1
    slower); ``violated`` when a size fell outside ``1 ± tolerance`` (below only, when judged
    against its links' rate); ``tcp_timeouts``, the retransmission timeouts its hosts counted
    while it ran, where the run read them (each stalls a flow 200 ms or more).

    With ``predicted`` (:func:`testbed.emulator.prediction.predict`: the simulator's times on
    the paths the run's flows took), every job the simulator covers is judged against it,
    under any policy, at every size the model predicts to take :data:`MIN_JUDGED_S` or more;
    without it (an older run), only jobs on isolated paths, against their links."""
    out = []
    for job in jobs:
        if job.get("status") != "ok" or not job.get("results"):
            continue
        rec: dict[str, Any] = {"job": job["name"], "judged": False, "why_not": None,
                               "sizes": [], "violated": False,
                               "tcp_timeouts": job.get("tcp_timeouts")}
        if predicted is not None:
            _against_prediction(rec, job, predicted.get(job["name"]), tolerance)
            out.append(rec)
            continue
        want, what, why = expected(job, plan, switches)
        rec.update(judged=want is not None, why_not=why or None)
        for r in job["results"] if want else []:
            goal = want.get(int(r["size"]))
            if not goal:
                continue
            ratio = (goal / (r["time_us"] / 1e6) if what == "time_s"
                     else r["busbw"] / goal)
            rec["sizes"].append({"size": int(r["size"]), "in_place": r.get("in_place", True),
                                 "ratio": round(ratio, 4), "expected": goal, "unit": what})
            rec["violated"] |= ratio < 1 - tolerance
        out.append(rec)
    return out


def _against_prediction(rec: dict[str, Any], job: dict[str, Any],
                        pred: dict[str, Any] | None, tolerance: float) -> None:
    """Fill ``rec`` with ``job``'s sizes judged against the simulator's times ``pred``."""
    if pred is None or pred.get("why_not"):
        rec["why_not"] = (pred or {}).get("why_not") or "the simulator made no prediction"
        return
    times = pred["times_s"]
    short = []
    for r in job["results"]:
        key = (int(r["size"]), bool(r.get("in_place", True)))
        goal = times.get(key)
        if goal is None:
            continue
        if goal < MIN_JUDGED_S:
            short.append(int(r["size"]))
            continue
        ratio = goal / (r["time_us"] / 1e6)
        rec["sizes"].append({"size": key[0], "in_place": key[1], "ratio": round(ratio, 4),
                             "expected": round(goal, 6), "unit": "time_s",
                             "measured": round(r["time_us"] / 1e6, 6)})
        rec["violated"] |= not 1 - tolerance <= ratio <= 1 + tolerance
    rec["judged"] = bool(rec["sizes"])
    rec["against"] = "prediction"
    if not rec["judged"]:
        rec["why_not"] = ("every size is predicted under "
                          f"{MIN_JUDGED_S:g} s: latency, not the links, sets its pace"
                          if short else "the simulator predicted none of its sizes")


def held(verdicts: list[dict[str, Any]]) -> dict[str, float]:
    """Job → its worst ratio, for every job :func:`judge` judged and found within tolerance at
    every size: its own measured figure shows that nothing cost it more than the tolerance."""
    return {v["job"]: min(s["ratio"] for s in v["sizes"]) for v in verdicts
            if v["judged"] and not v["violated"] and v["sizes"]}
