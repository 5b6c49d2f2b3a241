"""The link, scheduler, switch and job invariants on samples a caller holds in memory (a
benchmark's sampler, a test's made-up tables), without a run directory.

A run's ``fidelity.json`` is built by :func:`analysis.invariant.judge_run`, which judges the run
by every invariant registered in :data:`testbed.core.registry.INVARIANTS` (the link invariant,
:mod:`analysis.invariants`; the scheduler and switch invariants, :mod:`analysis.sched_invariant`;
the job invariant, :mod:`analysis.job_invariant`; the loss and impairments invariants ...).
These two functions run the same registered invariants on given tables and give the fields
they add to ``fidelity.json``, with their ``reasons`` (and the link invariant's ``notes``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from analysis.invariant import judge_run

Spans = list[tuple[float, float]]


def fidelity_record(samples, queues, idle_min: float | None, busiest: str = ""
                    ) -> dict[str, Any]:
    """The link invariant on ``link_samples.parquet`` and ``qdisc_samples.parquet`` tables (or
    None) and the lowest CPU idle of the measured collectives: ``reasons``, ``notes`` (the CPU
    diagnosis), ``links`` and ``invariants`` (:func:`analysis.invariants.link_judgement`)."""
    verdict = judge_run(Path(), {"cpu_idle_min": idle_min, "busiest": busiest},
                        {"link_samples.parquet": samples, "qdisc_samples.parquet": queues},
                        only=("link",))
    verdict.fields.pop("registered")
    return {"reasons": verdict.reasons, "notes": verdict.notes, **verdict.fields}


def pipeline_record(sched, communicating: dict[str, Spans], jobs: list[dict[str, Any]], plan,
                    switches: str | None, busiest: Callable[[float, float], str], queues=None,
                    predicted: dict[str, dict[str, Any]] | None = None,
                    on_links: dict[str, dict[str, int]] | None = None,
                    spans: tuple[dict[str, Spans], dict[str, Spans]] | None = None
                    ) -> dict[str, Any]:
    """The scheduler, switch and job invariants on a ``sched_samples.parquet`` table (or None),
    the jobs' measured collectives (``communicating``: job → (start, end)), their jobs.json
    records, the fabric's ``plan``, what was busiest over a stretch (``busiest``), the qdisc
    samples (``queues``, to excuse a worker's wait), the simulator's ``predicted`` times, the
    jobs' bytes per shared link (``on_links``) and their spans in the run and the replay
    (``spans``): ``reasons``, ``scheduler``, ``switch``, ``sched_judged_s`` and ``job``."""
    verdict = judge_run(
        Path(), {"busiest_then": busiest, "predicted": predicted, "plan": plan,
                 "switches": switches},
        {"sched_samples.parquet": sched, "qdisc_samples.parquet": queues, "jobs.json": jobs,
         "windows": communicating, "on_links": on_links or {}, "spans": spans},
        only=("scheduler", "switch", "job"))
    verdict.fields.pop("registered")
    return {"reasons": verdict.reasons, **verdict.fields}
