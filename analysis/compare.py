"""Headline comparisons between runs: which runs may be compared, and what each comparison
found, as one sentence with its number and a table over every message size.

Two runs are comparable when they share a *setup*: the same fabric and the same tenant jobs
(names, host counts, workloads) — everything except the *axes* below. A group of comparable
runs that differ on exactly one axis gets a :class:`Headline` per non-reference run, against
the reference run (the one whose value the axis names as the usual reference, else the first).

Axes are a registry (:data:`AXES`): add an :class:`Axis` to compare runs on another job field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis import metrics
from analysis.load import Run
from testbed.core.registry import POLICIES, SCHEDULES, TRANSPORTS, Registry
from testbed.core.units import format_size

#: Workload fields that say how long or how often, not what: runs differing only in these
#: still compare (their mean times are per collective or per iteration).
REPEAT_FIELDS = ("iterations", "warmup")


@dataclass(frozen=True)
class Axis:
    """A job setting experiments vary: ``fields`` of the job, the ``registry`` of its values
    (whose entries marked ``reference`` the others are measured against, first match wins),
    and what the headline says."""

    name: str
    title: str
    fields: tuple[str, ...]
    registry: Registry[Any] | None = None
    sentence: Callable[[Comparison], str] | None = None

    @property
    def reference(self) -> tuple[str, ...]:
        return self.registry.references() if self.registry is not None else ()


@dataclass
class RunFacts:
    """What a comparison needs of one run."""

    label: str
    setup: str  # JSON of the fabric and tenant jobs without the axes' fields
    values: dict[str, str]  # axis name -> the run's value(s) of that axis
    jobs: dict[str, dict[str, Any]]  # tenant jobs of the run's summary (solo baselines left out)
    simulated: bool = False
    trusted: bool = True
    model_s: dict[str, float] = field(default_factory=dict)  # job -> modelled time, if any
    solos: dict[str, dict[str, Any]] = field(default_factory=dict)  # job -> its solo baseline
    peers: list[tuple[str, str]] = field(default_factory=list)  # (command job, its peer_of)


@dataclass
class Comparison:
    """``other`` against ``ref`` on ``axis``: per (job, size) collective or iteration times."""

    axis: Axis
    ref: RunFacts
    other: RunFacts
    rows: list[dict[str, Any]]  # job, size_bytes, ref_s, other_s, speedup (= ref_s / other_s),
    # and ref_real_s, other_real_s: those times at the real rates (analysis.metrics)

    @property
    def speedup(self) -> float | None:
        """Geometric mean over jobs of ``ref ÷ other`` mean time (at each job's headline size)."""
        ratios = [_ratio(self.ref.jobs[j].get("mean_s"), self.other.jobs[j].get("mean_s"))
                  for j in self.ref.jobs if j in self.other.jobs]
        return metrics.geomean(ratios)

    @property
    def model_speedup(self) -> float | None:
        ratios = [_ratio(self.ref.model_s.get(j), self.other.model_s.get(j))
                  for j in self.ref.jobs if j in self.other.jobs]
        return metrics.geomean(ratios)

    @property
    def title(self) -> str:
        return (f"{self.axis.title}: {self.other.values[self.axis.name]} vs "
                f"{self.ref.values[self.axis.name]}")


@dataclass
class Headline:
    title: str
    sentence: str
    ref: str  # run labels
    other: str
    number: float | None  # the headline ratio
    rows: list[dict[str, Any]]
    caveats: list[str]


# ---------------------------------------------------------------- the sentences

def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}×"


def slowdowns(f: RunFacts) -> list[float]:
    """The slowdowns (against running alone) of a run's tenant jobs that have one."""
    return [v for v in (_num(j.get("slowdown")) for j in f.jobs.values()) if v is not None]


def _routing(c: Comparison) -> str:
    ref, oth = c.ref.values["policy"], c.other.values["policy"]
    sd_ref, sd_oth = slowdowns(c.ref), slowdowns(c.other)
    if sd_ref and sd_oth:
        mean_ref, mean_oth = metrics.mean_of(sd_ref), metrics.mean_of(sd_oth)
        return (f"slowdown against running alone: {_x(mean_ref)} mean, {_x(max(sd_ref))} worst "
                f"under {ref}; {_x(mean_oth)} mean, {_x(max(sd_oth))} worst under {oth} — "
                f"slowdown ratio {_x(_ratio(mean_ref, mean_oth))}")
    return (f"{oth} is {_x(c.speedup)} as fast as {ref} (no solo baselines, so no slowdowns: "
            "set solo_baselines: true)")


