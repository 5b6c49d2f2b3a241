"""The simulator core keeps its results: small cluster runs against the records made before it
was rewritten for speed, and the numpy filler against the reference, side by side."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from sim_cases import CASES, run_case

RECORDED = json.loads((Path(__file__).parent / "data" / "sim_cases.json").read_text())


def _same_jobs(got: list, want: list) -> None:
    assert [j[0] for j in got] == [j[0] for j in want]
    for (job, start, finish, collided), (_, start0, finish0, collided0) in zip(
            got, want, strict=True):
        assert math.isclose(start, start0, rel_tol=1e-9), (job, start, start0)
        assert math.isclose(finish, finish0, rel_tol=1e-9), (job, finish, finish0)
        assert collided == collided0, job


@pytest.mark.parametrize("name", sorted(CASES))
def test_cluster_runs_match_the_recorded_results(name: str) -> None:
    got = run_case(name)
    assert got["summary"] == RECORDED[name]["summary"]
    _same_jobs(got["jobs"], RECORDED[name]["jobs"])


@pytest.mark.parametrize("name", ["ecmp-ring", "ecmp-hier"])
def test_numpy_and_reference_fillers_give_the_same_jobs(name: str) -> None:
    numpy = run_case(name, sharing="numpy")
    reference = run_case(name, sharing="reference")
    assert numpy["summary"] == reference["summary"]
    _same_jobs(numpy["jobs"], reference["jobs"])
