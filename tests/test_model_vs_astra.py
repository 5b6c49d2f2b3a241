"""The single-collective model against ASTRA-sim 1.0's recorded single All-Reduces
(benchmarks/model_vs_astra.py, benchmarks/data/astra_model_reference.csv), and the ASTRA-sim
clock terms that order its ties (workloads/astra1_clock.py)."""

import importlib.util
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from workloads import astra1_clock
from workloads.collectives.halving_doubling import COLLECTIVE as HD
from workloads.collectives.ring import COLLECTIVE as RING
from workloads.schedule_engine import Phase

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("model_vs_astra",
                                                      BENCHMARKS / "model_vs_astra.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


BENCH = _bench()
RECORDED = BENCH.load_reference()
FRESH_CASES = [(name, size, scheduler) for name in BENCH.FRESH for size in (4 << 20, 64 << 20)
               for scheduler in BENCH.SCHEDULERS]


def test_every_fresh_case_is_recorded():
    assert all(case in RECORDED for case in FRESH_CASES)


@pytest.mark.parametrize(("name", "size", "scheduler"), FRESH_CASES)
def test_the_model_with_astra_sims_alpha_is_within_one_percent_on_systems_no_fix_looked_at(
        name, size, scheduler):
    model_ns = BENCH.model_ns(BENCH.FRESH[name], size, scheduler, with_alpha=True)
    assert model_ns == pytest.approx(RECORDED[(name, size, scheduler)], rel=0.01)


def test_the_4x4_reference_under_scf_follows_astra_sims_ties():
    dims = BENCH.DEVELOPMENT_CUSTOM["dev_4x4_40_20"]
    model_ns = BENCH.model_ns(dims, 256 << 20, "themis_scf", with_alpha=True)
    assert model_ns == pytest.approx(RECORDED[("dev_4x4_40_20", 256 << 20, "themis_scf")],
                                     rel=1e-4)


def test_wire_time_rounds_every_step_down_and_adds_one_ns():
    steps = [Fraction(1000), Fraction(1000), Fraction(500)]
    assert astra1_clock.wire_ns(steps, Fraction(3)) == 333 + 333 + 166 + 1


def test_reduction_counts_the_reducing_messages_on_the_critical_path():
    size = Fraction(8 * 1_000_000)
    assert astra1_clock.reduction_ns("RS", size, 4, "ring") == 3 * 3 * 4
    assert astra1_clock.reduction_ns("RS", size, 8, "halving-doubling") == 3 * (4 + 2)
    assert astra1_clock.reduction_ns("AG", size, 4, "ring") == 0


def test_the_tie_clock_is_astra_sims_time_less_the_bandwidth_models():
    rate_bytes_per_s = Fraction(3 * 10**9)  # 3 bytes per ns
    extra = astra1_clock.tie_ns([RING, HD], [4, 4], [rate_bytes_per_s] * 2)
    size = Fraction(4000)
    phase = Phase(0, 0, 0, "AG", size, RING.sent_bytes("AG", 4, size), 3)
    exact = phase.sent / 3
    assert extra(phase) == 3 * 1333 + 1 - exact  # three steps of 4000 bytes, each rounded down
