"""The workers' barrier start time: it travels exactly in float32 parts (pure)."""

import numpy as np
import pytest

from workloads.worker import start_time_of, start_time_parts, wait_until


@pytest.mark.parametrize("t_s", [0.0, 0.000001, 84127.191055, 16_777_217.25, 2**38 + 0.5])
def test_a_start_time_survives_float32_parts_to_the_microsecond(t_s):
    parts = start_time_parts(t_s)
    assert parts.dtype == np.float32 and (parts < 2**24).all()
    assert start_time_of(parts) == pytest.approx(t_s, abs=1e-6)


def test_the_sum_of_rank_zeros_parts_and_everyone_elses_zeros_is_rank_zeros():
    parts = start_time_parts(123456.789012)
    total = parts + np.zeros(3, dtype=np.float32) + np.zeros(3, dtype=np.float32)
    assert start_time_of(total) == start_time_of(parts)
    assert start_time_of(np.zeros(3, dtype=np.float32)) == 0.0


def test_a_start_in_the_past_or_implausibly_far_is_not_waited_for():
    import time
    t0 = time.monotonic()
    wait_until(0.0)
    wait_until(t0 + 3600)
    assert time.monotonic() - t0 < 0.5
