"""Path counters (pure): every spine counts each ordered pair of a job's hosts on different
leaves, forwarding as its delivery rule does, so the paths a trace follows are unchanged."""

from __future__ import annotations

import itertools

from sdn_app.allocation.cluster import Cluster
from sdn_app.path_counters import PRIO_COUNT, PairBytes, counted, macs, parse_dump
from sdn_app.program import ECMP_GROUP, full_program, job_cookie, job_program
from sdn_app.static_routes import trace
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan

LS = {"kind": "leaf_spine", "leaves": 2, "spines": 4, "hosts_per_leaf": 4,
      "host_link_mbit_s": 10, "uplink_mbit_s": 10}


def plan_of(fabric):
    return build_plan(parse_fabric({"fabric": fabric}))


def test_ecmp_job_gets_a_counter_per_spine_and_cross_leaf_pair_and_paths_stay():
    plan = plan_of(LS)
    cluster = Cluster(2, 4, 4)
    alloc = cluster.claim("j0", [(0, 0), (1, 0)], "ecmp")
    prog = job_program(plan, alloc)
    assert {f.priority for f in prog.flows} == {PRIO_COUNT}
    assert prog.cookies() == {job_cookie("j0")}
    # 4 spines x 2 ordered pairs (h0 -> h4, h4 -> h0)
    assert len(prog.flows) == 8
    assert {f.switch for f in prog.flows} == {f"spine{s}" for s in range(4)}
    full = full_program(plan, "ecmp", [alloc])
    groups = {(g.switch, g.group_id): g.ports for g in full.groups}
    assert all(gid >= ECMP_GROUP for _, gid in groups)
    for bucket in range(4):  # whatever the hash picks, the packet still arrives
        for src, dst in itertools.permutations(["h0", "h4"]):
            path = trace(plan, full.flows, src, dst, groups=groups, bucket=bucket)
            assert path[-1][0].b == dst or path[-1][0].a == dst


def test_counters_skip_a_spine_the_policy_programs_itself_and_ocs_fabrics():
    from sdn_app.path_counters import counter_rules

    plan = plan_of(LS)
    alloc = Cluster(2, 4, 4).claim("j", [(0, 0), (1, 0)], "ecmp")
    assert {r.switch for r in counter_rules(plan, alloc, 7, taken={"spine1"})} == {
        "spine0", "spine2", "spine3"}
    ocs = plan_of({"kind": "ocs_leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 2,
                   "host_link_mbit_s": 20, "uplink_mbit_s": 20, "ocs_count": 4})
    assert counted(plan) and not counted(ocs)


def test_parse_dump_reads_only_counters_and_names_hosts():
    plan = plan_of(LS)
    m = macs(plan)
    h0, h4 = plan.node("h0").nics[0].mac, plan.node("h4").nics[0].mac
    text = (
        "OFPST_FLOW reply (OF1.3) (xid=0x2):\n"
        f" cookie=0x5, duration=3.1s, table=0, n_packets=700, n_bytes=1048576, "
        f"priority={PRIO_COUNT},dl_src={h0.upper()},dl_dst={h4} actions=output:2\n"
        f" cookie=0x0, duration=3.1s, table=0, n_packets=9, n_bytes=999, priority=100,"
        f"dl_dst={h4} actions=output:2\n")
    assert parse_dump(3, text, m) == [PairBytes(3, "h0", "h4", 1048576)]
