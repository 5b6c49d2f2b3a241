"""Every registered routing policy honours the policy contract (pure, no root): its programs
reach every pair of job hosts, the controller's rules and the simulator's paths agree where the
route is deterministic, and a run on the sim backend completes. ``ecmp-l3`` has its own checks.
The same policies run on a real fabric in test_policies_root.py."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from sdn_app.allocation.cluster import Cluster
from sdn_app.policies import applicable, get, policy_for
from sdn_app.policies.ecmp_l3 import l3_spine
from sdn_app.program import base_program, full_program
from sdn_app.static_routes import trace
from testbed.core.experiment import expand
from testbed.core.registry import POLICIES
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.sim.backend import SimRunner

FABRICS = {
    "leaf_spine": {"kind": "leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 2,
                   "host_link_mbit_s": 20, "uplink_mbit_s": 20},
    "ocs_leaf_spine": {"kind": "ocs_leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 2,
                       "host_link_mbit_s": 20, "uplink_mbit_s": 20, "ocs_count": 2},
    "multidim": {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 20},
                                              {"size": 2, "mbit_s": 20}]},
}


def plan_of(kind: str):
    return build_plan(parse_fabric({"fabric": FABRICS[kind]}))


def cases() -> list[tuple[str, str]]:
    return [(name, kind) for name in POLICIES.names() for kind in get(name).fabric_kinds
            if not get(name).simulator_only]


def contract_experiment(name: str, kind: str) -> dict:
    """Two 4-host jobs (one on a multidim fabric): enough to cross leaves and share spines."""
    multidim = kind == "multidim"
    jobs = [{"name": f"j{k}", "hosts_wanted": 4,
             "algorithm": "themis" if multidim else "ring",
             "workload": {"kind": "allreduce", "sizes": ["256KiB"], "iterations": 2}}
            for k in range(1 if multidim else 2)]
    return {"name": f"contract-{name}", "fabric": FABRICS[kind], "policy": name, "jobs": jobs}


def place(name: str, plan, sizes=(4, 4)):
    cluster = Cluster.for_fabric(plan.spec)
    return [get(name).allocate(cluster, f"j{k}", n) for k, n in enumerate(sizes)]


def sim_spine(path) -> int | None:
    return next((link[2] for link in path if link[0] == "ls"), None)


def traced_spine(path) -> int | None:
    return next((int(n[5:]) for lk, _ in path for n in (lk.a, lk.b) if n.startswith("spine")),
                None)


@pytest.mark.parametrize(("name", "kind"), cases())
def test_policy_reaches_every_pair_of_job_hosts(name: str, kind: str) -> None:
    plan = plan_of(kind)
    assert policy_for(plan, name) == name
    if kind == "multidim":
        prog = base_program(plan, name)
        for a, b in itertools.permutations(plan.hosts, 2):
            dim = next(d for d, (x, y) in enumerate(zip(a.coords, b.coords, strict=True))
                       if x != y)
            if sum(x != y for x, y in zip(a.coords, b.coords, strict=True)) == 1:
                trace(plan, prog.flows, a.name, b.name, dim=dim)
        return
    allocs = place(name, plan)
    prog = full_program(plan, name, allocs)
    groups = {(g.switch, g.group_id): g.ports for g in prog.groups}
    policy = get(name)
    for alloc in allocs:
        assert alloc.policy == name
        assert policy.broken(alloc, frozenset()) is None
        for src, dst in itertools.permutations(alloc.hosts, 2):
            a, b = plan.host_at(*src), plan.host_at(*dst)
            path = trace(plan, prog.flows, a.name, b.name, groups=groups)
            sim = policy.path(alloc, src, dst, getattr(plan.spec, "spines", 0), sport=40000)
            assert sim[0] == ("hu", *src) and sim[-1] == ("hd", *dst)
            if kind == "leaf_spine" and not policy.per_flow_paths:
                assert traced_spine(path) == sim_spine(sim), (src, dst)


@pytest.mark.parametrize(("name", "kind"), cases())
def test_policy_runs_on_the_sim_backend(name: str, kind: str, tmp_path: Path) -> None:
    (exp,) = expand(contract_experiment(name, kind))
    run_dir = SimRunner(exp, tmp_path).run()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok"
    assert all(j["mean_s"] > 0 for j in summary["jobs"].values())
    jobs = json.loads((run_dir / "jobs.json").read_text())
    assert {j["policy"] for j in jobs} == {name}


def test_every_fabric_kind_has_a_policy() -> None:
    for kind in FABRICS:
        assert applicable(kind)


def test_ecmp_l3_sends_every_flow_of_a_pair_one_way() -> None:
    plan = plan_of("leaf_spine")
    (alloc,) = place("ecmp-l3", plan, sizes=(8,))
    policy = get("ecmp-l3")
    used = set()
    for src, dst in itertools.permutations(alloc.hosts, 2):
        paths = {tuple(policy.path(alloc, src, dst, 4, sport)) for sport in range(40000, 40050)}
        assert len(paths) == 1
        used.add(sim_spine(next(iter(paths))))
    assert used - {None} == {0, 1, 2, 3}  # pairs spread over every spine


def test_ecmp_l3_leaves_out_a_spine_that_lost_a_link() -> None:
    plan = plan_of("leaf_spine")
    down = frozenset({(0, 2)})
    prog = base_program(plan, "ecmp-l3", down)
    for a, b in itertools.permutations(plan.hosts, 2):
        if a.leaf != b.leaf and 0 in (a.leaf, b.leaf):
            spine = traced_spine(trace(plan, prog.flows, a.name, b.name))
            assert spine != 2
            up = [s for s in range(4) if s != 2]
            assert spine == l3_spine((a.leaf, a.slot), (b.leaf, b.slot), up)
