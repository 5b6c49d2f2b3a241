"""All-to-all workers (no root): every registered all-to-all algorithm delivers every block to
its place on loopback, its simulator steps move each block once, a spec runs it on the sim
backend with all-to-all bandwidths, and bad specs are refused in one sentence naming the
field. test_alltoall_root.py runs it on a real leaf-spine fabric."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from testbed.core.errors import FabricLabError, SpecError
from testbed.core.experiment import expand, load_experiments
from testbed.core.formulas import busbw_factor
from testbed.core.jobs import check_against_fabric
from testbed.core.registry import ALLTOALLS
from testbed.core.topology import build_plan
from testbed.core.traces import read_table
from testbed.sim.backend import SimRunner
from workloads.alltoall import block_bounds, expected_block, fill_blocks, received_correctly
from workloads.alltoall.pairwise import Pairwise
from workloads.launcher import local_configs, run_in_threads, run_local
from workloads.transports import Tag
from workloads.worker import WorkerConfig

ALGORITHMS = ALLTOALLS.names()


def alltoall_all(tmp_path: Path, world: int, algorithm: str,
                 counts: list[int]) -> list[list[np.ndarray]]:
    """All-to-all every count on ``world`` in-process ranks; each rank's receive buffers."""
    cfgs = local_configs(ranks=world, dims=[world], algorithm=algorithm, kind="alltoall",
                         sizes=[4 * world], out_dir=tmp_path, timeout=10.0)

    def body(worker) -> list[np.ndarray]:
        outs = []
        for count in counts:
            send = np.empty(count, dtype=np.float32)
            fill_blocks(send, worker.cfg.rank, world)
            kept = send.copy()
            recv = np.full(count, -1.0, dtype=np.float32)
            worker.alltoall(send, recv)
            np.testing.assert_array_equal(send, kept)  # the send buffer is left untouched
            outs.append(recv)
        return outs

    return run_in_threads(cfgs, body)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("world", [2, 3, 4, 5])
def test_every_block_reaches_its_place(tmp_path: Path, algorithm: str, world: int) -> None:
    counts = [world, world * 7, world * 1001]  # one element per block, then uneven to slices
    for rank, outs in enumerate(alltoall_all(tmp_path, world, algorithm, counts)):
        for count, recv in zip(counts, outs, strict=True):
            for sender, (lo, hi) in enumerate(block_bounds(count, world)):
                np.testing.assert_array_equal(
                    recv[lo:hi], expected_block(sender, rank, world, hi - lo),
                    err_msg=f"rank {rank}'s block from rank {sender}")
            assert received_correctly(recv, rank, world)


def test_the_check_catches_a_misplaced_block() -> None:
    world, count = 3, 12
    recv = np.concatenate([expected_block(j, 1, world, 4) for j in range(world)])
    assert received_correctly(recv, 1, world)
    swapped = np.concatenate([recv[4:8], recv[:4], recv[8:]])
    assert not received_correctly(swapped, 1, world)
    off = recv.copy()
    off[count - 1] += 1
    assert not received_correctly(off, 1, world)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("world", [2, 3, 5])
def test_simulator_steps_move_every_block_once(algorithm: str, world: int) -> None:
    algo = ALLTOALLS.get(algorithm)
    size = 1 << 20
    steps = algo.transfers(world, size)
    assert len(steps) == algo.step_count(world)
    moved = [(a, b) for step in steps for a, b, _ in step]
    assert sorted(moved) == [(a, b) for a in range(world) for b in range(world) if a != b]
    assert all(nbytes == size / world for step in steps for _, _, nbytes in step)
    for pos in range(world):
        sent = sum(nbytes for step in steps for a, _, nbytes in step if a == pos)
        assert sent == pytest.approx(algo.sent_bytes(world, size))
        # the worker connects exactly the pairs the steps use
        assert {b for step in steps for a, b, _ in step if a == pos} == {
            to for to, _ in algo.link_roles(pos, world)}


def test_pairwise_steps_are_permutations() -> None:
    for step in ALLTOALLS.get("pairwise").transfers(5, 1.0):
        assert sorted(a for a, _, _ in step) == sorted(b for _, b, _ in step) == list(range(5))


def test_workers_write_alltoall_traces_with_alltoall_busbw(tmp_path: Path) -> None:
    world, sizes = 4, [4 * 4, 4 * 4 * 1000]
    res = run_local(ranks=world, sizes=sizes, algorithm="pairwise", kind="alltoall",
                    iterations=2, warmup=1, out_dir=tmp_path, timeout=15.0)
    assert [(r.size, r.correct, r.in_place, r.wrong) for r in res.rows] == [
        (s, True, False, 0) for s in sizes]
    for r in res.rows:
        assert r.busbw == pytest.approx(r.algbw * (world - 1) / world)
    colls = read_table(tmp_path, "collectives").to_pandas()
    assert set(colls["collective"]) == {"alltoall"} and set(colls["algorithm"]) == {"pairwise"}
    assert len(colls) == world * len(sizes) * 3
    phases = read_table(tmp_path, "phases").to_pandas()
    assert set(phases["op"]) == {"A2A"} and set(phases["rank"]) == set(range(world))


