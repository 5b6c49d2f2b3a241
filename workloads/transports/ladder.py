"""The transport ladder: the registered transports that declare a ``rung``, in rung order,
and the factor (:data:`~workloads.transports.base.LADDER_FACTORS`) each step changes."""

from __future__ import annotations

from testbed.core.registry import TRANSPORTS
from workloads.transports.base import Transport


def ladder() -> list[type[Transport]]:
    """Every registered transport class with a rung, lowest rung first."""
    classes = [TRANSPORTS.get(name) for name in TRANSPORTS.names()]
    return sorted((c for c in classes if c.rung is not None), key=lambda c: c.rung)


def changed_factors(lower: type[Transport], upper: type[Transport]) -> list[str]:
    """The factors whose values differ between two rungs (one, on a well-formed ladder)."""
    keys = sorted(set(lower.factors) | set(upper.factors))
    return [k for k in keys if lower.factors.get(k) != upper.factors.get(k)]


def step_label(lower: type[Transport], upper: type[Transport]) -> str:
    """``factor: from → to`` for the one factor a step changes."""
    return "; ".join(f"{k}: {lower.factors.get(k)} → {upper.factors.get(k)}"
                     for k in changed_factors(lower, upper))