def _schedule(c: Comparison) -> str:
    ref, oth = c.ref.values["schedule"], c.other.values["schedule"]
    model = c.model_speedup
    beside = f" (the model predicts {_x(model)})" if model is not None else " (no model for it)"
    return f"{oth} is {_x(c.speedup)} as fast as {ref}{beside}"


def _per_size(c: Comparison) -> str:
    ref, oth = c.ref.values[c.axis.name], c.other.values[c.axis.name]
    by_size: dict[int, list[float | None]] = {}
    for r in c.rows:
        by_size.setdefault(r["size_bytes"], []).append(r["speedup"])
    parts = [f"{format_size(s)} {_x(metrics.geomean(v))}" for s, v in sorted(by_size.items())]
    return f"{oth} is faster than {ref} by " + (", ".join(parts) or "n/a")


AXES: dict[str, Axis] = {a.name: a for a in (
    Axis("policy", "Routing", ("policy",), POLICIES, _routing),
    Axis("schedule", "Chunk schedule",
         ("algorithm", "dim_algorithm", "order", "chunks", "semantics"),
         SCHEDULES, _schedule),
    Axis("transport", "Transport", ("transport",), TRANSPORTS, _per_size),
)}


# ---------------------------------------------------------------- facts of a run

def _tenants(run: Run) -> list[dict[str, Any]]:
    return [j for j in run.jobs if not j.get("solo_of")]


def _job_setup(job: dict[str, Any], axis_fields: set[str]) -> dict[str, Any]:
    workload = {k: v for k, v in (job.get("workload") or {}).items() if k not in REPEAT_FIELDS}
    keep = {k: v for k, v in job.items()
            if k in ("name", "start_offset_s", "dims") and k not in axis_fields}
    return {**keep, "hosts": len(job.get("hosts") or []) or job.get("hosts_wanted"),
            "workload": workload}


def setup_key(run: Run, axes: Sequence[Axis] | None = None) -> str:
    """The fabric (as emulated, at its rate scale) and tenant jobs of ``run``, leaving out every
    axis field: equal keys mean the runs ran the same workload on the same fabric."""
    axis_fields = {f for a in (axes or AXES.values()) for f in a.fields}
    fabric = run.topology.get("spec") or run.spec.get("fabric") or {}
    jobs = sorted((_job_setup(j, axis_fields) for j in _tenants(run)), key=lambda j: j["name"])
    return json.dumps({"fabric": fabric, "rate_scale": run.rate_scale, "jobs": jobs},
                      sort_keys=True, default=str)


def axis_value(run: Run, axis: Axis) -> str:
    """The run's value on ``axis``: its tenant jobs' settings, e.g. ``ecmp`` or
    ``themis/ring/scf/16`` (the first field alone when the rest do not vary in the run)."""
    values = sorted({"/".join(str(j.get(f)) for f in axis.fields) for j in _tenants(run)})
    if axis.name == "policy" and (not values or values == ["None"]):
        values = [str(run.spec.get("policy") or "static")]
    firsts = {v.split("/")[0] for v in values}
    return ", ".join(sorted(firsts)) if len(firsts) == len(values) else ", ".join(values)


