"""The interface every registered invariant implements, and the loop that runs them.

An invariant is one object (conventionally ``INVARIANT`` in its own module) registered in
:data:`testbed.core.registry.INVARIANTS`. It declares:

- ``name``: how reasons and the report name it (``"loss"`` → "loss invariant: ...");
- ``needs``: the run-directory files it reads (``"qdisc_samples.parquet"``, ``"drops.json"``);
  a run without one of them is listed as not judged, with the file missing;
- ``checks``: one line, what it holds the run to (the report prints it);
- :meth:`Invariant.judge`: a pure function from the run's :class:`Evidence` to a
  :class:`Judgement` — whether it could judge, its violations (each with its place, its time
  in seconds from the run's first sample and its sentence), and what it measured.

:func:`judge_all` runs every registered invariant on a run directory; ``fidelity.json`` keeps
each judgement under ``registered.<name>``, and every violation's sentence is a reason the run
is not faithful. A new invariant is one module and one registration (docs/extending.md).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from testbed.core.registry import INVARIANTS


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
    first use, and ``t0``, the time of its first sample (violation times count from it)."""

    run_dir: Path
    extra: dict[str, Any] = field(default_factory=dict)

    def has(self, name: str) -> bool:
        return (self.run_dir / name).exists()

    def table(self, name: str) -> pd.DataFrame | None:
        path = self.run_dir / name
        return pd.read_parquet(path) if path.exists() else None

    def json(self, name: str) -> Any:
        path = self.run_dir / name
        return json.loads(path.read_text()) if path.exists() else None

    @cached_property
    def t0(self) -> float:
        for name in ("qdisc_samples.parquet", "link_samples.parquet", "sched_samples.parquet"):
            t = self.table(name)
            if t is not None and len(t):
                return float(t["time"].min())
        return 0.0


class Invariant:
    """Base class of a registered invariant (see the module docstring)."""

    name: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()
    checks: ClassVar[str] = ""

    def judge(self, evidence: Evidence) -> Judgement:
        raise NotImplementedError


MAX_SENTENCES = 6  # an invariant's violations named one by one in the reasons; the rest counted


def judge_all(run_dir: Path, extra: dict[str, Any] | None = None
              ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every registered invariant on ``run_dir``: (``registered`` for fidelity.json, the
    reasons their violations give). Their notes are in each record (:func:`notes_of`)."""
    evidence = Evidence(Path(run_dir), extra or {})
    records: dict[str, dict[str, Any]] = {}
    reasons: list[str] = []
    for name in INVARIANTS.names():
        inv: Invariant = INVARIANTS.get(name)
        missing = [f for f in inv.needs if not evidence.has(f)]
        result = (Judgement(False, why_not=f"the run has no {', '.join(missing)}") if missing
                  else inv.judge(evidence))
        records[name] = result.record(name, inv.checks)
        for v in result.violations[:MAX_SENTENCES]:
            reasons.append(f"{name} invariant: {v.sentence}")
        if len(result.violations) > MAX_SENTENCES:
            reasons.append(f"{name} invariant: ... and "
                           f"{len(result.violations) - MAX_SENTENCES} more")
    return records, reasons


def notes_of(records: dict[str, dict[str, Any]]) -> list[str]:
    """The notes of :func:`judge_all`'s records, each led by its invariant's name."""
    return [f"{name} invariant: {n}" for name, rec in records.items()
            for n in rec.get("notes") or []]
