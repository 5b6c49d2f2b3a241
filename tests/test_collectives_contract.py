"""Every registered collective honours the collective contract (no root): flat and as the
per-dimension algorithm of every registered schedule, its All-Reduce is exact on every rank
over loopback, its simulator steps send what its model charges, and a run on the sim backend
completes with the emulator's run-directory layout. test_collectives_contract_root.py runs the
same experiments on a real fabric. A new collective is in these tests once registered."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from collective_helpers import allreduce_counts, inputs

from testbed.core.experiment import expand
from testbed.core.registry import COLLECTIVES, SCHEDULES
from testbed.sim.backend import SimRunner
from workloads.launcher import local_configs

WORLD = 4  # a group size every built-in collective takes (halving-doubling: a power of two)


def modes() -> list[tuple[str, str]]:
    """(algorithm, dim_algorithm): each collective flat, then under every schedule (those
    that can be a dimension's: ``per_dimension``)."""
    flat = [(c, "ring") for c in COLLECTIVES.names()]
    return flat + [(s, c) for s in SCHEDULES.names() for c in COLLECTIVES.names()
                   if COLLECTIVES.get(c).per_dimension]


def ids(mode: tuple[str, str]) -> str:
    algorithm, dim_algorithm = mode
    return algorithm if algorithm in COLLECTIVES.names() else f"{algorithm}+{dim_algorithm}"


def contract_experiment(algorithm: str, dim_algorithm: str) -> dict:
    """One 4-host job across two leaves (2x2 dimensions for a schedule)."""
    return {
        "name": "contract", "policy": "ecmp",
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "host_link_mbit_s": 50, "uplink_mbit_s": 50},
        "jobs": [{"name": "j", "hosts": ["h0", "h1", "h2", "h3"], "algorithm": algorithm,
                  "dim_algorithm": dim_algorithm, "chunks": 3,
                  "workload": {"kind": "allreduce", "sizes": ["256KiB"], "iterations": 2}}],
    }


@pytest.mark.parametrize("mode", modes(), ids=ids)
def test_exact_on_every_rank_over_loopback(tmp_path: Path, mode: tuple[str, str]) -> None:
    algorithm, dim_algorithm = mode
    flat = algorithm in COLLECTIVES.names()
    cfgs = local_configs(ranks=WORLD, dims=[WORLD] if flat else [2, 2], algorithm=algorithm,
                         dim_algorithm=dim_algorithm, sizes=[4], out_dir=tmp_path,
                         timeout=10.0, chunks=3)
    counts = [1, 5, 1001]  # empty and uneven shards
    want = {c: np.sum([inputs(r, c) for r in range(WORLD)], axis=0, dtype=np.float32)
            for c in counts}
    for rank_out in allreduce_counts(cfgs, counts):
        for count, buf in zip(counts, rank_out, strict=True):
            np.testing.assert_array_equal(buf, want[count])


@pytest.mark.parametrize("name", COLLECTIVES.names())
@pytest.mark.parametrize("op", ["RS", "AG", "AR"])
def test_simulator_steps_send_what_the_model_charges(name: str, op: str) -> None:
    """Every position sends ``sent_bytes``; a flat-only collective (``ps``: servers send more
    than workers) has only an AR phase, and its ``sent_bytes`` is the mean per rank."""
    collective = COLLECTIVES.get(name)
    if not collective.per_dimension and op != "AR":
        pytest.skip(f"{name} runs flat only: no {op} phase")
    size = 1 << 20
    steps = collective.transfers(op, WORLD, size)
    assert len(steps) == collective.step_count(op, WORLD)
    sent = [sum(b for step in steps for src, _dst, b in step if src == pos)
            for pos in range(WORLD)]
    want = collective.sent_bytes(op, WORLD, size)
    if collective.per_dimension:
        assert sent == pytest.approx([want] * WORLD)
    else:
        assert sum(sent) == pytest.approx(want * WORLD)


@pytest.mark.parametrize("mode", modes(), ids=ids)
def test_runs_on_the_sim_backend(tmp_path: Path, mode: tuple[str, str]) -> None:
    (exp,) = expand(contract_experiment(*mode))
    run_dir = SimRunner(exp, tmp_path).run()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["jobs"]["j"]["mean_s"] > 0
    (job,) = json.loads((run_dir / "jobs.json").read_text())
    assert (job["algorithm"], job["dim_algorithm"]) == mode
