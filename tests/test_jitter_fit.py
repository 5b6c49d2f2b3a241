"""The jitter read from round trips beside jitter-free ones of the same delay (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.jitter import fit_jitter_ms, with_jitter


def _machine(n: int, rng: np.random.Generator) -> np.ndarray:
    """A slow machine's round trips for 20 ms of delay: late by an exponential 1.5 ms, and now
    and then by 20 ms more (a held timer)."""
    late = rng.exponential(1.5, n)
    late[rng.random(n) < 0.03] += 20.0
    return 20.0 + late


@pytest.mark.parametrize("jitter_ms", [1.0, 2.0, 3.0])
def test_the_jitter_is_found_under_a_machine_spread_as_large_as_it(jitter_ms):
    rng = np.random.default_rng(7)
    plain = _machine(400, rng)
    jittered = _machine(400, rng) + rng.uniform(-jitter_ms, jitter_ms, (400, 4)).sum(axis=1)
    assert fit_jitter_ms(jittered, plain, crossings=4, most_ms=5.0) == pytest.approx(
        jitter_ms, abs=0.2)


def test_no_jitter_reads_as_less_than_half_a_millisecond():
    """Under 0.5 ms the machine's spread hides it: ±0.5 ms on four crossings adds 0.33 ms²
    to this machine's 2.25 ms² and more."""
    rng = np.random.default_rng(7)
    assert fit_jitter_ms(_machine(400, rng), _machine(400, rng), crossings=4,
                         most_ms=5.0) < 0.5


def test_a_jitter_draw_is_added_to_each_round_trip():
    out = with_jitter([10.0, 20.0], 1.0, crossings=4)
    assert out.size == 400
    assert out.min() >= 6.0 and out.max() <= 24.0
    assert np.mean(out) == pytest.approx(15.0, abs=0.1)
    assert with_jitter([10.0], 0.0, crossings=4).tolist() == [10.0] * 200


def test_too_few_round_trips_are_refused():
    with pytest.raises(ValueError, match="at least 10"):
        fit_jitter_ms([1.0] * 5, [1.0] * 20, crossings=4, most_ms=2.0)
