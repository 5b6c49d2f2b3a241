"""The start gate of jobs run together: each job warms up, then waits until every job has, so
that no job measures a collective while another is still starting.

The runner makes the gate directory (inside the run directory) and gives it to the workers of
every job it starts together (``WorkerConfig.start_gate``). Rank 0 of a warmed-up job creates
``ready-<job>`` there; every rank then waits for ``go``, which the runner creates once every
gated job is ready, or one of them has ended (a failed job must not hold the others).
"""

from __future__ import annotations

from pathlib import Path

READY = "ready-"  # + the job's name: made by its rank 0 once warmed up
GO = "go"  # made by the runner: every rank may start measuring
POLL_S = 0.01  # how often a waiting rank looks for GO


def ready(gate: Path, jobs: list[str]) -> bool:
    """Whether every one of ``jobs`` has said it is warmed up."""
    return all((gate / f"{READY}{name}").exists() for name in jobs)


def open_gate(gate: Path) -> None:
    """Let every waiting rank start (idempotent)."""
    (gate / GO).touch()
