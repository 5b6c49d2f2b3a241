"""Link delay and loss in the simulators and the model: every step of a collective pays its
path's one-way delay, a lossy path holds TCP to the Mathis et al. rate, and rate scaling keeps
the ratio of delay to transfer time (pure, no root)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from sdn_app.allocation.ledger import Allocation
from sdn_app.policies.base import via_spine
from testbed.core.experiment import expand
from testbed.core.link_model import (
    MSS_BYTES,
    hop_delay_us,
    hop_loss,
    lossy_rate_bit_s,
    mathis_rate_bit_s,
    path_loss,
)
from testbed.core.topology import build_plan
from testbed.sim.backend import GOODPUT, SimRunner
from testbed.sim.cluster import ClusterConfig, simulate_cluster
from testbed.sim.flows import Network
from testbed.sim.job_plans import LinkDelays, job_plan
from testbed.sim.link_delays import LinkImpairments, impairments_of
from testbed.sim.traces import TraceJob
from workloads.model import best_chunk_count, predict

ONE_LEAF = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 8,
            "host_link_mbit_s": 100, "uplink_mbit_s": 100}


def _experiment(fabric: dict, algorithm: str = "ring", size: int = 1024, hosts: int = 8,
                rate_scale: float = 1.0, **job: Any):
    (exp,) = expand({"name": "lat", "fabric": fabric, "rate_scale": rate_scale,
                     "policy": "ecmp" if fabric["kind"] != "multidim" else None,
                     "jobs": [{"name": "a", "hosts_wanted": hosts, "algorithm": algorithm,
                               "workload": {"kind": "allreduce", "sizes": [size],
                                            "iterations": 1, "warmup": 0}, **job}]},
                    shaped=False)
    return exp


def _time_s(exp, out: Path) -> float:
    runner = SimRunner(exp, out)
    runner.run()
    return runner.placed[0].collectives[0].time


def test_a_two_host_path_with_5ms_per_host_link_has_a_20ms_rtt() -> None:
    """A ping: 64 bytes h0 -> h1, and back once they arrived."""
    (exp,) = expand({"name": "ping", "fabric": {**ONE_LEAF, "hosts_per_leaf": 2,
                                                "host_link_delay_us": 5000},
                     "jobs": [{"name": "a", "hosts": ["h0", "h1"],
                               "workload": {"kind": "allreduce", "sizes": [64]}}]})
    plan = build_plan(exp.fabric)
    impairments = impairments_of(plan)
    assert impairments is not None
    net = Network(default_capacity=100e6 * GOODPUT)
    there, back = via_spine((0, 0), (0, 1), 0), via_spine((0, 1), (0, 0), 0)
    impairments.apply(net, there + back)
    arrived: list[float] = []
    net.add_flow(there, 64, on_done=lambda _f: net.add_flow(
        back, 64, on_done=lambda _g: arrived.append(net.now)))
    net.run()
    assert arrived[0] == pytest.approx(0.020, rel=0.01)


@pytest.mark.parametrize(("algorithm", "steps"), [("ring", 2 * 7), ("halving-doubling", 2 * 3)])
def test_a_latency_bound_all_reduce_pays_each_step_s_path_delay(
        tmp_path: Path, algorithm: str, steps: int) -> None:
    """Ring: 2(n-1) steps, halving-doubling 2 log2 n, each over two host links (one leaf)."""
    bare = _time_s(_experiment(ONE_LEAF, algorithm), tmp_path / "a")
    slow = _time_s(_experiment({**ONE_LEAF, "host_link_delay_us": 1000}, algorithm),
                   tmp_path / "b")
    assert slow - bare == pytest.approx(steps * 2 * 1e-3, rel=1e-6)


def test_across_leaves_a_ring_pays_the_hops_its_chain_crosses(tmp_path: Path) -> None:
    """Ring h0 h1 | h2 h3 on two leaves: hops h0->h1 and h2->h3 stay on a leaf (two host
    links), h1->h2 and h3->h0 cross the spines (and two uplinks). A rank sends each step once
    its predecessor's data has arrived (rank by rank, as the workers do), so the collective
    pays a chain of 6 hops, half of them across, not the slowest path at each of 6 steps."""
    fabric = {**ONE_LEAF, "leaves": 2, "spines": 2, "hosts_per_leaf": 2}
    bare = _time_s(_experiment(fabric, hosts=4), tmp_path / "a")
    slow = _time_s(_experiment({**fabric, "host_link_delay_us": 100, "uplink_delay_us": 1000},
                               hosts=4), tmp_path / "b")
    local, across = 2 * 100, 2 * 100 + 2 * 1000
    assert slow - bare == pytest.approx(3 * (local + across) * 1e-6, rel=1e-6)


def test_rate_scale_keeps_the_ratio_of_delay_to_transfer_time(tmp_path: Path) -> None:
    """100 Gbit/s links with 2 µs per hop, simulated as they are and as the emulator runs them
    at rate_scale 0.0001 (10 Mbit/s, 20 ms): the same real time on a latency-bound collective."""
    fabric = {**ONE_LEAF, "host_link_mbit_s": 100_000, "uplink_mbit_s": 100_000,
              "host_link_delay_us": 2}
    real = _time_s(_experiment(fabric, size=4096), tmp_path / "real")
    scaled_exp = _experiment(fabric, size=4096, rate_scale=0.0001)
    runner = SimRunner(scaled_exp, tmp_path / "scaled")
    run_dir = runner.run()
    emulated = runner.placed[0].collectives[0].time
    assert emulated * 0.0001 == pytest.approx(real, rel=0.10)
    assert 2 * 14 * 2e-6 / real > 0.5  # latency-bound: delay is most of it
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["link_impairments"]["host"] == {
        "delay_us": 20_000, "delay_real_us": 2, "jitter_us": 0, "jitter_real_us": 0, "loss": 0}


def test_a_run_on_perfect_wires_records_no_impairments(tmp_path: Path) -> None:
    runner = SimRunner(_experiment(ONE_LEAF), tmp_path)
    run_dir = runner.run()
    assert "link_impairments" not in json.loads((run_dir / "summary.json").read_text())
    (job,) = json.loads((run_dir / "jobs.json").read_text())
    assert "dim_delays_us" not in job and "dim_losses" not in job


def test_mathis_bound_and_path_loss() -> None:
    assert path_loss([0.01, 0.01]) == pytest.approx(1 - 0.99**2)
    assert mathis_rate_bit_s(0.0, 0.01) == math.inf == mathis_rate_bit_s(0.01, 0.0)
    rate = mathis_rate_bit_s(0.010, 0.005)  # 10 ms RTT, 0.5% loss
    assert rate == pytest.approx(MSS_BYTES * 8 / (0.010 * math.sqrt(2 * 0.005 / 3)))
    assert 19e6 < rate < 21e6
    assert lossy_rate_bit_s(100e6, 0.005, 0.005) == rate
    assert lossy_rate_bit_s(1e6, 0.005, 0.005) == 1e6  # the link, when it is slower
    assert (hop_delay_us("switch", 5), hop_delay_us("ring", 5)) == (10, 5)
    assert hop_loss("switch", 0.1) == pytest.approx(0.19)


def test_a_lossy_path_holds_a_flow_to_the_tcp_rate() -> None:
    net = Network(default_capacity=1e9)
    path = [("hu", 0, 0), ("hd", 0, 1)]
    net.delays_s.update(dict.fromkeys(path, 0.0025))  # RTT 10 ms
    net.losses[path[0]] = 0.005
    flow = net.add_flow(path, 1_000_000)
    net.run()
    rate = mathis_rate_bit_s(0.010, 0.005)
    assert flow.end == pytest.approx(8e6 / rate + 0.005, rel=1e-9)


def test_the_simulator_and_the_model_agree_on_a_delayed_dimension(tmp_path: Path) -> None:
    """A multidim job: the model's α (the hop delay per step) against the simulator's
    timeline, latency-bound (4 KiB over 4x2 at 100 Mbit/s, 1 ms per link)."""
    fabric = {"kind": "multidim", "dims": [{"size": 4, "mbit_s": 100, "delay_us": 1000},
                                           {"size": 2, "mbit_s": 100, "delay_us": 1000}]}
    exp = _experiment(fabric, "baseline", size=4096, hosts=8, chunks=2)
    runner = SimRunner(exp, tmp_path)
    run_dir = runner.run()
    (job,) = json.loads((run_dir / "jobs.json").read_text())
    assert job["dim_delays_us"] == [2000, 2000] and job["dim_losses"] == [0, 0]
    simulated = runner.placed[0].collectives[0].time
    model = runner.placed[0].run.model_s["4096"]
    assert simulated == pytest.approx(model, rel=0.10)
    assert simulated > (2 * 3 + 2 * 1) * 2e-3  # a chunk's 8 steps of 2 ms, at least


def test_the_ring_dimension_s_hop_is_one_link(tmp_path: Path) -> None:
    plan = build_plan(expand({"name": "r", "fabric": {"kind": "multidim", "dims": [
        {"size": 4, "mbit_s": 10, "kind": "ring", "delay_us": 300}]},
        "jobs": [{"name": "a", "hosts_wanted": 4, "algorithm": "baseline",
                  "workload": {"kind": "allreduce", "sizes": [64]}}]}, shaped=False)[0].fabric)
    imp = LinkImpairments(plan)
    assert imp.of(("up", 0, 1)) == (pytest.approx(300e-6), 0.0)
    assert imp.of(("down", 0, 2)) == (0.0, 0.0)


def test_the_model_s_alpha_holds_the_hop_delays() -> None:
    ring = [predict([8], [1e9], 4096, 1, policy="baseline", dim_algorithm="ring",
                    dim_delays_s=[d]).time_s for d in (0, 1e-3)]
    hd = [predict([8], [1e9], 4096, 1, policy="baseline", dim_algorithm="halving-doubling",
                  dim_delays_s=[d]).time_s for d in (0, 1e-3)]
    assert ring[1] - ring[0] == pytest.approx(14e-3)
    assert hd[1] - hd[0] == pytest.approx(6e-3)


def test_link_delays_move_the_best_chunk_count_down() -> None:
    """More chunks pipeline the dimensions; each pays every step's delay once more."""
    best = [best_chunk_count([4, 4], [100e9, 50e9], 64 * 2**20, policy="themis",
                             dim_delays_s=[d, d])[0] for d in (0, 1e-5, 1e-3)]
    assert best[0] > best[1] > best[2]
    assert best == [256, 8, 2]