def _modelled_times(run: Run, jobs: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Per chunk-scheduled job: the model's time for its headline size on the run's fabric,
    as the run recorded it when it placed the job (jobs.json ``model_s``:
    :func:`workloads.model.job_model_s`, what ``fabriclab model`` predicts)."""
    out = {}
    for job in _tenants(run):
        name = str(job["name"])
        size = _num((jobs.get(name) or {}).get("size_bytes"))
        model = (job.get("model_s") or {}).get(str(int(size))) if size is not None else None
        if _num(model) is not None:
            out[name] = float(model)
    return out


def facts(run: Run, summary: dict[str, Any], fidelity_state: str) -> RunFacts:
    """:class:`RunFacts` of a loaded run and its :func:`analysis.metrics.summarise`."""
    jobs = {n: j for n, j in summary["jobs"].items() if not j.get("solo_of")}
    solos = {str(j["solo_of"]): j for j in summary["jobs"].values() if j.get("solo_of")}
    peers = [(str(j["name"]), str(j["workload"]["peer_of"])) for j in _tenants(run)
             if isinstance(j.get("workload"), dict) and j["workload"].get("peer_of")]
    return RunFacts(label=run.label, setup=setup_key(run),
                    values={a.name: axis_value(run, a) for a in AXES.values()},
                    jobs=jobs, simulated=fidelity_state == "simulated",
                    trusted=fidelity_state in ("ok", "simulated"),
                    model_s=_modelled_times(run, jobs), solos=solos, peers=peers)


# ---------------------------------------------------------------- the comparisons

def size_rows(ref: RunFacts, other: RunFacts) -> list[dict[str, Any]]:
    """Every (job, size) both runs measured: the two mean times and ``ref ÷ other``."""
    rows = []
    for name in sorted(set(ref.jobs) & set(other.jobs)):
        a, b = ref.jobs[name].get("sizes") or {}, other.jobs[name].get("sizes") or {}
        for size in sorted(set(a) & set(b), key=int):
            ra, rb = _num(a[size].get("collective_s")), _num(b[size].get("collective_s"))
            rows.append({"job": name, "size_bytes": int(size), "ref_s": ra,
                         "ref_real_s": _num(a[size].get("collective_real_s")), "other_s": rb,
                         "other_real_s": _num(b[size].get("collective_real_s")),
                         "speedup": _ratio(ra, rb)})
    return rows


def _reference(group: list[RunFacts], axis: Axis) -> RunFacts:
    for want in axis.reference:
        for f in group:
            if f.values[axis.name] == want:
                return f
    return group[0]


def headlines(runs: Sequence[RunFacts], axes: Sequence[Axis] | None = None) -> list[Headline]:
    """One headline per run that differs from a comparable reference run on exactly one axis,
    in the order the runs were given."""
    axes = list(axes or AXES.values())
    groups: dict[str, list[RunFacts]] = {}
    for f in runs:
        groups.setdefault(f.setup, []).append(f)
    out = []
    for group in groups.values():
        if len(group) < 2:
            continue
        differing = [a for a in axes if len({f.values[a.name] for f in group}) > 1]
        if len(differing) != 1:
            continue
        axis = differing[0]
        if axis.name == "transport" and (lead := ladder_headline(group)):
            out.append(lead)  # a ladder of transports leads with which cost dominates
        ref = _reference(group, axis)
        for other in group:
            if other is ref or other.values[axis.name] == ref.values[axis.name]:
                continue
            out.append(_headline(Comparison(axis, ref, other, size_rows(ref, other))))
    return out


def ladder_headline(group: Sequence[RunFacts]) -> Headline | None:
    """Runs of one setup that differ only by transport, three rungs of the transport ladder
    or more (:attr:`~workloads.transports.base.Transport.rung`): per size, which rung's cost
    (its ``adds``) makes the largest part of the gap between the lowest and the highest rung
    measured; the rows and the number are the lowest rung against the highest."""
    rungs = {}
    for f in group:
        name = f.values["transport"]
        if name in TRANSPORTS.names() and (r := TRANSPORTS.get(name).rung) is not None:
            rungs[r] = f
    if len(rungs) < 3 or any(f.simulated for f in rungs.values()):
        return None
    ladder = [rungs[r] for r in sorted(rungs)]
    times: list[dict[int, float]] = []
    for f in ladder:
        per_size: dict[int, list[float]] = {}
        for job in f.jobs.values():
            for size, v in (job.get("sizes") or {}).items():
                if (t := _num(v.get("collective_s"))) is not None:
                    per_size.setdefault(int(size), []).append(t)
        times.append({s: metrics.mean_of(v) for s, v in per_size.items()})
    parts = []
    for size in sorted(set.intersection(*(set(t) for t in times))):
        steps = [times[k][size] - times[k - 1][size] for k in range(1, len(ladder))]
        gap = times[-1][size] - times[0][size]
        k = max(range(len(steps)), key=steps.__getitem__)
        name = ladder[k + 1].values["transport"]
        adds = TRANSPORTS.get(name).adds
        share = f"{steps[k] / gap:.0%} of the gap" if gap > 0 else "no gap"
        parts.append(f"{format_size(size)}: {adds} ({name}, {share})")
    if not parts:
        return None
    low, high = ladder[0], ladder[-1]
    lo_name, hi_name = low.values["transport"], high.values["transport"]
    caveats = [f"run “{f.label}” failed its fidelity check: do not trust this comparison"
               for f in ladder if not f.trusted]
    c = Comparison(AXES["transport"], high, low, size_rows(high, low))
    return Headline(f"Transport ladder: {lo_name} to {hi_name} ({len(ladder)} rungs)",
                    f"the cost that adds most to the {lo_name}-to-{hi_name} gap, by size — "
                    + "; ".join(parts), high.label, low.label, c.speedup, c.rows, caveats)


def _headline(c: Comparison) -> Headline:
    caveats = [f"run “{f.label}” failed its fidelity check: do not trust this comparison"
               for f in (c.ref, c.other) if not f.trusted]
    simulated = [f.label for f in (c.ref, c.other) if f.simulated]
    if simulated and c.axis.name == "transport":
        return Headline(c.title, "n/a: the simulator does not model transports (every transport "
                        "gets the same times)", c.ref.label, c.other.label, None, [], caveats)
    if simulated:
        caveats.append("simulated (flow-level model): " + ", ".join(simulated))
    sd_ref = slowdowns(c.ref)
    number = (_ratio(metrics.mean_of(sd_ref), metrics.mean_of(slowdowns(c.other)))
              if c.axis.name == "policy" and sd_ref else c.speedup)
    sentence = (c.axis.sentence or _per_size)(c)
    return Headline(c.title, sentence, c.ref.label, c.other.label, number, c.rows, caveats)


# ---------------------------------------------------------------- small helpers

def _num(x: Any) -> float | None:
    return metrics._num(x)


def _ratio(a: Any, b: Any) -> float | None:
    a, b = _num(a), _num(b)
    return a / b if a is not None and b else None




def _peer(f: RunFacts, cmd: str, ours: str, caveats: list[str]) -> Headline | None:
    """fabriclab's job ``ours`` against the peer program ``cmd`` (its ``peer_of``): bus
    bandwidths at the same size, from their solo baselines (each ran alone) when both have
    one, else from the jobs as they ran together."""
    alone = cmd in f.solos and ours in f.solos
    a, b = (f.solos if alone else f.jobs).get(ours, {}), (f.solos if alone else f.jobs).get(
        cmd, {})
    mine, theirs = _num(a.get("busbw_gbit_s")), _num(b.get("busbw_gbit_s"))
    if mine is None or theirs is None:
        return None
    size = _num(b.get("size_bytes"))
    same = size is not None and size == _num(a.get("size_bytes"))
    note = [] if alone else ["the two jobs ran at the same time: run with solo_baselines: "
                             "true to measure each alone"]
    note += [] if same else ["the two jobs reduced different sizes"]
    what = f" at {format_size(int(size))}" if same and size else ""
    return Headline(f"Peer: {ours} (fabriclab) vs {cmd}",
                    f"fabriclab's busbw is {_x(_ratio(mine, theirs))} the peer's{what}: "
                    f"{mine * 1e3:.1f} against {theirs * 1e3:.1f} Mbit/s"
                    + (" (each alone)" if alone else ""),
                    f.label, f.label, _ratio(mine, theirs), [], caveats + note)


def run_headlines(f: RunFacts, speedup: dict[str, Any] | None) -> list[Headline]:
    """Headlines one run holds on its own: contention (slowdown against each tenant's solo
    baseline), fabriclab against a peer program (a command job's ``peer_of``), and
    Themis-vs-baseline job pairs, with the model's prediction beside them."""
    out = []
    slow = slowdowns(f)
    caveats = [] if f.trusted else [f"run “{f.label}” failed its fidelity check: do not trust it"]
    if slow:
        mean = metrics.mean_of(slow)
        out.append(Headline(f"Contention under {f.values['policy']}",
                            f"slowdown against running alone: {_x(mean)} mean, "
                            f"{_x(max(slow))} worst over {len(slow)} jobs",
                            f.label, f.label, mean, [], caveats))
    out += [h for h in (_peer(f, cmd, ours, caveats) for cmd, ours in f.peers) if h]
    for p in (speedup or {}).get("pairs", []):
        model = _ratio(f.model_s.get(p["baseline"]), f.model_s.get(p["themis"]))
        beside = f" (the model predicts {_x(model)})" if model is not None else ""
        out.append(Headline(f"Chunk schedule: {p['themis']} vs {p['baseline']}",
                            f"themis is {_x(p['speedup'])} as fast as baseline{beside}",
                            f.label, f.label, p["speedup"], [], caveats))
    return out
