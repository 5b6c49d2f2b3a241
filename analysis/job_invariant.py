"""The job invariant: every job takes the time its paths allow, under any routing policy.

An emulated run records the paths its flows took (``paths.json``: the spines' path counters
saw which spine each pair of a job's hosts crossed, ECMP's hash included) and asks the
simulator what each job should take on them (:mod:`testbed.emulator.prediction`: the same
jobs, hosts and legs, with the simulator's max-min rate engine; its run is kept as
``prediction/``). A job whose measured time at a size is more than :data:`TOLERANCE` from
that prediction, either way, is a violation naming the job: slower, something besides its
links set its pace; faster, the model or the recorded paths do not hold. ECMP's collisions are
then expected, not excused: a job that shares an uplink is judged against the shared rate.

Jobs that share a link are also judged together (:func:`judge_shared`). The simulator splits
a shared link max-min fairly; TCP on a drop-tail queue does not, and the split moves from one
iteration to the next (BENCHMARKS.md, "`make demo` judged by the new verdict"), so one job
may beat its share while another falls behind it. What no split changes is the work the
shared links do: jobs coupled through shared links finish their collectives, all together,
when the links allow. So a job outside the tolerance is held when its group's span (the
first collective's start, warm-up included, to the last one's end, over the group) is
within the tolerance of the simulator's span for the same jobs, and, if it was faster, when
it was no faster than its solo baseline's prediction allows (the job alone). Anything else
stays a violation.

Not judged, with why: sizes the model predicts under :data:`MIN_JUDGED_S` (latency, which it
leaves out, is then a large share), programs (``command`` jobs), transports whose own cost the
simulator does not model, and fabrics without a routing policy. A run from before the
prediction (no ``predicted``) is judged as it was then: jobs on isolated paths (``isolates_jobs``
of the policy, the static policy, kernel bridges) against their links' goodput or the model's
time (:func:`expected`).

:data:`TOLERANCE` is the 10 % the issue allows a faithful run (BENCHMARKS.md, "The verdict
under every policy", has the runs it was judged on).
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

from analysis.invariant import Evidence, Invariant, Judgement, Spans, Violation, pct
from analysis.paths import bytes_on_links
from testbed.core.experiment import STATIC_POLICY
from testbed.core.formulas import TCP_GOODPUT
from testbed.core.registry import POLICIES, RegistryError
from testbed.core.topology import FabricPlan
from testbed.core.units import format_size

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
          predicted: dict[str, dict[str, Any]] | None = None,
          on_links: dict[str, dict[str, int]] | None = None,
          windows: tuple[dict[str, list[tuple[float, float]]],
                         dict[str, list[tuple[float, float]]]] | None = None
          ) -> list[dict[str, Any]]:
    """Per job that ran (solo baselines included): ``judged`` (or ``why_not``), and per size
    the ``ratio`` of the expected figure to the measured one (1 = what its paths allow, below 1
    slower); ``violated`` when a size fell outside ``1 ± tolerance`` (below only, when judged
    against its links' rate); ``tcp_timeouts``, the retransmission timeouts its hosts counted
    while it ran, where the run read them (each stalls a flow 200 ms or more).

    With ``predicted`` (:func:`testbed.emulator.prediction.predict`: the simulator's times on
    the paths the run's flows took), every job the simulator covers is judged against it,
    under any policy, at every size the model predicts to take :data:`MIN_JUDGED_S` or more;
    without it (an older run), only jobs on isolated paths, against their links. With
    ``on_links`` (:func:`analysis.paths.bytes_on_links` of the leg the jobs ran together)
    and ``windows`` (job → its collectives' (start, end), warm-up included, in the run and in
    the simulator's replay), jobs that share a link are then judged together
    (:func:`judge_shared`)."""
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
    if predicted is not None and on_links and windows:
        judge_shared(out, on_links, _alone_times(jobs, predicted), *windows, tolerance)
    return out


def _alone_times(jobs: list[dict[str, Any]], predicted: dict[str, dict[str, Any]]
                 ) -> dict[str, dict[tuple[int, bool], float]]:
    """Job → the simulator's times for its solo baseline (the job alone), where it ran."""
    return {job["solo_of"]: (predicted.get(job["name"]) or {}).get("times_s") or {}
            for job in jobs if job.get("solo_of")}


def worst_size(rec: dict[str, Any]) -> dict[str, Any]:
    """A job verdict's size furthest from what was expected of it (the one its reason
    names)."""
    return max(rec["sizes"], key=lambda s: abs(1 - s["ratio"]))


def coupled(on_links: dict[str, dict[str, int]], jobs: set[str]) -> list[set[str]]:
    """The groups of ``jobs`` joined through links two or more of them crossed (connected
    components; a job that shares no link is a group of its own)."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(jobs)
    for carried in on_links.values():
        on = sorted(j for j in carried if j in jobs)
        graph.add_edges_from(itertools.pairwise(on))
    return [set(c) for c in nx.connected_components(graph)]


def span_s(windows: dict[str, list[tuple[float, float]]], group: set[str]) -> float | None:
    """From the first start to the last end of ``group``'s collectives, or None if one of
    them has none."""
    if any(not windows.get(j) for j in group):
        return None
    return (max(e for j in group for _, e in windows[j])
            - min(s for j in group for s, _ in windows[j]))


def judge_shared(verdicts: list[dict[str, Any]], on_links: dict[str, dict[str, int]],
                 alone: dict[str, dict[tuple[int, bool], float]],
                 measured: dict[str, list[tuple[float, float]]],
                 predicted: dict[str, list[tuple[float, float]]],
                 tolerance: float = TOLERANCE) -> None:
    """Hold a violated job that shares links with other judged jobs when the split of the
    links, not the emulation, explains it (the module docstring): its group's measured span
    is within ``tolerance`` of the simulator's (``measured`` and ``predicted``: job → its
    collectives' (start, end), warm-up included: the replay starts each of them no earlier
    than the run did, and a split moves the warm-up's end too), and, if it was faster than
    predicted, its solo baseline's prediction (``alone``) is no more than ``tolerance``
    slower than it ran. A held job gets ``violated`` False; every job in a group of two or
    more gets ``shared``: the group, the span's ratio (predicted ÷ measured) and, for a held
    faster job, its ratio to the job alone."""
    by_job = {v["job"]: v for v in verdicts if v["judged"] and v["sizes"]}
    for group in coupled(on_links, set(by_job)):
        if len(group) < 2:
            continue
        took, allowed = span_s(measured, group), span_s(predicted, group)
        span_ratio = round(allowed / took, 4) if took and allowed else None
        for name in sorted(group):
            v = by_job[name]
            v["shared"] = {"jobs": sorted(group), "span_ratio": span_ratio}
            if not v["violated"] or span_ratio is None or abs(1 - span_ratio) > tolerance:
                continue
            worst = worst_size(v)
            if worst["ratio"] > 1:
                bound = alone.get(name, {}).get((worst["size"], worst["in_place"]))
                if not bound or not worst.get("measured"):
                    continue
                v["shared"]["alone_ratio"] = round(bound / worst["measured"], 4)
                if v["shared"]["alone_ratio"] > 1 + tolerance:
                    continue
            v["violated"] = False
            v["shared"]["held"] = True


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
    every size: its own measured figure shows that nothing cost it more than the tolerance.
    A job outside it that its group held (:func:`judge_shared`) is not one: the group's span
    says the links did their work, not what a wait cost that job."""
    return {v["job"]: min(s["ratio"] for s in v["sizes"]) for v in verdicts
            if v["judged"] and not v["violated"] and v["sizes"]
            and not (v.get("shared") or {}).get("held")}


def job_sentence(v: dict[str, Any]) -> str:
    """The job invariant's sentence for a violated job verdict: its worst size, and the TCP
    retransmission timeouts its hosts counted where they were read."""
    worst = worst_size(v)
    size = format_size(worst["size"])
    if worst["unit"] == "time_s" and "measured" in worst:
        how = ("slower than" if worst["ratio"] < 1 else "faster than")
        said = (f"job {v['job']} took {worst['measured']:.3g} s for its All-Reduce of {size} "
                f"where the simulator predicts {worst['expected']:.3g} s on the paths its "
                f"flows took ({how} it by more than {TOLERANCE:.0%}): "
                + ("something besides its links set its pace" if worst["ratio"] < 1 else
                   "the model or the paths recorded do not hold"))
    else:
        said = (f"job {v['job']} reached {worst['ratio']:.0%} of what its isolated links allow "
                f"(All-Reduce of {size}), below {1 - TOLERANCE:.0%}: something besides its "
                "links set its pace")
    return said + _timeouts_then(v.get("tcp_timeouts"))


def _timeouts_then(count: int | None) -> str:
    """'; its hosts' TCP counted N retransmission timeouts meanwhile', where they were read."""
    if count is None:
        return ""
    return (f"; its hosts' TCP counted {count} retransmission timeout"
            f"{'' if count == 1 else 's'} while it ran (each stalls a flow 200 ms or more)")


def replay_spans(evidence: Evidence, predicted: dict[str, dict[str, Any]] | None
                 ) -> tuple[dict[str, Spans], dict[str, Spans]] | None:
    """Job → its collectives' (start, end), warm-up included, in the run and in the
    simulator's replay of it (``prediction/<run>``, named by ``predicted``): what the group
    rule compares (:func:`judge_shared`); None without exactly one replay."""
    runs = {p["run"] for p in (predicted or {}).values() if p.get("run")}
    if len(runs) != 1:
        return None
    (replay,) = runs
    return evidence.windows(warmup=True), evidence.windows(warmup=True, under=replay)


PREDICTION_FILE = "prediction.json"  # the simulator's times per job, as the run recorded them


def prediction_record(predicted: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``prediction.json`` of :func:`testbed.emulator.prediction.predict`'s result: per job,
    ``times_s`` (``size`` in bytes, ``in_place``, ``s``) and ``run`` (the replay's directory
    inside the run), or ``why_not``."""
    def one(p: dict[str, Any]) -> dict[str, Any]:
        if "times_s" not in p:
            return dict(p)
        return p | {"times_s": [{"size": size, "in_place": in_place, "s": s}
                                for (size, in_place), s in p["times_s"].items()]}

    return {"jobs": {name: one(p) for name, p in predicted.items()}}


def recorded_prediction(record: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """The simulator's times as :func:`judge` takes them (``predicted``), from a run's
    ``prediction.json`` (:func:`prediction_record`); None without one."""
    if record is None:
        return None

    def one(p: dict[str, Any]) -> dict[str, Any]:
        if "times_s" not in p:
            return dict(p)
        return p | {"times_s": {(int(t["size"]), bool(t["in_place"])): float(t["s"])
                                for t in p["times_s"]}}

    return {name: one(p) for name, p in (record.get("jobs") or {}).items()}


class JobInvariant(Invariant):
    """The job invariant (the module docstring) on a run's ``jobs.json`` records and the
    simulator's times on its recorded paths (``prediction.json``; ``evidence.extra
    ["predicted"]`` instead where given), the jobs' shared links from ``paths.json`` on
    ``topology.json`` and their spans in the run and the replay (the traces). A run from
    before the prediction needs ``plan`` and ``switches`` in ``evidence.extra``. fidelity.json
    keeps it as ``job``; its reasons name every violated job."""

    name: ClassVar[str] = "job"
    checks: ClassVar[str] = (f"every job within {TOLERANCE:.0%} of the simulator's time on the "
                             "paths its flows took")
    max_sentences: ClassVar[int | None] = None

    def judge(self, evidence: Evidence) -> Judgement:
        jobs = evidence.json("jobs.json") or []
        predicted = (evidence.extra["predicted"] if "predicted" in evidence.extra else
                     recorded_prediction(evidence.json(PREDICTION_FILE)))
        plan = evidence.extra.get("plan")
        if predicted is None and plan is None:
            return Judgement(False, why_not="neither the simulator's prediction nor the "
                             "fabric's plan was given",
                             measured={"job": {"tolerance": TOLERANCE, "jobs": []}})
        on_links = evidence.derived("on_links", lambda: bytes_on_links(
            evidence.json("paths.json"), evidence.json("topology.json") or {}))
        spans = evidence.derived("spans", lambda: replay_spans(evidence, predicted))
        verdicts = judge(jobs, plan, evidence.extra.get("switches"), predicted=predicted,
                         on_links=on_links, windows=spans)
        return Judgement(True, [Violation(f"job {v['job']}", job_sentence(v))
                                for v in verdicts if v["violated"]],
                         {"job": {"tolerance": TOLERANCE, "jobs": verdicts}})

    def fields(self, judgement: Judgement) -> dict[str, Any]:
        return judgement.measured

    def summary(self, fidelity: dict[str, Any]) -> str | None:
        jobs = (fidelity.get("job") or {}).get("jobs") or []
        if not jobs:
            return None
        judged = [j for j in jobs if j.get("judged")]
        why = {j.get("why_not") for j in jobs if not j.get("judged")}
        against = ("against the simulator on the paths their flows took"
                   if any(j.get("against") == "prediction" for j in jobs) else
                   "on isolated paths")
        held = sorted(j["job"] for j in jobs if (j.get("shared") or {}).get("held"))
        tolerance = fidelity["job"].get("tolerance")
        return (f"the job invariant ({len(judged)} of {len(jobs)} jobs, {against}"
                + (f"; {', '.join(held)} outside {pct(tolerance)} alone but held with the "
                   "jobs sharing their links, which finished together within it"
                   if held else "")
                + (f"; not judged: {'; '.join(sorted(w for w in why if w))}" if why else "")
                + ")")


INVARIANT = JobInvariant()
