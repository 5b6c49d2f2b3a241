"""The simulator core keeps its results: small cluster runs against the records made before it
was rewritten for speed, and the numpy filler against the reference, side by side."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from sim_cases import CASES, run_case

from testbed.core.errors import FabricLabError
from testbed.sim.flows import Network

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


def test_a_route_is_reused_and_belongs_to_its_network() -> None:
    net = Network({"a": 8.0, "b": 8.0})
    route = net.route([["a"], ["a", "b"]])
    assert route.links == {"a": 2, "b": 1} and route.cap_bit_s == 4.0
    first, second = net.add_bundle(route, 1, owner=1), net.add_bundle(route, 1, owner=2)
    net.run()
    # Both cross a twice: 4 sub-flows share 8 bit/s, 2 bit/s each; 8 bits take 4 s.
    assert (first.end, second.end) == (4.0, 4.0)
    assert first.shared == second.shared == {"a", "b"}
    with pytest.raises(FabricLabError, match="another network"):
        Network({"a": 8.0}).add_bundle(route, 1)


def test_an_unknown_link_leaves_the_network_usable() -> None:
    net = Network({"a": 1.0, "b": 2.0})
    with pytest.raises(FabricLabError, match="not in the network"):
        net.add_flow(["a", "b", "nope"], 1)
    flow = net.add_flow(["a", "b"], 1)
    net.run()
    assert (flow.cap, flow.end) == (1.0, 8.0)


def test_ends_of_a_component_that_comes_apart() -> None:
    # x joins a and b; when x ends, a and b are separate again and each gets its link.
    net = Network({"l1": 10.0, "l2": 10.0})
    x = net.add_flow(["l1", "l2"], 5)  # 40 bits at 5 bit/s: ends at 8 s
    a = net.add_flow(["l1"], 15)  # 120 bits: 40 by 8 s, then 80 at 10 bit/s: 16 s
    b = net.add_flow(["l2"], 10)  # 80 bits: 40 by 8 s, then 40 at 10 bit/s: 12 s
    net.run()
    assert (x.end, b.end, a.end) == (8.0, 12.0, 16.0)
    # One recompute for the three arrivals, then one per part when x ends; none after.
    assert net.recomputes == 3
