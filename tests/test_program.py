"""Controller programs (pure): what each policy installs, traced packet by packet."""

from __future__ import annotations

import itertools

import pytest

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import BlockCircuits
from sdn_app.path_counters import PRIO_COUNT
from sdn_app.policies import policy_for
from sdn_app.program import (
    base_program,
    broken_paths,
    full_program,
    job_cookie,
    job_program,
    uplink_ports,
)
from sdn_app.static_routes import Unreachable, trace
from testbed.core.errors import SpecError
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan

LS = {"kind": "leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 4,
      "host_link_mbit_s": 20, "uplink_mbit_s": 20}
OCS = {"kind": "ocs_leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 2,
       "host_link_mbit_s": 20, "uplink_mbit_s": 20, "ocs_count": 4}


def plan_of(fabric):
    return build_plan(parse_fabric({"fabric": fabric}))


def groups_of(prog):
    return {(g.switch, g.group_id): g.ports for g in prog.groups}


def spines_on(path):
    return {n for lk, _ in path for n in (lk.a, lk.b) if n.startswith("spine")}


def test_ecmp_reaches_every_pair_through_every_bucket():
    plan = plan_of(LS)
    prog = base_program(plan, "ecmp")
    groups = groups_of(prog)
    assert all(len(ports) == 4 for ports in groups.values())
    for a, b in itertools.permutations(plan.hosts[:8], 2):
        seen = set()
        for bucket in range(4):
            path = trace(plan, prog.flows, a.name, b.name, groups=groups, bucket=bucket)
            seen |= spines_on(path)
        assert len(seen) == (0 if a.leaf == b.leaf else 4)


def test_vclos_job_crosses_only_its_spines():
    plan = plan_of(LS)
    cluster = Cluster(4, 4, 4)
    a = cluster.claim("a", [(0, 0), (0, 1), (1, 0), (1, 1)], "vclos")
    b = cluster.claim("b", [(0, 2), (0, 3), (1, 2), (1, 3)], "vclos")
    assert not set(a.spines) & set(b.spines)
    prog = full_program(plan, "vclos", [a, b])
    groups = groups_of(prog)
    for alloc in (a, b):
        names = [plan.hosts[leaf * 4 + slot].name for leaf, slot in alloc.hosts]
        for src, dst in itertools.permutations(names, 2):
            s, d = plan.node(src), plan.node(dst)
            for bucket in range(4):  # whatever the hash, the job's own spine
                path = trace(plan, prog.flows, src, dst, groups=groups, bucket=bucket)
                if s.leaf != d.leaf:
                    assert spines_on(path) == {f"spine{alloc.spine_of[(s.leaf, s.slot)]}"}


def test_job_rules_carry_the_job_cookie_and_go_away_with_it():
    plan = plan_of(LS)
    cluster = Cluster(4, 4, 4)
    alloc = cluster.allocate("train", 8, "vclos")
    extra = job_program(plan, alloc)
    assert extra.flows and extra.cookies() == {job_cookie("train")}
    # 8 hosts on 2 leaves: each host has a rule per job host on the other leaf, and each of
    # the 4 spines counts each of those 32 ordered pairs (sdn_app.path_counters)
    leaf_rules = [f for f in extra.flows if f.switch.startswith("leaf")]
    counters = [f for f in extra.flows if f.priority == PRIO_COUNT]
    assert len(leaf_rules) == 8 * 4 and len(counters) == 4 * 8 * 4
    assert len(extra.flows) == len(leaf_rules) + len(counters)
    assert base_program(plan, "vclos").cookies() == {0}
    assert job_cookie("train") != job_cookie("other") and job_cookie("x") > 0


