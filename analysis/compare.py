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
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from analysis import metrics
from analysis.astra_reference import system_of
from analysis.ecmp_draw import draw_sentence
from analysis.impairments import impairment_phrase
from analysis.load import Run
from testbed.core.registry import COLLECTIVES, POLICIES, SCHEDULES, TRANSPORTS, Registry
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
    shown: tuple[str, ...] = ()  # fields a title always names beside the first (``order``)
    also: tuple[Registry[Any], ...] = ()  # more registries of its values (flat collectives)

    @property
    def reference(self) -> tuple[str, ...]:
        regs = ((self.registry,) if self.registry is not None else ()) + self.also
        return tuple(name for r in regs for name in r.references())


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
    described: str = ""  # the setup in words: "2x4 at 6/12 Mbit/s"
    workload: str = ""  # the tenants' models (training, DNN jobs), e.g. "themis-gnmt": a
    # headline's title names it where the runs compared in one report differ in it
    full: dict[str, str] = field(default_factory=dict)  # axis name -> every field's value
    link_mbit_s: float | None = None  # the tenants' host links (emulated), where one rate
    speedup: dict[str, Any] | None = None  # the summary's Themis-vs-baseline job pairs
    draw: str = ""  # how ECMP's hash drew (analysis.ecmp_draw), where the policy hashes


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
        """``Routing: vclos vs ecmp on 2 leaves × 4 spines …``: the values, what else tells
        the compared runs apart (e.g. the order of two Themis runs), and the setup."""
        name = self.axis.name
        ref, other = self.ref.values[name], self.other.values[name]
        a, b = self.ref.full.get(name, ""), self.other.full.get(name, "")
        if a and b and a != b and "/" in b and "," not in b:
            extra = [x for f, x, y in zip(self.axis.fields[1:], b.split("/")[1:],
                                          a.split("/")[1:], strict=False)
                     if x != y or f in self.axis.shown]
            other = " ".join([other, *extra])
        what = f", {self.ref.workload}" if self.ref.workload else ""
        where = f" on {self.ref.described}" if self.ref.described else ""
        return f"{self.axis.title}: {other} vs {ref}{what}{where}"


@dataclass
class Headline:
    title: str
    sentence: str
    ref: str  # run labels
    other: str
    number: float | None  # the headline ratio
    rows: list[dict[str, Any]]
    caveats: list[str]
    kind: str = ""  # an axis name, or contention, peer, pair (jobs of one run)
    jobs: tuple[str, str] | None = None  # pair: the (baseline, themis) jobs of the one run
    link_mbit_s: float | None = None  # the compared runs' host link rate (emulated)
    model: float | None = None  # the model's figure beside ``number``, if any
    spread: tuple[float, float] | None = None  # (min, max) of ``number`` over repeats
    rows_note: str = ""  # why the rows' ratios differ from ``number``, where they measure else


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
        draws = "".join(f" ({f.draw})" for f in (c.ref, c.other) if f.draw)
        return (f"slowdown against running alone: {_x(mean_ref)} mean, {_x(max(sd_ref))} worst "
                f"under {ref}; {_x(mean_oth)} mean, {_x(max(sd_oth))} worst under {oth} — "
                f"slowdown ratio {_x(_ratio(mean_ref, mean_oth))}{draws}")
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
         SCHEDULES, _schedule, shown=("order",), also=(COLLECTIVES,)),
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
                    model_s=_modelled_times(run, jobs), solos=solos, peers=peers,
                    described=describe_setup(run), workload=workload_of(run),
                    full={a.name: full_value(run, a) for a in AXES.values()},
                    link_mbit_s=_host_link_mbit_s(run), speedup=summary.get("speedup"),
                    draw=draw_sentence(run, _tenants(run), axis_value(run, AXES["policy"])))


def full_value(run: Run, axis: Axis) -> str:
    """Every field of ``axis`` over the run's tenant jobs, e.g. ``themis/ring/scf/16/…``."""
    return ", ".join(sorted({"/".join(str(j.get(f)) for f in axis.fields)
                             for j in _tenants(run)}))


def workload_of(run: Run) -> str:
    """The models the run's tenant jobs train (training and DNN jobs), or ''."""
    return ", ".join(sorted({str(m) for j in _tenants(run)
                             if (m := metrics._workload_model(j)) is not None}))


def _rates(mbit_s: Sequence[float], scale: float) -> str:
    """``6/12 Mbit/s`` (real rates: a scaled run's are its rates ÷ ``rate_scale``)."""
    real = [m / scale for m in mbit_s]
    unit, div = (("Gbit/s", 1e3) if min(real) >= 1000 else ("Mbit/s", 1.0))
    return "/".join(f"{m / div:.4g}" for m in real) + f" {unit}"