def test_a_lossy_dimension_slows_the_model_to_the_tcp_rate() -> None:
    fast = predict([4], [1e9], 2**24, 1, policy="baseline")
    lossy = predict([4], [1e9], 2**24, 1, policy="baseline", dim_delays_s=[0.005],
                    dim_losses=[0.005])
    assert lossy.time_s == pytest.approx(
        1.5 * 2**24 * 8 / mathis_rate_bit_s(0.010, 0.005) + 6 * 0.005, rel=1e-6)
    assert lossy.time_s > 10 * fast.time_s


def _alloc(hosts: list[tuple[int, int]]) -> Allocation:
    return Allocation("j", "ecmp", tuple(sorted(hosts)), tuple(sorted({h[0] for h in hosts})))


def test_the_cluster_simulator_s_job_plans_pay_each_step_s_path() -> None:
    delays = LinkDelays(host_link_s=1e-6, uplink_s=10e-6)
    one_leaf = job_plan(_alloc([(0, s) for s in range(4)]), 1e6, 100e9, 2, random.Random(1),
                        delays=delays)
    assert one_leaf.latency_s == pytest.approx(6 * 2e-6)
    two = job_plan(_alloc([(0, 0), (0, 1), (1, 0), (1, 1)]), 1e6, 100e9, 2, random.Random(1),
                   delays=delays)
    assert two.latency_s == pytest.approx(6 * 22e-6)
    hd = job_plan(_alloc([(0, 0), (0, 1), (1, 0), (1, 1)]), 1e6, 100e9, 2, random.Random(1),
                  collective="halving-doubling", delays=delays)
    assert 4 * 2e-6 < hd.latency_s <= 4 * 22e-6
    rail = job_plan(_alloc([(0, 0), (0, 1), (1, 0), (1, 1)]), 1e6, 100e9, 2, random.Random(1),
                    collective="rail-ring", delays=delays)
    assert rail.latency_s == pytest.approx(2 * 1 * 2e-6 + 2 * 1 * 22e-6)
    assert job_plan(_alloc([(0, 0), (0, 1)]), 1e6, 100e9, 2, None).latency_s == 0


def test_a_cluster_job_alone_runs_longer_by_its_steps_delays() -> None:
    job = TraceJob(job_id="j", arrival=0.0, gpus=4, iterations=10, compute_s=0.01,
                   grad_bytes=1e6, model="m")
    runs = [simulate_cluster([job], ClusterConfig(1, 1, 4, "ecmp", host_link_delay_s=d))
            for d in (0.0, 1e-4)]
    (a,), (b,) = runs[0].rows, runs[1].rows
    assert b["run_s"] - a["run_s"] == pytest.approx(10 * 6 * 2e-4, rel=1e-6)
    assert runs[1].summary["host_link_delay_us"] == pytest.approx(100)