@pytest.mark.parametrize("rewiring", ["augment", "milp"])
def test_ocs_job_uses_only_its_circuits_and_release_cuts_it(rewiring: str):
    plan = plan_of(OCS)
    cluster = Cluster(4, 4, 2, 4, rewiring=rewiring)
    alloc = cluster.allocate("j", 6, "ocs-vclos")  # 3 leaves x 2 hosts: through spines
    # circuits through spines are built when the program first reads them (BlockCircuits),
    # whichever rewiring placed them
    assert isinstance(alloc.circuits, BlockCircuits) and not alloc.circuits._built
    prog = full_program(plan, "ocs-vclos", [alloc])
    names = [plan.hosts[leaf * 2 + slot].name for leaf, slot in alloc.hosts]
    circuit_ports = {(c["ocs"], c["port"]) for c in _circuit_ends(job_program(plan, alloc))}
    for src, dst in itertools.permutations(names, 2):
        path = trace(plan, prog.flows, src, dst)
        for lk, _ in path:
            for node, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
                if node.startswith("ocs"):
                    assert (node, port) in circuit_ports
    cut = base_program(plan, "ocs-vclos")
    a, b = names[0], names[-1]
    with pytest.raises(Unreachable):
        trace(plan, cut.flows, a, b)


def _circuit_ends(prog):
    for f in prog.flows:
        if f.switch.startswith("ocs"):
            yield {"ocs": f.switch, "port": f.in_port}
            yield {"ocs": f.switch, "port": f.out_port}


def test_ocs_direct_pair_circuits():
    plan = plan_of(OCS)
    cluster = Cluster(4, 4, 2, 4)
    alloc = cluster.allocate("pair", 4, "ocs-vclos")
    assert alloc.circuits and all(c.end_b[0] == "leaf" for c in alloc.circuits)
    prog = full_program(plan, "ocs-vclos", [alloc])
    names = [plan.hosts[leaf * 2 + slot].name for leaf, slot in alloc.hosts]
    for src, dst in itertools.permutations(names, 2):
        path = trace(plan, prog.flows, src, dst)
        assert not spines_on(path)


def test_policy_must_fit_the_fabric():
    assert policy_for(plan_of(LS), None) == "ecmp"
    assert policy_for(plan_of(OCS), None) == "ocs-vclos"
    with pytest.raises(SpecError, match="does not route a leaf_spine fabric; use ecmp or "):
        policy_for(plan_of(LS), "ocs-vclos")


def test_ecmp_avoids_spines_that_lost_a_link_from_both_ends():
    plan = plan_of(LS)
    down = frozenset({(0, 1)})  # leaf0-spine1
    prog = base_program(plan, "ecmp", down)
    groups = groups_of(prog)
    H = 4
    for (switch, _gid), ports in groups.items():
        if switch in ("leaf0", "leaf1", "leaf2", "leaf3"):
            assert (1 + H + 1 in ports) == (switch != "leaf0" and _gid != 1), (switch, _gid)
    for a, b in itertools.permutations(plan.hosts[::3], 2):  # still every pair, any hash
        for bucket in range(4):
            path = trace(plan, prog.flows, a.name, b.name, groups=groups, bucket=bucket)
            if {a.leaf, b.leaf} & {0} and a.leaf != b.leaf:
                assert "spine1" not in spines_on(path)


def test_uplink_ports_name_both_ends_and_a_broken_vclos_path_is_one_sentence():
    plan = plan_of(LS)
    ports = uplink_ports(plan)
    assert ports[("leaf0", 1 + 4 + 2)] == (0, 2) and ports[("spine2", 1)] == (0, 2)
    assert len(ports) == 2 * 4 * 4
    cluster = Cluster(4, 4, 4)
    a = cluster.claim("a", [(0, 0), (1, 0)], "vclos")
    (spine,) = set(a.spines)
    assert broken_paths(a, frozenset({(2, spine)})) is None  # not its leaves
    reason = broken_paths(a, frozenset({(1, spine)}))
    assert reason is not None and "\n" not in reason
    assert reason.startswith("job a: link leaf1-spine") and "no other path" in reason
    one_leaf = cluster.claim("c", [(3, 0), (3, 1)], "vclos")
    assert broken_paths(one_leaf, frozenset({(3, s) for s in range(4)})) is None