def describe_setup(run: Run) -> str:
    """The fabric and jobs in words, for headline titles: ``2x4 at 6/12 Mbit/s``,
    ``2 leaves × 4 spines at 20 Mbit/s, 4 jobs``, ``2 hosts on one switch at 1000 Mbit/s``."""
    spec = run.topology.get("spec") or run.spec.get("fabric") or {}
    scale = run.rate_scale or 1.0
    kind = spec.get("kind")
    if kind == "multidim":
        dims = [d for d in spec.get("dims") or [] if isinstance(d, dict)]
        text = ("x".join(str(d.get("size")) for d in dims) + " at "
                + _rates([float(d.get("mbit_s") or 0) for d in dims], scale))
        if system := system_of(spec):  # one of the Themis paper's systems, at full size
            text = f"{system} ({text})"
    elif kind in ("leaf_spine", "ocs_leaf_spine") and spec.get("leaves"):
        rates = [float(spec.get(k) or 0) for k in ("host_link_mbit_s", "uplink_mbit_s")]
        rate = _rates(rates[:1] if rates[0] == rates[1] else rates, scale)
        if int(spec["leaves"]) == 1:
            text = f"{spec.get('hosts_per_leaf')} hosts on one switch at {rate}"
        else:
            text = f"{spec['leaves']} leaves × {spec.get('spines')} spines at {rate}"
    else:
        text = str(kind or "")
    if links := impairment_phrase(metrics.link_impairments(run.topology)):
        text += f", {links}"
    tenants = len(_tenants(run))
    return text + (f", {tenants} jobs" if tenants > 1 else "")


def _host_link_mbit_s(run: Run) -> float | None:
    """The one rate of the tenants' host links (emulated), or None when they differ."""
    hosts = {h for j in _tenants(run) for h in j.get("hosts") or []}
    rates = {float(lk["mbit_s"]) for lk in run.topology.get("links") or []
             if lk.get("kind") == "host" and (lk.get("a") in hosts or lk.get("b") in hosts)}
    return rates.pop() if len(rates) == 1 else None


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
    in the order the runs were given. Runs equal on every axis are repeats of one another:
    the k-th repeat is compared with the reference's k-th, and the headline gives the median
    [min, max] over the repeats (:func:`over_repeats`). A setup whose runs are all repeats
    of one run gets that run's own headlines (:func:`run_headlines`), over its repeats."""
    axes = list(axes or AXES.values())
    if len({f.workload for f in runs}) < 2:  # titles name the workload only where it differs
        runs = [replace(f, workload="") for f in runs]
    groups: dict[str, list[RunFacts]] = {}
    for f in runs:
        groups.setdefault(f.setup, []).append(f)
    out = []
    for group in groups.values():
        repeats: dict[tuple[str, ...], list[RunFacts]] = {}
        for f in group:
            repeats.setdefault(tuple(_setting(f, a) for a in axes), []).append(f)
        sets = list(repeats.values())
        if len(sets) == 1 and len(group) > 1:
            out += _over_each([run_headlines(f, f.speedup) for f in group])
            continue
        differing = [a for a in axes if len({_setting(s[0], a) for s in sets}) > 1]
        if len(differing) != 1:
            continue
        axis = differing[0]
        if axis.name == "transport" and (lead := ladder_headline([s[0] for s in sets])):
            out.append(lead)  # a ladder of transports leads with which cost dominates
        ref = _reference([s[0] for s in sets], axis)
        refs = next(s for s in sets if s[0] is ref)
        for others in sets:
            if others is refs:
                continue
            out.append(over_repeats([_headline(Comparison(axis, a, b, size_rows(a, b)))
                                     for a, b in zip(refs, others, strict=False)]))
    return out


def _setting(f: RunFacts, axis: Axis) -> str:
    """Every field of the run's ``axis`` (``themis/by-kind/scf/64/…``): runs equal here are
    repeats; ``themis`` with FIFO and with SCF are not."""
    return f.full.get(axis.name) or f.values[axis.name]


def _over_each(per_run: list[list[Headline]]) -> list[Headline]:
    """The headlines of repeated runs, each title's taken over the repeats."""
    by_title: dict[str, list[Headline]] = {}
    for heads in per_run:
        for h in heads:
            by_title.setdefault(h.title, []).append(h)
    return [over_repeats(hs) for hs in by_title.values()]


