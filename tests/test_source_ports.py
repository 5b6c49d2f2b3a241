"""Seeded source ports: the knob, the workers that bind them (real sockets on loopback) and
the simulator that hashes them, so one ECMP draw repeats from run to run."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_sim_backend import collided, demo_like, run

from analysis.ecmp_draw import ring_flows
from analysis.report import build_report
from sdn_app.policies.ecmp import collision_chance
from testbed.core.errors import SpecError
from testbed.core.experiment import expand
from testbed.core.ports import SPORTS, seeded_source_ports
from workloads.launcher import local_configs, run_in_threads
from workloads.worker import WorkerConfig, link_plan


def test_seeded_ports_are_distinct_in_range_and_repeat() -> None:
    ports = seeded_source_ports(7, "j0", 1, 50)
    assert len(set(ports)) == 50 and all(SPORTS[0] <= p < SPORTS[1] for p in ports)
    assert seeded_source_ports(7, "j0", 1, 50) == ports
    assert seeded_source_ports(7, "j0", 1, 3) == ports[:3]  # a prefix does not depend on count
    assert seeded_source_ports(8, "j0", 1, 3) != ports[:3]
    assert seeded_source_ports(7, "j0", 0, 3) != ports[:3]
    assert seeded_source_ports(7, "j0-solo", 1, 3) != ports[:3]


def test_workers_connect_from_their_seeded_ports(tmp_path: Path) -> None:
    configs = local_configs(ranks=4, dims=[4], out_dir=tmp_path, sizes=[1024], iterations=1,
                            source_port_seed=3, timeout=10.0)
    for c in configs:
        _, specs = link_plan(WorkerConfig.model_validate(c))
        assert [s.sport for s in specs] == seeded_source_ports(3, "job0", c["rank"], len(specs))
    bound = run_in_threads(configs, lambda w: sorted(
        link.out_sock.getsockname()[1] for link in w.transport.links.values()))
    assert bound == [sorted(seeded_source_ports(3, "job0", r, len(b)))
                     for r, b in enumerate(bound)]


def test_without_a_seed_the_kernel_picks_the_ports(tmp_path: Path) -> None:
    (c, *_) = local_configs(ranks=2, dims=[2], out_dir=tmp_path, sizes=[1024])
    assert all(s.sport == 0 for s in link_plan(WorkerConfig.model_validate(c))[1])


def test_a_transport_that_cannot_bind_refuses_the_seed() -> None:
    data = demo_like("ecmp")
    data["jobs"][0] |= {"transport": "rpc", "source_port_seed": 1}
    with pytest.raises(SpecError, match="source_port_seed: transport rpc"):
        expand(data)


def test_the_simulator_hashes_the_seeded_ports(tmp_path: Path) -> None:
    """With a seed, the simulator's own seed no longer moves the ECMP draw; without one it
    does (seed 106 draws no collision, seed 1 one: test_sim_backend)."""
    data = demo_like("ecmp")
    for j in data["jobs"]:
        j["source_port_seed"] = 1
    routes = []
    for seed in (1, 106):
        runner, _ = run(data, tmp_path / str(seed), seed)
        routes.append(runner.routes["together"])
        assert collided(runner)
    assert routes[0] == routes[1]


def test_collision_chance_is_exact() -> None:
    # two jobs' connections on one uplink group: they meet with chance 1/4
    assert collision_chance([("a", 0, 1), ("b", 0, 1)], 4) == pytest.approx(0.25)
    assert collision_chance([("a", 0, 1), ("a", 0, 1)], 4) == 0.0  # a job does not collide
    # the demo: four jobs, one connection each way between two leaves over four spines
    demo = [(f"j{k}", a, b) for a, b in ((0, 1), (1, 0)) for k in range(4)]
    assert collision_chance(demo, 4) == pytest.approx(1 - (24 / 256) ** 2)
    # leaf 0 -> 2 and leaf 1 -> 2 share only the spines' downlinks into leaf 2
    assert collision_chance([("a", 0, 2), ("b", 1, 2)], 2) == pytest.approx(0.5)
    # one job's 40 connections never collide with each other, but 4^40 draws are not counted
    assert collision_chance([("a", 0, 1)] * 40, 4) is None


def test_ring_flows_are_the_cross_leaf_ring_connections() -> None:
    leaf_of = {"h0": 0, "h1": 0, "h4": 1}
    jobs = [{"name": "a", "hosts": ["h0", "h4"]}, {"name": "b", "hosts": ["h0", "h1", "h4"]},
            {"name": "c", "hosts": ["h1"]}]
    assert ring_flows(jobs, leaf_of) == [("a", 0, 1), ("a", 1, 0), ("b", 0, 1), ("b", 1, 0)]


def test_the_routing_headline_states_the_draw_and_its_chance(tmp_path: Path) -> None:
    dirs = []
    for policy in ("ecmp", "vclos"):
        data = demo_like(policy)
        for j in data["jobs"]:
            j["source_port_seed"] = 5
        dirs.append(run(data, tmp_path / policy)[1])
    _, headlines = build_report(dirs, tmp_path / "report", "demo")
    (routing,) = [h for h in headlines if h.title.startswith("Routing")]
    assert "ECMP's draw is fixed by source_port_seed 5, the same every run; with random " \
           "source ports two jobs would share a link in 99.1% of draws" in routing.sentence
    assert routing.sentence.count("ECMP's draw") == 1  # vClos does not hash
    data = demo_like("ecmp")
    unseeded = run(data, tmp_path / "unseeded")[1]
    _, headlines = build_report([unseeded, dirs[1]], tmp_path / "report2", "demo")
    assert "a new one each run (ephemeral source ports); two jobs share a link in 99.1%" \
        in headlines[0].sentence
