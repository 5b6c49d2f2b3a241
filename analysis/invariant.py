"""The interface every fidelity invariant implements, and the loop that runs them.

An invariant is one object (conventionally ``INVARIANT`` in its own module) registered in
:data:`testbed.core.registry.INVARIANTS`. It declares:

- ``name``: how reasons and the report name it (``"loss"`` → "loss invariant: ...");
- ``needs``: the run-directory files it reads (``"qdisc_samples.parquet"``, ``"drops.json"``);
  a run without one of them is listed as not judged, with the file missing;
- ``checks``: one line, what it holds the run to (the report prints it);
- ``after``: the invariants whose judgements it reads (``evidence.earlier``), judged before it
  (the scheduler invariant reads the job invariant's: a worker's wait is excused when its job
  was found within tolerance);
- :meth:`Invariant.judge`: a pure function from the run's :class:`Evidence` to a
  :class:`Judgement` — whether it could judge, its violations (each with its place, its time
  in seconds from the run's first sample and its sentence), and what it measured.

:func:`judge_run` runs every registered invariant on a run directory, each after the ones it
reads, and gives fidelity.json's fields, reasons and notes in registration order: a new
invariant's judgement is kept under ``registered.<name>``, and every violation's sentence is a
reason the run is not faithful. The invariants older than this interface (link, scheduler,
switch, job) keep the fields and the wording fidelity.json had before it, through the hooks
:meth:`Invariant.fields`, :meth:`Invariant.reasons` and :meth:`Invariant.notes`. Invariants read
the run's files (the simulator's prediction too: ``prediction.json``), so a recorded run can be
judged again; run-time values no file holds (what was busiest, the fabric's plan) come in
``Evidence.extra``, and files the caller holds in memory in ``Evidence.known``. A new invariant is
one module and one registration (docs/extending.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from testbed.core.registry import INVARIANTS, RegistryError
from testbed.core.traces import collective_windows

Spans = list[tuple[float, float]]  # (start, end) pairs, s as sampled


@dataclass(frozen=True)
class Violation:
    """One broken promise: where (a link ``leaf0->spine2``, a switch, a host, a job), when
    (seconds from the run's first sample; None for the whole leg or run) and the sentence."""

    place: str
    sentence: str
    start_s: float | None = None
    end_s: float | None = None


@dataclass
class Judgement:
    """What an invariant found: ``judged`` (or ``why_not``), its violations, ``measured``:
    the figures it judged, kept in fidelity.json, and ``notes``: what it saw and did not hold
    against the run, each with why (the report prints them beside the verdict)."""

    judged: bool
    violations: list[Violation] = field(default_factory=list)
    measured: dict[str, Any] = field(default_factory=dict)
    why_not: str | None = None
    notes: list[str] = field(default_factory=list)

    def record(self, name: str, checks: str) -> dict[str, Any]:
        return {"checks": checks, "judged": self.judged, "why_not": self.why_not,
                "violations": [asdict(v) for v in self.violations], "measured": self.measured,
                "notes": self.notes}


@dataclass
class Evidence:
    """A run directory as invariants read it: its sample tables and JSON records, loaded on
    first use, and ``t0``, the time of its first sample (violation times count from it).

    ``known``: what is already known of the run, by file name (``"sched_samples.parquet"``,
    ``"jobs.json"``; None: the run has no such file) or by derived value (``"windows"``,
    ``"windows+warmup"``, ``"on_links"``, ``"spans"``): a caller with it in memory (the runner,
    whose ``jobs.json`` is not yet written; a test) passes it, and everything else is read from
    ``run_dir`` on first use and kept here. ``extra``: run-time values no file holds —
    ``cpu_idle_min`` and ``busiest`` (the link invariant), ``busiest_then(start, end)`` (the
    scheduler and switch invariants), ``plan`` and ``switches`` (the job invariant, for a run
    without ``prediction.json``; ``predicted`` there overrides that file). ``earlier``: the
    judgements of the invariants this one declares it reads (:attr:`Invariant.after`), set
    by :func:`judge_run`."""

    run_dir: Path
    extra: dict[str, Any] = field(default_factory=dict)
    known: dict[str, Any] = field(default_factory=dict)
    earlier: dict[str, Judgement] = field(default_factory=dict)

    def has(self, name: str) -> bool:
        if name in self.known:
            return self.known[name] is not None
        return (self.run_dir / name).exists()

    def _read(self, name: str, load: Callable[[Path], Any]) -> Any:
        if name not in self.known:
            path = self.run_dir / name
            self.known[name] = load(path) if path.exists() else None
        return self.known[name]

    def table(self, name: str) -> pd.DataFrame | None:
        return self._read(name, pd.read_parquet)

    def json(self, name: str) -> Any:
        return self._read(name, lambda path: json.loads(path.read_text()))

    def derived(self, key: str, compute: Callable[[], Any]) -> Any:
        """``known[key]``, computed once (several invariants may read one derived value)."""
        if key not in self.known:
            self.known[key] = compute()
        return self.known[key]

    def windows(self, warmup: bool = False, under: str = "") -> dict[str, Spans]:
        """Job → its collectives' (start, end) (:func:`testbed.core.traces.collective_windows`;
        ``under``: a run inside this one, the simulator's replay)."""
        key = "windows" + ("+warmup" if warmup else "") + (f"@{under}" if under else "")
        return self.derived(key, lambda: collective_windows(self.run_dir / under, warmup))

    @cached_property
    def t0(self) -> float:
        for name in ("qdisc_samples.parquet", "link_samples.parquet", "sched_samples.parquet"):
            t = self.table(name)
            if t is not None and len(t):
                return float(t["time"].min())
        return 0.0


MAX_SENTENCES = 6  # an invariant's violations named one by one in the reasons; the rest counted


class Invariant:
    """Base class of a registered invariant (see the module docstring).

    ``after``: the invariants whose judgements this one reads (``evidence.earlier``); they are
    judged first. The hooks :meth:`reasons`, :meth:`notes` and :meth:`fields` have defaults a
    new invariant keeps; the invariants older than this interface (link, scheduler, switch,
    job) override them to word their reasons and keep their fidelity.json fields as before."""

    name: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()
    checks: ClassVar[str] = ""
    after: ClassVar[tuple[str, ...]] = ()
    max_sentences: ClassVar[int | None] = MAX_SENTENCES  # named in the reasons (None: all)
    more: ClassVar[str] = ""  # what the reasons call the violations past those

    def judge(self, evidence: Evidence) -> Judgement:
        raise NotImplementedError

    def reasons(self, judgement: Judgement) -> list[str]:
        """The sentences that make the run not faithful: ``"<name> invariant: <sentence>"``
        per violation, the first :attr:`max_sentences`, then how many more."""
        cap = self.max_sentences
        out = [f"{self.name} invariant: {v.sentence}" for v in judgement.violations[:cap]]
        if cap is not None and len(judgement.violations) > cap:
            out.append(f"{self.name} invariant: ... and {len(judgement.violations) - cap} more"
                       + (f" {self.more}" if self.more else ""))
        return out

    def notes(self, judgement: Judgement) -> list[str]:
        """fidelity.json's notes from the judgement's: each led by the invariant's name."""
        return [f"{self.name} invariant: {n}" for n in judgement.notes]

    def fields(self, judgement: Judgement) -> dict[str, Any] | None:
        """fidelity.json's own top-level fields for the judgement; None (the default): it is
        kept as ``registered.<name>`` (:meth:`Judgement.record`)."""
        return None

    def summary(self, fidelity: dict[str, Any]) -> str | None:
        """What the report says judged a run, from its fidelity.json (None: nothing)."""
        rec = (fidelity.get("registered") or {}).get(self.name)
        return record_summary(self.name, rec) if rec is not None else None


def pct(x: Any) -> str:
    """A share as the report prints it: ``93%``, or ``—`` for no number."""
    try:
        v = None if x is None or isinstance(x, bool) else float(x)
    except (TypeError, ValueError):
        v = None
    return "—" if v is None or not math.isfinite(v) else f"{v * 100:.0f}%"


def record_summary(name: str, rec: dict[str, Any]) -> str:
    """The report's words for a ``registered.<name>`` record."""
    return (f"the {name} invariant ({rec.get('checks')})" if rec.get("judged") else
            f"not the {name} invariant ({rec.get('why_not')})")


@dataclass
class Verdict:
    """What :func:`judge_run` found: ``fields`` for fidelity.json (every invariant's own ones,
    and ``registered``), the ``reasons`` the run is not faithful and the ``notes`` beside them,
    all in registration order, and each invariant's :class:`Judgement`."""

    fields: dict[str, Any]
    reasons: list[str]
    notes: list[str]
    judgements: dict[str, Judgement]


def judging_order(names: tuple[str, ...]) -> list[str]:
    """``names`` ordered so that each comes after the registered ones in its ``after``
    (registration order otherwise); a cycle is a RegistryError."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order:
            return
        if name in visiting:
            raise RegistryError(f"invariants {', '.join(sorted(visiting))} read each other's "
                                "judgements (after): none can be judged first")
        visiting.add(name)
        for dep in INVARIANTS.get(name).after:
            if dep in names:
                visit(dep)
        visiting.discard(name)
        order.append(name)

    for name in names:
        visit(name)
    return order


def judge_run(run_dir: Path, extra: dict[str, Any] | None = None,
              known: dict[str, Any] | None = None,
              only: tuple[str, ...] | None = None) -> Verdict:
    """Every registered invariant (or those in ``only``) on ``run_dir``, each after those it
    reads (:attr:`Invariant.after`), as fidelity.json keeps them (:class:`Verdict`). An
    invariant missing a file it ``needs`` is recorded as not judged, with the file missing."""
    evidence = Evidence(Path(run_dir), extra or {}, known if known is not None else {})
    names = tuple(n for n in INVARIANTS.names() if only is None or n in only)
    judgements: dict[str, Judgement] = {}
    for name in judging_order(names):
        inv: Invariant = INVARIANTS.get(name)
        missing = [f for f in inv.needs if not evidence.has(f)]
        evidence.earlier = {n: judgements[n] for n in inv.after if n in judgements}
        judgements[name] = (Judgement(False, why_not=f"the run has no {', '.join(missing)}")
                            if missing else inv.judge(evidence))
    fields: dict[str, Any] = {}
    registered: dict[str, dict[str, Any]] = {}
    reasons: list[str] = []
    notes: list[str] = []
    for name in names:
        inv, result = INVARIANTS.get(name), judgements[name]
        own = inv.fields(result)
        if own is None:
            registered[name] = result.record(name, inv.checks)
        elif taken := sorted(set(own) & (set(fields) | {"registered"})):
            raise RegistryError(f"invariant {name!r} would overwrite fidelity.json's "
                                f"{', '.join(taken)}, which another invariant fills")
        else:
            fields.update(own)
        reasons += inv.reasons(result)
        notes += inv.notes(result)
    return Verdict(fields | {"registered": registered}, reasons, notes, judgements)


def judge_all(run_dir: Path, extra: dict[str, Any] | None = None
              ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every registered invariant on ``run_dir`` (:func:`judge_run`): (``registered`` for
    fidelity.json, the reasons every invariant's violations give). Their notes are in each
    record."""
    verdict = judge_run(run_dir, extra)
    return verdict.fields["registered"], verdict.reasons