def test_a_plugged_in_algorithm_runs_by_name(tmp_path: Path) -> None:
    class Reversed(Pairwise):
        """Pairwise exchange, farthest peer first."""

        name = "pairwise-reversed"

        def link_roles(self, pos: int, n: int) -> list[tuple[int, int]]:
            return super().link_roles(pos, n)[::-1]

        def run(self, group, send, recv, coll) -> None:
            n, p = group.size, group.pos
            bounds = block_bounds(send.size, n)
            np.copyto(recv[slice(*bounds[p])], send[slice(*bounds[p])])
            roles = self.link_roles(p, n)
            for step, (link, (to, frm)) in enumerate(zip(group.links, roles, strict=True)):
                link.exchange(Tag(coll, 0, 0, step), send[slice(*bounds[to])],
                              recv[slice(*bounds[frm])])

    ALLTOALLS.register("pairwise-reversed", Reversed())
    try:
        for rank, (recv,) in enumerate(alltoall_all(tmp_path, 3, "pairwise-reversed", [3 * 5])):
            assert received_correctly(recv, rank, 3)
    finally:
        ALLTOALLS.unregister("pairwise-reversed")


def spec(**job: object) -> dict:
    """A 4-host all-to-all job across two leaves (keys of ``job`` replace the defaults)."""
    base = {"name": "a", "hosts": ["h0", "h1", "h2", "h3"],
            "workload": {"kind": "alltoall", "sizes": ["64KiB"], "iterations": 2}}
    return {"name": "a2a", "policy": "ecmp",
            "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                       "host_link_mbit_s": 50, "uplink_mbit_s": 50},
            "jobs": [{**base, **job}]}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_runs_on_the_sim_backend(tmp_path: Path, algorithm: str) -> None:
    (exp,) = expand(spec(algorithm=algorithm))
    run_dir = SimRunner(exp, tmp_path).run()
    job = json.loads((run_dir / "summary.json").read_text())["jobs"]["a"]
    assert (job["workload"], job["algorithm"]) == ("alltoall", algorithm)
    assert job["busbw_gbit_s"] == pytest.approx(job["algbw_gbit_s"] * busbw_factor(4, "alltoall"))
    # each host link carries (n-1)/n of 64 KiB per all-to-all at best: busbw ≤ the link rate
    assert 0 < job["busbw_gbit_s"] <= 0.050 * 1.0001
    colls = read_table(run_dir / "jobs" / "a", "collectives").to_pandas()
    assert set(colls["collective"]) == {"alltoall"}
    (record,) = json.loads((run_dir / "jobs.json").read_text())
    assert record["algorithm"] == algorithm and record["chunks"] is None


def test_the_experiment_file_loads() -> None:
    runs = load_experiments(Path(__file__).parent.parent / "experiments" / "alltoall.yaml")
    assert [r.policy for r in runs] == ["ecmp", "vclos"] and all(r.solo_baselines for r in runs)
    for r in runs:
        check_against_fabric(r, build_plan(r.fabric))
        assert {j.workload.kind for j in r.jobs} == {"alltoall"}


def test_an_alltoall_job_defaults_to_pairwise() -> None:
    (exp,) = expand(spec())
    assert exp.jobs[0].algorithm == "pairwise"


@pytest.mark.parametrize(("job", "field", "words"), [
    ({"workload": {"kind": "alltoall", "sizes": [1000]}}, "jobs.0: workload.sizes.0",
     "1000 bytes do not split into 4 equal blocks"),
    ({"algorithm": "ring"}, "jobs.0: algorithm", "ring is an All-Reduce algorithm"),
    ({"dims": [2, 2]}, "jobs.0: dims", "leave dims out"),
    ({"algorithm": "pairwise", "workload": {"kind": "allreduce", "sizes": [1024]}},
     "jobs.0: algorithm", "pairwise is an all-to-all algorithm"),
    ({"algorithm": "no-such"}, "jobs.0.algorithm", "nor an all-to-all algorithm"),
])
def test_bad_specs_are_one_sentence_naming_the_field(job: dict, field: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        expand(spec(**job))
    assert field in str(err.value) and words in str(err.value)


def test_multidim_is_refused_naming_the_field() -> None:
    data = spec()
    data["fabric"] = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                                   {"size": 2, "mbit_s": 40, "kind": "switch"}]}
    (exp,) = expand(data)
    with pytest.raises(SpecError, match=r"jobs\.0\.workload\.kind: an alltoall job needs one "
                                        "fabric interface per host"):
        check_against_fabric(exp, build_plan(exp.fabric))


def test_the_launcher_and_the_worker_refuse_uneven_blocks(tmp_path: Path) -> None:
    with pytest.raises(FabricLabError, match=r"16 bytes do not split into 3 equal blocks .*"
                                             r"multiple of 12 bytes, e\.g\. 12 or 24"):
        run_local(ranks=3, sizes=[24, 16], algorithm="pairwise", kind="alltoall")
    (cfg,) = local_configs(ranks=1, dims=[1], algorithm="pairwise", kind="alltoall",
                           sizes=[4], out_dir=tmp_path)[:1]
    bad = dict(cfg, job=dict(cfg["job"], hosts=["rank0", "rank1"], dims=[2]),
               addresses=cfg["addresses"] * 2)
    with pytest.raises(ValidationError, match=r"workload\.sizes\.0: 4 bytes do not split into 2"):
        WorkerConfig.model_validate(bad)
    with pytest.raises(FabricLabError, match="ring is an All-Reduce algorithm"):
        run_local(ranks=2, sizes=[8], algorithm="ring", kind="alltoall")
