"""Simulated backend: flow-level max-min sharing, routing, collectives, traces, cluster runs."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import Allocation
from sdn_app.policies.ecmp import ecmp_spine
from testbed.cli import main
from testbed.core.errors import FabricLabError
from testbed.sim.cluster import ClusterConfig, simulate_cluster
from testbed.sim.collectives import (
    MultidimFabric,
    allreduce_time,
    hierarchical_allreduce,
    run_steps,
)
from testbed.sim.flows import Network
from testbed.sim.job_plans import host_path, job_plan, rank_order
from testbed.sim.trace_loading import load_trace
from testbed.sim.traces import TraceJob, read_helios, read_philly, synthetic
from workloads.model import predict
from workloads.themis import plan

DATA = Path(__file__).parent / "data"
GBPS = 1e9


# ----------------------------------------------------------------- max-min sharing


def test_three_flows_two_links_classic_answer() -> None:
    net = Network({"a": 10.0, "b": 10.0})
    long = net.add_flow(["a", "b"], 10)
    short_a = net.add_flow(["a"], 10)
    short_b = net.add_flow(["b"], 10)
    net.run()
    # Every flow gets 5 bit/s; 80 bits take 16 s.
    assert (long.end, short_a.end, short_b.end) == pytest.approx((16.0, 16.0, 16.0))


def test_unequal_links_and_recompute_on_departure() -> None:
    net = Network({"a": 10.0, "b": 20.0})
    f1 = net.add_flow(["a", "b"], 10)  # 80 bits
    f2 = net.add_flow(["a"], 5)  # 40 bits
    f3 = net.add_flow(["b"], 25)  # 200 bits
    net.settle()
    assert (f1.rate, f2.rate, f3.rate) == pytest.approx((5.0, 5.0, 15.0))
    net.run()
    # t=8: f2 done (40 bits at 5); f1 and f3 then split b: 10 each. f1 has 40 bits left -> 12.
    # f3: 120 bits by 8, 40 more by 12, last 40 alone at 20 bit/s -> 14.
    assert (f2.end, f1.end, f3.end) == pytest.approx((8.0, 12.0, 14.0))


def test_bundle_moves_in_lockstep_and_marks_sharing() -> None:
    net = Network({"x": 8.0, "y": 8.0})
    bundle = net.add_bundle([["x"], ["x"], ["y"]], 1, owner="job1")  # two sub-flows on x
    other = net.add_flow(["y"], 1, owner="job2")
    net.settle()
    # x carries 2 sub-flows: cap 4; y is shared with the other flow: 4 each as well.
    assert bundle.rate == pytest.approx(4.0)
    assert other.rate == pytest.approx(4.0)
    net.run()
    assert bundle.end == pytest.approx(2.0)
    assert bundle.shared == {"y"} and other.shared == {"y"}


def test_delayed_start_timers_and_zero_byte_flows() -> None:
    net = Network(default_capacity=8.0)
    seen: list[float] = []
    net.at(3.0, lambda: seen.append(net.now))
    late = net.add_flow(["l"], 2, start=1.0)
    empty = net.add_flow(["l"], 0)
    net.run()
    assert seen == [3.0]
    assert late.start == 1.0 and late.end == pytest.approx(3.0)
    assert empty.end == 0.0
    with pytest.raises(FabricLabError):
        Network({"a": 1.0}).add_flow(["nope"], 1)


def test_many_flows_share_one_link_fairly() -> None:
    net = Network({"core": 1000.0}, default_capacity=1e9)
    flows = [net.add_flow([("nic", i), "core"], 125 * (i + 1)) for i in range(1000)]
    net.run()
    # Progressive: flow i ends when the core has carried sum_j min(size_j, size_i) bits.
    ends = [f.end for f in flows]
    assert ends == sorted(ends)
    assert flows[-1].end == pytest.approx(sum(125 * 8 * (i + 1) for i in range(1000)) / 1000)


# ----------------------------------------------------------------- routing


def _ecmp_alloc(hosts: list[tuple[int, int]]) -> Allocation:
    return Allocation("j", "ecmp", tuple(sorted(hosts)), tuple(sorted({h[0] for h in hosts})))


def test_ecmp_hash_is_deterministic_and_spreads() -> None:
    src, dst = (0, 0), (1, 0)
    assert ecmp_spine(src, dst, 40000, 8) == ecmp_spine(src, dst, 40000, 8)
    spread = {ecmp_spine(src, dst, p, 8) for p in range(40000, 40200)}
    assert spread == set(range(8))


def test_two_flows_hashed_to_one_uplink_take_twice_as_long() -> None:
    spines, size, rate = 4, 1_000_000, 10 * GBPS
    alloc = _ecmp_alloc([(0, 0), (0, 1), (1, 0), (1, 1)])
    rng = random.Random(7)
    (a_src, a_dst), (b_src, b_dst) = ((0, 0), (1, 0)), ((0, 1), (1, 1))
    ports = [rng.randrange(32768, 61000) for _ in range(200)]
    a_port = ports[0]
    a_spine = ecmp_spine(a_src, a_dst, a_port, spines)
    same = next(p for p in ports[1:] if ecmp_spine(b_src, b_dst, p, spines) == a_spine)
    other = next(p for p in ports[1:] if ecmp_spine(b_src, b_dst, p, spines) != a_spine)
    alone = size * 8 / rate
    for b_port, expected in ((same, 2 * alone), (other, alone)):
        net = Network(default_capacity=rate)
        fa = net.add_flow(host_path(alloc, a_src, a_dst, spines, a_port), size, owner="a")
        fb = net.add_flow(host_path(alloc, b_src, b_dst, spines, b_port), size, owner="b")
        net.run()
        assert fa.end == pytest.approx(expected) and fb.end == pytest.approx(expected)
        assert bool(fa.shared) == (b_port == same)


def test_ocs_paths_use_the_job_circuits() -> None:
    cluster = Cluster(4, 4, 2, ocs_count=2)
    pair = cluster.allocate("pair", 4, "ocs-vclos")  # 2 leaves x 2: direct circuits
    a, b = sorted(pair.hosts)[0], sorted(pair.hosts)[2]
    path = host_path(pair, a, b, 4)
    assert path[1][0] == "cl" and path[0] == ("hu", *a) and path[-1] == ("hd", *b)
    big = cluster.allocate("big", 4, "ocs-vclos")
    src, dst = sorted(big.hosts)[0], sorted(big.hosts)[-1]
    kinds = [link[0] for link in host_path(big, src, dst, 4)]
    assert kinds in (["hu", "cl", "hd"], ["hu", "cu", "cd", "hd"])


# ----------------------------------------------------------------- collectives


def test_ring_on_isolated_vclos_matches_bytes_over_rate() -> None:
    rate, size = 100 * GBPS, 64_000_000
    cluster = Cluster(4, 4, 4)
    jobs = [cluster.allocate(f"j{i}", 8, "vclos") for i in range(2)]
    assert all(len(j.leaves) == 2 for j in jobs)
    net = Network(default_capacity=rate)
    ends: list[float] = []
    for j in jobs:
        ranks = rank_order(j)
        steps = [
            [
                (host_path(j, s, d, 4), size / 8)
                for s, d in zip(ranks, ranks[1:] + ranks[:1], strict=True)
            ]
            for _ in range(2 * 7)
        ]
        run_steps(net, steps, ends.append, owner=j.job_id)
    net.run()
    expected = 2 * 7 * (size / 8) * 8 / rate
    assert ends == pytest.approx([expected, expected], rel=1e-9)


def test_halving_doubling_and_ring_on_a_star() -> None:
    rate, size, n = 8.0, 64.0, 8
    path = lambda s, d: [("up", s), ("down", d)]  # noqa: E731
    ideal = 2 * size * (n - 1) / n * 8 / rate
    for algorithm in ("ring", "halving-doubling"):
        t = allreduce_time(Network(default_capacity=rate), list(range(n)), size, path, algorithm)
        assert t == pytest.approx(ideal)
    with pytest.raises(FabricLabError):
        allreduce_time(Network(default_capacity=rate), [0, 1, 2], size, path, "halving-doubling")


@pytest.mark.parametrize(
    ("dims", "bws", "chunks"),
    [((4, 4), (200e9, 100e9), 8), ((4, 2, 4), (300e9, 100e9, 50e9), 6), ((3, 5), (1e9, 1e9), 4)],
)
@pytest.mark.parametrize("policy", ["baseline", "themis"])
@pytest.mark.parametrize("order", ["fifo", "scf"])
def test_themis_and_baseline_match_the_model(dims, bws, chunks, policy, order) -> None:
    size = 48 << 20
    plans = plan(dims, bws, size, chunks, policy=policy)
    sim = hierarchical_allreduce(MultidimFabric(dims, bws), plans, order)
    model = predict(dims, bws, size, chunks, policy=policy, order=order)
    assert sim.time_s == pytest.approx(model.time_s, rel=1e-6)
    got = [(s.chunk, s.dim, s.op) for s in sim.schedule]
    want = [(r.chunk, r.dim, r.op) for r in model.schedule]
    assert sorted(got) == sorted(want)


# ----------------------------------------------------------------- traces


def test_helios_reader_sample() -> None:
    jobs = read_helios(DATA / "helios_sample.csv", seed=3)
    assert [(j.job_id, j.gpus, j.arrival) for j in jobs] == [
        ("5", 64, 0.0), ("1", 8, 10.0), ("3", 16, 70.0), ("4", 1, 120.0)
    ]
    assert jobs == read_helios(DATA / "helios_sample.csv", seed=3)
    assert all(j.iterations >= 1 for j in jobs)
    # The duration becomes the isolated run time (up to one iteration).
    assert jobs[0].isolated_time(100e9) == pytest.approx(7200, rel=1e-3)


def test_philly_reader_sample() -> None:
    jobs = read_philly(DATA / "philly_sample.json")
    assert [(j.job_id[-5:], j.gpus, j.arrival) for j in jobs] == [
        ("10240", 16, 0.0), ("10238", 4, 10.0), ("10270", 1, 1580.0)
    ]
    assert jobs[0].isolated_time(100e9) == pytest.approx(1800, rel=1e-3)  # last attempt


def test_trace_errors_are_one_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    for call in (
        lambda: read_helios(bad),
        lambda: read_helios(tmp_path / "missing.csv"),
        lambda: read_philly(bad),
        lambda: load_trace("nope", 10, 0.5, 64, 1),
    ):
        with pytest.raises(FabricLabError) as info:
            call()
        assert "\n" not in str(info.value)


def test_synthetic_is_deterministic_and_calibrated() -> None:
    a = synthetic(2000, 0.7, 1024, seed=5)
    assert a == synthetic(2000, 0.7, 1024, seed=5)
    assert a != synthetic(2000, 0.7, 1024, seed=6)
    assert {j.gpus for j in a} <= {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
    assert max(j.gpus for j in a) == 512
    span = a[-1].arrival - a[0].arrival
    offered = sum(j.gpus * j.isolated_time(100e9) for j in a)
    assert offered / (1024 * span) == pytest.approx(0.7, rel=0.15)


# ----------------------------------------------------------------- cluster


def _job(job_id: str, arrival: float, gpus: int, iterations: int = 1, compute: float = 10.0,
         grad: int = 0) -> TraceJob:
    return TraceJob(job_id, arrival, gpus, "custom", iterations, compute, grad)


def test_fifo_head_of_line_blocking() -> None:
    jobs = [_job("a", 0, 4), _job("b", 1, 4), _job("c", 2, 1, compute=1)]
    result = simulate_cluster(jobs, ClusterConfig(2, 2, 2, "ecmp"))
    rows = {r["job_id"]: r for r in result.rows}
    assert (rows["a"]["start_s"], rows["a"]["finish_s"]) == (0, 10)
    assert (rows["b"]["start_s"], rows["b"]["finish_s"]) == (10, 20)
    # c would fit nowhere before b starts (FIFO): it waits for b, which takes every host.
    assert rows["c"]["start_s"] == 20 and rows["c"]["wait_s"] == 18
    assert result.summary["avg_wait_s"] == pytest.approx((0 + 9 + 18) / 3)


def test_ocs_rewiring_starts_at_once_a_job_static_vclos_must_queue() -> None:
    """The allocator tests' fragmenting sequence as a trace: when x arrives, leaves 0, 3 and
    4 (best fit, hosts-first) have its hosts but no spine free to all three."""
    jobs = [_job("j0", 0, 2, compute=5), _job("j1", 1, 6, compute=1000),
            _job("j2", 2, 6, compute=1000), _job("x", 20, 6, compute=10)]
    waits = {}
    for policy in ("vclos", "ocs-vclos"):
        config = ClusterConfig(6, 4, 4, policy, ocs_count=4 if policy == "ocs-vclos" else 0,
                               placement="hosts-first", rewiring="augment")
        result = simulate_cluster(jobs, config)
        waits[policy] = {r["job_id"]: r["wait_s"] for r in result.rows}["x"]
        links = result.summary["refused_fragmented_links"]
        assert links == (1 if policy == "vclos" else 0)
    assert waits["ocs-vclos"] == 0 and waits["vclos"] > 900  # until j1 or j2 ends


def test_progress_is_reported_as_jobs_finish() -> None:
    jobs = [_job("a", 0, 4), _job("b", 1, 4), _job("c", 2, 1, compute=1)]
    calls: list[tuple[int, int, float]] = []
    simulate_cluster(jobs, ClusterConfig(2, 2, 2, "ecmp"),
                     lambda done, total, now: calls.append((done, total, now)))
    assert calls == [(1, 3, 10.0), (2, 3, 20.0), (3, 3, 21.0)]


def test_isolated_vclos_jobs_run_at_their_isolated_time() -> None:
    jobs = [_job(f"j{i}", i, 8, iterations=20, compute=0.01, grad=50_000_000) for i in range(4)]
    result = simulate_cluster(jobs, ClusterConfig(4, 4, 4, "vclos", rounds=4))
    for row in result.rows:
        assert row["slowdown"] == pytest.approx(1.0, rel=1e-9)
    plan_ = job_plan(Cluster(4, 4, 4).allocate("x", 8, "vclos"), 50e6, 100e9, 4, None)
    assert len(plan_.rails) == 1 and len(plan_.rails[0]) == 8


def test_ecmp_collisions_slow_jobs_down() -> None:
    jobs = [_job(f"j{i}", 0, 8, iterations=10, compute=0.0, grad=100_000_000) for i in range(8)]
    result = simulate_cluster(jobs, ClusterConfig(8, 4, 4, "ecmp", seed=2))
    s = result.summary
    assert s["collided_flow_fraction"] > 0 and s["avg_slowdown"] > 1.0
    assert all(r["slowdown"] >= 1 - 1e-9 for r in result.rows)


def _cli(tmp_path: Path, *extra: str) -> int:
    return main([
        "simulate-cluster", "--leaves", "4", "--spines", "4", "--hosts-per-leaf", "4",
        "--out", str(tmp_path), *extra,
    ])


@pytest.mark.parametrize("policy", ["ecmp", "vclos", "ocs-vclos"])
def test_simulate_cluster_cli_end_to_end(tmp_path: Path, policy: str) -> None:
    assert _cli(tmp_path, "--jobs", "40", "--policy", policy, "--seed", "3") == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    for key in ("avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "avg_wait_s", "avg_slowdown",
                "gpu_utilisation", "collided_flow_fraction", "refused_fragmented"):
        assert key in summary
    assert summary["policy"] == policy
    with (tmp_path / "jobs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == summary["jobs_completed"] > 0
    assert {"job_id", "gpus", "arrival_s", "start_s", "finish_s", "jct_s", "wait_s", "run_s",
            "isolated_s", "slowdown"} <= set(rows[0])
    assert not list(tmp_path.glob("*.partial"))


def test_simulate_cluster_cli_placement_and_rewiring(tmp_path: Path) -> None:
    assert _cli(tmp_path, "--jobs", "60", "--policy", "ocs-vclos", "--placement", "hosts-first",
                "--rewiring", "conservative", "--load", "1.5") == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["placement"], summary["rewiring"]) == ("hosts-first", "conservative")
    assert summary["spine_ports_per_ocs"] == 1  # 4 leaves / 4 OCSes: one port per leaf
    assert 0 <= summary["refused_fragmented_links"] <= summary["refused_fragmented"]


def test_simulate_cluster_cli_reads_traces(tmp_path: Path) -> None:
    assert _cli(tmp_path, "--leaves", "16", "--trace", f"helios:{DATA / 'helios_sample.csv'}") == 0
    assert json.loads((tmp_path / "summary.json").read_text())["jobs_completed"] == 4
    # the same --out again: its earlier results replaced only with --force
    assert _cli(tmp_path, "--trace", f"philly:{DATA / 'philly_sample.json'}", "--force") == 0
    assert json.loads((tmp_path / "summary.json").read_text())["jobs_completed"] == 3


@pytest.mark.parametrize(
    "extra",
    [
        ["--load", "-1"],
        ["--trace", "nope"],
        ["--trace", "helios:/nonexistent.csv"],
        ["--policy", "ocs-vclos", "--ocs-count", "0"],
        ["--leaves", "0"],
        ["--jobs", "0"],
        ["--collective", "ring", "--link-gbit-s", "0"],
        ["--link-gbit-s", "nan"],
        ["--load", "inf"],
        ["--rounds", "0"],
        ["--seed", "-3"],
        ["--policy", "ocs-vclos", "--spine-ports-per-ocs", "-1"],
    ],
)
def test_bad_flags_give_one_sentence_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    assert _cli(tmp_path, *extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fabriclab simulate-cluster: error:") and "\n" not in err
    assert not (tmp_path / "summary.json").exists()


def test_link_gbps_is_a_hidden_deprecated_alias_of_link_gbit_s(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(tmp_path, "--jobs", "5", "--link-gbps", "25") == 0
    assert json.loads((tmp_path / "summary.json").read_text())["link_gbit_s"] == 25
    assert "warning: --link-gbps is deprecated; use --link-gbit-s" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["simulate-cluster", "--help"])
    shown = capsys.readouterr().out
    assert "--link-gbit-s" in shown and "--link-gbps" not in shown


def test_rail_ring_rails_cross_the_fabric_with_one_nth_of_the_bytes() -> None:
    alloc = Cluster(4, 4, 4).allocate("x", 8, "vclos")  # 2 leaves x 4 hosts
    flat = job_plan(alloc, 80e6, 100e9, 4, None, collective="ring")
    rails = job_plan(alloc, 80e6, 100e9, 4, None, collective="rail-ring")
    assert flat.rail_bytes == pytest.approx([2 * 7 / 8 * 80e6])
    assert len(rails.rails) == 4 and rails.rail_bytes == pytest.approx([80e6 / 4] * 4)
    assert rails.intra_s == pytest.approx(2 * 3 / 4 * 80e6 * 8 / 100e9)
    jobs = [_job(f"j{i}", 0, 8, iterations=4, compute=0.1, grad=80_000_000) for i in range(2)]
    result = simulate_cluster(jobs, ClusterConfig(4, 4, 4, "vclos", collective="rail-ring"))
    assert [r["slowdown"] for r in result.rows] == pytest.approx([1.0, 1.0])
    # the older spelling still names it
    config = ClusterConfig(4, 4, 4, "vclos", collective="hierarchical")
    assert config.collective == "rail-ring"
    assert simulate_cluster(jobs, config).rows == result.rows
