"""Halving-doubling: flat and per dimension, exact on every rank over loopback; its links,
its simulator steps and its model inputs; non-power-of-two groups refused in one sentence."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from collective_helpers import allreduce_counts, inputs

from testbed.core.errors import FabricLabError, SpecError
from testbed.core.experiment import expand
from testbed.core.jobs import check_against_fabric
from testbed.core.registry import COLLECTIVES, SCHEDULES
from testbed.core.spec import one_switch_fabric
from testbed.core.topology import build_plan
from testbed.core.traces import read_table
from workloads.collectives import Group, shard_bounds
from workloads.collectives.halving_doubling import COLLECTIVE as HD
from workloads.collectives.ring import COLLECTIVE as RING
from workloads.hierarchical import Topology
from workloads.launcher import local_configs, run_in_threads, run_local
from workloads.worker import WorkerConfig, link_plan


def expected(world: int, count: int) -> np.ndarray:
    return np.sum([inputs(r, count) for r in range(world)], axis=0, dtype=np.float32)


def configs(tmp_path, world, dims=None, algorithm="halving-doubling", **kw):
    return local_configs(ranks=world, dims=dims or [world], algorithm=algorithm, sizes=[4],
                         out_dir=tmp_path, timeout=kw.pop("timeout", 10.0), **kw)


# ---------------------------------------------------------------- the registry's entries


def test_registry_gives_both_collectives_and_both_schedules():
    assert COLLECTIVES.get("ring") is RING and COLLECTIVES.get("halving-doubling") is HD
    assert RING.is_flat and HD.is_flat
    assert not SCHEDULES.get("themis").is_flat and not SCHEDULES.get("baseline").is_flat


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16])
def test_link_roles_are_xor_partners_distance_half_first(n):
    for p in range(n):
        roles = HD.link_roles(p, n)
        assert len(roles) == int(math.log2(n)) == HD.link_count(n)
        assert [a for a, b in roles] == [b for a, b in roles]  # send to = receive from
        assert [p ^ a for a, _ in roles] == [n >> (k + 1) for k in range(len(roles))]


@pytest.mark.parametrize("collective", [RING, HD], ids=lambda c: c.name)
@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("op", ["RS", "AR", "AG"])
def test_transfers_send_what_the_model_charges(collective, n, op):
    size = Fraction(12345, 7)
    steps = collective.transfers(op, n, size)
    assert len(steps) == collective.step_count(op, n)
    for pos in range(n):
        sent = sum(b for step in steps for a, _, b in step if a == pos)
        got = sum(b for step in steps for _, d, b in step if d == pos)
        assert sent == got == collective.sent_bytes(op, n, size)  # exact, Fractions
    for step in steps:  # every position sends exactly once per step
        assert sorted(a for a, _, _ in step) == list(range(n))
        assert all(0 <= d < n and d != a for a, d, _ in step)


def test_step_counts():
    assert [HD.step_count("RS", n) for n in (1, 2, 4, 8)] == [0, 1, 2, 3]
    assert [HD.step_count("AR", n) for n in (1, 2, 4, 8)] == [0, 2, 4, 6]
    assert [RING.step_count("AR", n) for n in (1, 2, 4, 8)] == [0, 2, 6, 14]
    assert HD.transfers("AR", 1, 64.0) == []


def test_group_size_errors():
    assert all(HD.group_size_error(n) is None for n in (1, 2, 4, 64))
    assert "power-of-two" in HD.group_size_error(6) and "6" in HD.group_size_error(6)
    assert RING.group_size_error(6) is None


def test_link_plan_connects_exactly_the_partners(tmp_path):
    cfgs = [WorkerConfig(**c) for c in configs(tmp_path, 8)]
    for cfg in cfgs:
        listen, specs = link_plan(cfg)
        assert list(listen) == [0]
        assert [(s.channel, s.slot) for s in specs] == [(0, 0), (0, 1), (0, 2)]
        assert [s.next_rank for s in specs] == [cfg.rank ^ 4, cfg.rank ^ 2, cfg.rank ^ 1]
        assert all(s.next_rank == s.prev_rank for s in specs)
    # per dimension, max_active slots of log2(n) links each; a size-1 dimension none
    cfgs = [WorkerConfig(**c) for c in configs(tmp_path, 8, [4, 1, 2], "themis",
                                               dim_algorithm="halving-doubling", max_active=2)]
    topo = Topology((4, 1, 2))
    for cfg in cfgs:
        listen, specs = link_plan(cfg)
        assert sorted(listen) == [0, 2]
        keys = [(s.channel, s.slot) for s in specs]
        assert keys == [(0, 0), (0, 1), (0, 2), (0, 3), (2, 0), (2, 1)]
        c = topo.coords(cfg.rank)
        want0 = [topo.member(cfg.rank, 0, c[0] ^ d) for d in (2, 1)]
        assert [s.next_rank for s in specs[:4]] == want0 * 2
        assert [s.next_rank for s in specs[4:]] == [topo.member(cfg.rank, 2, c[2] ^ 1)] * 2


def test_ring_link_plan_unchanged(tmp_path):
    cfg = WorkerConfig(**configs(tmp_path, 5, algorithm="ring")[2])
    _, specs = link_plan(cfg)
    assert [(s.channel, s.slot, s.next_rank, s.prev_rank) for s in specs] == [(0, 0, 3, 1)]


# ---------------------------------------------------------------- exact on loopback


@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_flat_halving_doubling_exact_on_every_rank(tmp_path, world):
    counts = [1, 3, world + 1, 1001]  # empty shards, uneven shards
    results = allreduce_counts(configs(tmp_path, world), counts)
    for rank_out in results:
        for count, buf in zip(counts, rank_out, strict=True):
            np.testing.assert_array_equal(buf, expected(world, count))


def test_reduce_scatter_owns_shard_p_then_all_gather(tmp_path):
    world, count = 8, 37  # shards of 5,5,5,5,5,4,4,4

    def body(worker):
        links = tuple(worker.transport.links[(0, i)] for i in range(3))
        group = Group(worker.cfg.rank, world, links)
        buf = inputs(worker.cfg.rank, count)
        lo, hi = HD.reduce_scatter(group, buf, coll=0)
        owned = buf[lo:hi].copy()
        HD.all_gather(group, buf, coll=1)
        return (lo, hi), owned, buf

    want = expected(world, count)
    for rank, ((lo, hi), owned, buf) in enumerate(run_in_threads(configs(tmp_path, world),
                                                                 body)):
        assert (lo, hi) == shard_bounds(count, world)[rank]
        np.testing.assert_array_equal(owned, want[lo:hi])
        np.testing.assert_array_equal(buf, want)


@pytest.mark.parametrize("dims", [[2, 4], [4, 2], [2, 2, 2], [1, 4], [4, 1, 2], [8]],
                         ids=lambda d: "x".join(map(str, d)))
@pytest.mark.parametrize("algorithm", ["baseline", "themis"])
@pytest.mark.parametrize("chunks", [1, 3, 5])
def test_hierarchical_halving_doubling_exact_on_every_rank(tmp_path, dims, algorithm, chunks):
    world = math.prod(dims)
    counts = [1, 7, 1003]
    results = allreduce_counts(
        configs(tmp_path, world, dims, algorithm, dim_algorithm="halving-doubling",
                chunks=chunks, dim_bandwidths=[1.0 + d for d in range(len(dims))]), counts)
    for rank_out in results:
        for count, buf in zip(counts, rank_out, strict=True):
            np.testing.assert_array_equal(buf, expected(world, count))


@pytest.mark.parametrize(("order", "max_active"), [("scf", 1), ("fifo", 2), ("scf", 3)])
def test_hierarchical_halving_doubling_orders_and_slots(tmp_path, order, max_active):
    results = allreduce_counts(
        configs(tmp_path, 8, [2, 4], "themis", dim_algorithm="halving-doubling", chunks=7,
                order=order, max_active=max_active), [999, 4096])
    for rank_out in results:
        for count, buf in zip([999, 4096], rank_out, strict=True):
            np.testing.assert_array_equal(buf, expected(8, count))


def test_processes_flat_and_themis_halving_doubling_both_transports(tmp_path):
    for transport in ("zerocopy", "rpc"):
        flat = run_local(ranks=4, sizes=[4 * 1001, 4 * 64], algorithm="halving-doubling",
                         transport=transport, iterations=2, warmup=1, timeout=20,
                         wall_timeout=60, out_dir=tmp_path / f"flat-{transport}")
        assert [r.count for r in flat.rows] == [64, 1001] and all(r.correct for r in flat.rows)
    hier = run_local(ranks=8, dims=[2, 4], sizes=[4 * 777], algorithm="themis",
                     dim_algorithm="halving-doubling", chunks=4, iterations=2, timeout=20,
                     wall_timeout=60, out_dir=tmp_path / "themis")
    assert [r.correct for r in hier.rows] == [True]
    colls = read_table(tmp_path / "flat-zerocopy", "collectives").to_pandas()
    assert set(colls["algorithm"]) == {"halving-doubling"} and set(colls["chunks"]) == {1}
    phases = read_table(tmp_path / "themis", "phases").to_pandas()
    # each phase records its group (its dimension's size) and what the rank sent in it,
    # halving-doubling's own count
    assert (phases["group"] == phases["dim"].map({0: 2, 1: 4})).all()
    hd = COLLECTIVES.get("halving-doubling")
    for _, p in phases.head(30).iterrows():
        n, nbytes = int(p["group"]), int(p["bytes"])
        assert p["sent_bytes"] == round(hd.sent_bytes(p["op"], n,
                                                      nbytes / n if p["op"] == "AG" else nbytes))


def test_cli_allreduce_halving_doubling(capsys):
    from testbed.cli import main

    assert main(["allreduce", "--ranks", "4", "--size", "1KiB:2KiB", "--algo",
                 "halving-doubling", "--iters", "1", "--json"]) == 0
    assert all(r["correct"] for r in json.loads(capsys.readouterr().out)["rows"])
    assert main(["allreduce", "--ranks", "8", "--size", "4KiB", "--algo", "themis",
                 "--dim-algo", "halving-doubling", "--dims", "2x4", "--chunks", "3",
                 "--iters", "1"]) == 0
    assert "themis/halving-doubling" in capsys.readouterr().out
    assert main(["allreduce", "--ranks", "6", "--size", "1KiB", "--algo",
                 "halving-doubling"]) == 2
    err = capsys.readouterr().err
    assert "power-of-two" in err and err.strip().count("\n") == 0


# ---------------------------------------------------------------- refused in one sentence


def _exp(job: dict, fabric: dict | None = None) -> dict:
    return {"name": "hd", "fabric": fabric or {
        "kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 4,
        "host_link_mbit_s": 20, "uplink_mbit_s": 20},
        "jobs": [{"name": "a", "workload": {"kind": "allreduce", "sizes": [4096]}, **job}]}


@pytest.mark.parametrize(("job", "field"), [
    ({"hosts_wanted": 6, "algorithm": "halving-doubling"}, "jobs.0: algorithm:"),
    ({"hosts": ["h0", "h1", "h2"], "algorithm": "halving-doubling"}, "jobs.0: algorithm:"),
    ({"hosts_wanted": 6, "algorithm": "themis", "dims": [2, 3],
      "dim_algorithm": "halving-doubling"}, "jobs.0: dim_algorithm:"),
    ({"hosts_wanted": 4, "algorithm": "tree"}, "jobs.0.algorithm:"),
    ({"hosts_wanted": 4, "algorithm": "themis", "dim_algorithm": "themis"},
     "jobs.0.dim_algorithm:"),
])
def test_spec_refuses_in_one_sentence(job, field):
    with pytest.raises(SpecError) as info:
        expand(_exp(job))
    msg = str(info.value)
    assert field in msg and "\n" not in msg
    if "halving" in json.dumps(job):
        assert "power-of-two" in msg and "job a" in msg


@pytest.mark.parametrize(("job", "fabric"), [
    ({"hosts_wanted": 6, "algorithm": "themis", "dim_algorithm": "halving-doubling"}, None),
    ({"hosts_wanted": 6, "algorithm": "baseline", "dim_algorithm": "halving-doubling"},
     {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 10}, {"size": 3, "mbit_s": 10}]}),
])
def test_fabric_check_refuses_derived_dims(job, fabric):
    (exp,) = expand(_exp(job, fabric))  # the dims are known only with the fabric
    with pytest.raises(SpecError) as info:
        check_against_fabric(exp, build_plan(exp.fabric))
    msg = str(info.value)
    assert msg.startswith("jobs.0.dim_algorithm:") and "power-of-two" in msg
    assert "job a" in msg and "2x3" in msg and "\n" not in msg


def test_ring_dimension_refuses_partners_beyond_its_neighbours():
    ring4 = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 10, "kind": "ring"},
                                          {"size": 4, "mbit_s": 10, "kind": "ring"}]}
    (exp,) = expand(_exp({"hosts_wanted": 8, "algorithm": "themis",
                          "dim_algorithm": "halving-doubling"}, ring4))
    with pytest.raises(SpecError) as info:
        check_against_fabric(exp, build_plan(exp.fabric))
    msg = str(info.value)
    assert msg.startswith("jobs.0.dim_algorithm:") and "fabric.dims.1" in msg
    assert "kind: switch" in msg and "\n" not in msg
    (exp,) = expand(_exp({"hosts_wanted": 8, "algorithm": "themis"}, ring4))
    check_against_fabric(exp, build_plan(exp.fabric))  # a ring runs on ring links


def test_power_of_two_dims_pass_the_checks():
    (exp,) = expand(_exp({"hosts_wanted": 8, "algorithm": "themis",
                          "dim_algorithm": "halving-doubling"}))
    check_against_fabric(exp, build_plan(exp.fabric))  # 8 hosts -> default dims 2x4
    (exp,) = expand(_exp({"hosts_wanted": 4, "algorithm": "halving-doubling"}))
    check_against_fabric(exp, build_plan(exp.fabric))
    assert exp.jobs[0].dim_algorithm == "ring"


def test_worker_and_launcher_refuse_a_bad_group(tmp_path):
    with pytest.raises(FabricLabError, match="dim_algorithm: halving-doubling needs"):
        configs(tmp_path, 6, [2, 3], "themis", dim_algorithm="halving-doubling")
    with pytest.raises(FabricLabError, match="power-of-two") as info:
        run_local(ranks=6, sizes=[64], algorithm="halving-doubling", out_dir=tmp_path)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- the sim backend


def _sim(data: dict, tmp_path):
    from testbed.sim.backend import SimRunner

    (exp,) = expand(data)
    runner = SimRunner(exp, tmp_path)
    return runner, runner.run()


def test_sim_themis_halving_doubling_matches_the_model(tmp_path):
    from analysis.load import load_run
    from testbed.sim.backend import GOODPUT
    from workloads.model import predict

    fabric = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 6}, {"size": 4, "mbit_s": 12}]}
    job = {"hosts_wanted": 8, "algorithm": "themis", "dim_algorithm": "halving-doubling",
           "chunks": 8, "order": "scf"}
    data = _exp(job, fabric)
    data["jobs"][0]["workload"] = {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 2}
    _, run_dir = _sim(data, tmp_path)
    # bandwidth only, halving-doubling sends what a ring sends: the model's time
    want = predict([2, 4], [6e6 * GOODPUT, 12e6 * GOODPUT], 1 << 20, 8, policy="themis",
                   order="scf", align=4).time_s
    r = load_run(run_dir)
    for t in r.collectives.groupby("coll")["time"].max():
        assert t == pytest.approx(want, abs=1e-6)
    jobs = json.loads((run_dir / "jobs.json").read_text())
    assert jobs[0]["dim_algorithm"] == "halving-doubling"


def test_sim_flat_halving_doubling_on_leaf_spine(tmp_path):
    from analysis.load import load_run
    from testbed.sim.backend import GOODPUT

    data = _exp({"hosts_wanted": 4, "algorithm": "halving-doubling"}, one_switch_fabric(4, 20))
    data["jobs"][0]["workload"] = {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 2}
    runner, run_dir = _sim(data, tmp_path / "flat")
    # a non-blocking switch: every step at line rate, 2 S (n-1)/n bytes per host in all
    want = 2 * (1 << 20) * 3 / 4 * 8 / (20e6 * GOODPUT)
    r = load_run(run_dir)
    assert r.collectives["time"].to_numpy() == pytest.approx(want, abs=1e-6)
    assert set(r.collectives["algorithm"]) == {"halving-doubling"}
    # one connection per ordered pair of partners: 4 ranks x log2(4) partners
    assert len(runner.routes["together"]["a"]) == 8
    ph = r.phases
    assert set(ph["op"]) == {"AR"} and set(ph["group"]) == {4}
    assert set(ph["sent_bytes"]) == {2 * (1 << 20) * 3 // 4}


def test_sim_backend_check_refuses_a_bad_group():
    from testbed.sim.backend import SimBackend

    (exp,) = expand(_exp({"hosts_wanted": 6, "algorithm": "themis",
                          "dim_algorithm": "halving-doubling"}))
    with pytest.raises(SpecError, match="dim_algorithm: halving-doubling needs"):
        SimBackend().check(exp)


def test_sim_allreduce_time_halving_doubling_partner_order():
    from testbed.sim.collectives import collective_steps

    steps = collective_steps(HD, "AR", ["a", "b", "c", "d"], 64.0, lambda s, d: [(s, d)])
    assert [[(p[0], b) for p, b in step][:2] for step in steps] == [
        [(("a", "c"), 32.0), (("b", "d"), 32.0)], [(("a", "b"), 16.0), (("b", "a"), 16.0)],
        [(("a", "b"), 16.0), (("b", "a"), 16.0)], [(("a", "c"), 32.0), (("b", "d"), 32.0)]]


def test_a_registered_collective_is_usable_from_a_spec_and_the_workers(tmp_path):
    class Mirror(type(RING)):
        name = "mirror-ring"

    COLLECTIVES.register("mirror-ring", Mirror())
    try:
        (exp,) = expand(_exp({"hosts_wanted": 3, "algorithm": "mirror-ring"}))
        assert exp.jobs[0].algorithm == "mirror-ring"
        (exp,) = expand(_exp({"hosts_wanted": 4, "algorithm": "themis",
                              "dim_algorithm": "mirror-ring"}))
        results = allreduce_counts(configs(tmp_path, 3, algorithm="mirror-ring"), [10])
        for (buf,) in results:
            np.testing.assert_array_equal(buf, expected(3, 10))
    finally:
        COLLECTIVES.unregister("mirror-ring")
    with pytest.raises(SpecError, match="mirror-ring"):
        expand(_exp({"hosts_wanted": 3, "algorithm": "mirror-ring"}))