def over_repeats(heads: Sequence[Headline]) -> Headline:
    """One headline from the same comparison's repeats: the repeat whose number is the median
    speaks (its table and figure), and the sentence adds the median [min, max] and whether
    the spread crosses 1.0 (then the repeats disagree on which is better). Every repeat's
    caveats are kept: one repeat that failed its fidelity check taints the median."""
    numbers = sorted(h.number for h in heads if h.number is not None)
    if len(heads) < 2 or len(numbers) < 2:
        return heads[0]
    median = statistics.median(numbers)
    speaker = min(heads, key=lambda h: abs(h.number - median) if h.number is not None
                  else math.inf)
    spread = (f"over {len(heads)} repeats: median {_x(median)} [{_x(numbers[0])}, "
              f"{_x(numbers[-1])}]")
    if numbers[0] < 1 < numbers[-1]:
        spread += " — the spread crosses 1.0: the repeats disagree on which is better"
    caveats = list(dict.fromkeys(c for h in heads for c in h.caveats))
    return replace(speaker, sentence=f"{speaker.sentence}; {spread}", number=median,
                   spread=(numbers[0], numbers[-1]), caveats=caveats)


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
                    + "; ".join(parts), high.label, low.label, c.speedup, c.rows, caveats,
                    kind="transport")


def _headline(c: Comparison) -> Headline:
    caveats = [f"run “{f.label}” failed its fidelity check: do not trust this comparison"
               for f in (c.ref, c.other) if not f.trusted]
    simulated = [f.label for f in (c.ref, c.other) if f.simulated]
    if simulated and c.axis.name == "transport":
        return Headline(c.title, "n/a: the simulator does not model transports (every transport "
                        "gets the same times)", c.ref.label, c.other.label, None, [], caveats,
                        kind=c.axis.name)
    if simulated:
        caveats.append("simulated (flow-level model): " + ", ".join(simulated))
    sd_ref = slowdowns(c.ref)
    number = (_ratio(metrics.mean_of(sd_ref), metrics.mean_of(slowdowns(c.other)))
              if c.axis.name == "policy" and sd_ref else c.speedup)
    sentence = (c.axis.sentence or _per_size)(c)
    return Headline(c.title, sentence, c.ref.label, c.other.label, number, c.rows, caveats,
                    kind=c.axis.name, link_mbit_s=c.ref.link_mbit_s,
                    model=c.model_speedup if c.axis.name == "schedule" else None,
                    rows_note=rows_note(c, number))


def rows_note(c: Comparison, number: float | None) -> str:
    """Why a headline's number and its rows differ, where its jobs are timed by iteration
    (training, DNN, command jobs): the number is of whole iterations, the rows of collectives."""
    iterated = [j for j in c.ref.jobs.values() if j.get("workload") in metrics.ITERATION_KINDS]
    rows = metrics.geomean(r["speedup"] for r in c.rows)
    if not iterated or not c.rows or number is None or rows is None:
        return ""
    return (f"{_x(number)} is the ratio of mean iteration times (compute plus the "
            "communication it waits for); the rows are each collective size's own mean time "
            f"(communication alone), whose ratios average {_x(rows)}: the compute, which no "
            "chunk schedule shortens, and the communication hidden behind it dilute that gain "
            "in the iteration")


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
                    f.label, f.label, _ratio(mine, theirs), [], caveats + note, kind="peer")


def run_headlines(f: RunFacts, speedup: dict[str, Any] | None) -> list[Headline]:
    """Headlines one run holds on its own: contention (slowdown against each tenant's solo
    baseline), fabriclab against a peer program (a command job's ``peer_of``), and
    Themis-vs-baseline job pairs, with the model's prediction beside them."""
    out = []
    slow = slowdowns(f)
    caveats = [] if f.trusted else [f"run “{f.label}” failed its fidelity check: do not trust it"]
    if slow:
        mean = metrics.mean_of(slow)
        out.append(Headline(f"Contention under {f.values['policy']} on {f.described}",
                            f"slowdown against running alone: {_x(mean)} mean, "
                            f"{_x(max(slow))} worst over {len(slow)} jobs",
                            f.label, f.label, mean, [], caveats, kind="contention"))
    out += [h for h in (_peer(f, cmd, ours, caveats) for cmd, ours in f.peers) if h]
    for p in (speedup or {}).get("pairs", []):
        model = _ratio(f.model_s.get(p["baseline"]), f.model_s.get(p["themis"]))
        beside = f" (the model predicts {_x(model)})" if model is not None else ""
        ref, other = (f.jobs.get(p[k], {}).get("algorithm", k) for k in ("baseline", "themis"))
        out.append(Headline(f"Chunk schedule: {p['themis']} vs {p['baseline']} on {f.described}",
                            f"{other} is {_x(p['speedup'])} as fast as {ref}{beside}",
                            f.label, f.label, p["speedup"], [], caveats, kind="pair",
                            jobs=(str(p["baseline"]), str(p["themis"])), model=model))
    return out
