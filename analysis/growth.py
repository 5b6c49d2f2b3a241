"""How a cost grows: a power law ``y ≈ c · x1^a1 · x2^a2 ...`` fitted by least squares on the
logarithms (``numpy.linalg.lstsq``), e.g. a simulator's wall time against GPUs and jobs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PowerLaw:
    """``y ≈ coefficient · Π x^exponent``; ``r2`` is that of the fit of log y."""

    coefficient: float
    exponents: dict[str, float]
    r2: float
    points: int

    def describe(self, quantity: str) -> str:
        """E.g. ``wall time ∝ GPUs^0.52 · jobs^1.31 (R² 0.987 over 12 runs)``."""
        terms = " · ".join(f"{name}^{a:.2f}" for name, a in self.exponents.items())
        return f"{quantity} ∝ {terms} (R² {self.r2:.3f} over {self.points} runs)"

    def predict(self, **values: float) -> float:
        return self.coefficient * math.prod(values[n] ** a for n, a in self.exponents.items())


def fit_power_law(y: Sequence[float], factors: Mapping[str, Sequence[float]]) -> PowerLaw:
    """Fit ``log y = log c + Σ a·log x`` over the points; every value must be positive, and
    the factors must vary independently (one value, or two that always move together, leave
    an exponent undetermined: a ValueError says which)."""
    names = list(factors)
    values = np.asarray(y, dtype=float)
    columns = [np.asarray(factors[n], dtype=float) for n in names]
    if any(len(c) != len(values) for c in columns):
        raise ValueError("every factor needs one value per point")
    for name, data in [("y", values), *zip(names, columns, strict=True)]:
        if not (np.isfinite(data).all() and (data > 0).all()):
            raise ValueError(f"{name}: every value must be finite and positive to take its log")
    for name, data in zip(names, columns, strict=True):
        if len(np.unique(data)) < 2:
            raise ValueError(f"{name} takes one value: its exponent cannot be fitted")
    design = np.column_stack([np.ones(len(values)), *(np.log(c) for c in columns)])
    if len(values) <= design.shape[1]:
        raise ValueError(f"{len(values)} points cannot fit {design.shape[1]} unknowns with "
                         "anything left to judge the fit by")
    logs = np.log(values)
    solution, _residuals, rank, _sv = np.linalg.lstsq(design, logs, rcond=None)
    if rank < design.shape[1]:
        raise ValueError(f"{' and '.join(names)} vary together: the fit cannot separate them")
    residual = float(np.sum((logs - design @ solution) ** 2))
    total = float(np.sum((logs - logs.mean()) ** 2))
    r2 = 1.0 - residual / total if total > 0 else 1.0
    return PowerLaw(float(math.exp(solution[0])),
                    {n: float(a) for n, a in zip(names, solution[1:], strict=True)}, r2,
                    len(values))
