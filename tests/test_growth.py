"""Power-law fits of measured growth (analysis.growth) on synthetic data of known exponents."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from analysis.growth import fit_power_law

GPUS = [256, 1024, 4096, 8192]
JOBS = [500, 1000, 2500, 5000]


def grid() -> tuple[list[float], list[float]]:
    pairs = list(itertools.product(GPUS, JOBS))
    return [float(g) for g, _ in pairs], [float(j) for _, j in pairs]


def test_exact_power_law_is_recovered() -> None:
    gpus, jobs = grid()
    y = [3.0 * g**0.5 * j**1.5 for g, j in zip(gpus, jobs, strict=True)]
    fit = fit_power_law(y, {"GPUs": gpus, "jobs": jobs})
    assert fit.exponents == pytest.approx({"GPUs": 0.5, "jobs": 1.5})
    assert fit.coefficient == pytest.approx(3.0) and fit.r2 == pytest.approx(1.0)
    assert fit.predict(GPUs=1024, jobs=1000) == pytest.approx(3.0 * 1024**0.5 * 1000**1.5)
    assert fit.describe("wall time") == (
        "wall time ∝ GPUs^0.50 · jobs^1.50 (R² 1.000 over 16 runs)")


def test_noisy_measurements_give_close_exponents() -> None:
    gpus, jobs = grid()
    noise = np.random.default_rng(7).lognormal(0.0, 0.05, len(gpus))
    y = [0.01 * g**0.8 * j**1.2 * n for g, j, n in zip(gpus, jobs, noise, strict=True)]
    fit = fit_power_law(y, {"GPUs": gpus, "jobs": jobs})
    assert fit.exponents["GPUs"] == pytest.approx(0.8, abs=0.05)
    assert fit.exponents["jobs"] == pytest.approx(1.2, abs=0.05)
    assert 0.95 < fit.r2 < 1.0


@pytest.mark.parametrize(("y", "factors", "message"), [
    ([1.0, 2.0, 0.0, 4.0], {"x": [1, 2, 3, 4]}, "y: every value must be finite and positive"),
    ([1.0, 2.0, 3.0], {"x": [1, 1, 1]}, "x takes one value"),
    ([1.0, 2.0, 3.0, 4.0], {"x": [1, 2, 3, 4], "z": [2, 4, 6, 8]}, "x and z vary together"),
    ([1.0, 2.0], {"x": [1, 2]}, "2 points cannot fit 2 unknowns"),
    ([1.0, 2.0, 3.0], {"x": [1, 2]}, "one value per point"),
])
def test_an_unfittable_set_says_why(y: list[float], factors: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_power_law(y, factors)
