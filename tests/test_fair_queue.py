"""Per-flow fair queueing's pieces without a kernel: the classifier program, its hash, and the
tc commands a fair link gets."""

from __future__ import annotations

import ipaddress

import pytest

from testbed.core.spec import SpecError, parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import cbpf, fair_queue
from testbed.emulator.shaping import htb_commands


def _tcp_packet(src: str, dst: str, sport: int, dport: int) -> bytes:
    eth = bytes(12) + (0x0800).to_bytes(2, "big")
    ip = bytes([0x45, 0]) + bytes(10) + ipaddress.IPv4Address(src).packed \
        + ipaddress.IPv4Address(dst).packed
    return eth + ip + sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + bytes(16)


def test_the_program_gives_each_flow_the_bucket_the_pure_hash_names():
    program = fair_queue.classifier_program()
    seen = set()
    for sport in range(40000, 40200):
        pkt = _tcp_packet("10.0.0.1", "10.0.0.6", sport, 5201)
        b = fair_queue.bucket_hash(int(ipaddress.IPv4Address("10.0.0.1")),
                                   int(ipaddress.IPv4Address("10.0.0.6")), sport << 16 | 5201)
        assert cbpf.run(program, pkt) == fair_queue.bucket_classid(5, b)
        seen.add(b)
    assert seen == set(range(fair_queue.BUCKETS))  # every bucket is reached


def test_non_ipv4_frames_go_to_the_default_class():
    frame = bytes(12) + (0x86DD).to_bytes(2, "big") + bytes(60)
    assert cbpf.run(fair_queue.classifier_program(), frame) == 0


def test_a_fair_link_has_a_bucket_class_and_queue_each_and_the_classifier():
    cmds = htb_commands(10, fair_quantum=14014)
    assert "default 100 " in cmds[0]
    buckets = [c for c in cmds if "parent 5:20 classid" in c]
    assert len(buckets) == fair_queue.BUCKETS
    assert sum(1 for c in cmds if "qdisc add" in c and "bfifo" in c) == fair_queue.BUCKETS
    assert not any("handle 20:" in c for c in cmds)  # 5:20 is an inner class now
    assert sum("prio 2 handle 1 bpf bytecode" in c for c in cmds) == 1  # the buckets' hash
    # the buckets' guaranteed rates add up to the data class's
    rates = [float(c.split(" rate ")[1].split("Mbit")[0]) for c in buckets]
    assert sum(rates) == pytest.approx(9.0)
    assert all(c.split(" quantum ")[1].split()[0] == "14014" for c in buckets)


@pytest.mark.parametrize(("fabric", "quantum"), [
    ({}, 65536 + 1514),  # the kernel's 64 KiB segments
    ({"segment_max_ms": 1}, 12500 + 1514),  # 1 ms of the 100 Mbit/s host links
    ({"segmentation_offload": False}, 1500 + 1514)])
def test_the_buckets_quantum_is_the_largest_segment_the_hosts_send_and_a_frame(fabric, quantum):
    from testbed.emulator import segmentation

    plan = build_plan(parse_fabric({"fabric": {
        "kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
        "host_link_mbit_s": 100, "uplink_mbit_s": 200, "link_queue": "fair", **fabric}}))
    assert fair_queue.quantum_bytes(segmentation.largest_segment_bytes(plan)) == quantum


def test_a_fifo_link_is_as_before():
    cmds = htb_commands(10)
    assert "default 20 " in cmds[0]
    assert not any("prio 2" in c or "classid 5:100" in c for c in cmds)


def test_link_queue_accepts_fifo_and_fair_only():
    base = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
            "host_link_mbit_s": 10, "uplink_mbit_s": 10}
    assert parse_fabric({"fabric": base}).link_queue == "fifo"
    assert parse_fabric({"fabric": {**base, "link_queue": "fair"}}).link_queue == "fair"
    with pytest.raises(SpecError, match="link_queue"):
        parse_fabric({"fabric": {**base, "link_queue": "sfq"}})


def _latency_jobs(seed: int | None):
    """experiments/latency.yaml's variants: (name, plan, resolved job), with ``seed`` as the
    job's source_port_seed (None: the file's own)."""
    import yaml

    from testbed.core.experiment import expand
    from testbed.core.jobs import resolve
    from testbed.core.topology import build_plan

    with open("experiments/latency.yaml") as f:
        data = yaml.safe_load(f)
    if seed is not None:
        data["jobs"] = [dict(data["jobs"][0], source_port_seed=seed)]
    for exp in expand(data, "x"):
        plan = build_plan(exp.fabric, exp.rate_scale)
        spec = exp.jobs[0]
        yield exp.name, plan, resolve(spec, plan, spec.hosts)


def test_a_salt_is_found_that_shares_no_bucket_in_any_latency_yaml_variant():
    """Whatever the seed, some salt puts no two flows of one step on a link in one bucket, so
    the fair queues split every link as the simulator's max-min rates do; the runner installs
    it (``fair_queue.json``)."""
    for seed in (None, 1, 2):
        for name, plan, job in _latency_jobs(seed):
            salt, shared = fair_queue.choose_salt(fair_queue.job_flows(plan, job))
            assert shared == [], (seed, name)
            assert fair_queue.shared_buckets(plan, job, salt) == [], (seed, name)


def test_a_shared_bucket_is_found_where_two_flows_of_a_step_cross_one_link():
    """Seed 1 under the default salt: halving-doubling sends h6->h2 and h7->h3 in one round
    through leaf1's uplink, in one bucket (each then gets half the share of the two others).
    Every flow named crosses the link named, and another salt parts them."""
    import itertools

    import networkx as nx

    found = {name: (plan, job, fair_queue.shared_buckets(plan, job))
             for name, plan, job in _latency_jobs(1)}
    plan, job, shared = found["latency-hd"]
    assert ("leaf1", "spine0", 3, [("h6", "h2"), ("h7", "h3")]) in shared
    assert found["latency-ring"][2] == []  # a ring sends one flow each way over any link
    graph = plan.graph()
    for a, b, _bucket, flows in shared:
        assert len(flows) > 1
        for src, dst in flows:
            assert (a, b) in itertools.pairwise(nx.shortest_path(graph, src, dst))
    salt, left = fair_queue.choose_salt(fair_queue.job_flows(plan, job))
    assert salt != fair_queue.DEFAULT_SALT and left == []
    assert fair_queue.shared_buckets(plan, job, salt) == []


def test_shared_buckets_need_fixed_ports_and_single_paths():
    from testbed.core.experiment import expand
    from testbed.core.jobs import resolve
    from testbed.core.topology import build_plan

    def job(seed, spines):
        (exp,) = expand({"name": "q", "fabric": {
            "kind": "leaf_spine", "leaves": 2, "spines": spines, "hosts_per_leaf": 1,
            "host_link_mbit_s": 10, "uplink_mbit_s": 10, "link_queue": "fair"},
            "jobs": [{"name": "a", "hosts": ["h0", "h1"], "source_port_seed": seed,
                      "workload": {"kind": "allreduce", "sizes": ["4KiB"]}}]})
        plan = build_plan(exp.fabric, exp.rate_scale)
        return plan, resolve(exp.jobs[0], plan, ["h0", "h1"])

    with pytest.raises(ValueError, match="source_port_seed"):
        fair_queue.shared_buckets(*job(None, 1))
    with pytest.raises(ValueError, match="several paths"):
        fair_queue.shared_buckets(*job(3, 2))
    assert fair_queue.shared_buckets(*job(3, 1)) == []


def test_every_link_of_a_fair_fabric_gets_the_quantum_and_a_fifo_fabric_none():
    from testbed.emulator.mn_topo import FabricTopo

    base = {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
            "host_link_mbit_s": 100, "uplink_mbit_s": 200, "segment_max_ms": 1}
    for queue, quantum in (("fair", 12500 + 1514), ("fifo", None)):
        plan = build_plan(parse_fabric({"fabric": {**base, "link_queue": queue}}))
        topo = FabricTopo(plan)
        infos = [topo.linkInfo(a, b) for a, b in topo.links()]
        assert len(infos) == len(plan.links)
        assert {info.get("fair_quantum") for info in infos} == {quantum}


def _demo_ecmp_jobs(overrides: dict | None = None):
    """experiments/demo.yaml's ECMP variant on fair queues: its plan and resolved jobs."""
    import yaml

    from testbed.core.experiment import expand
    from testbed.core.jobs import resolve
    from testbed.core.topology import build_plan

    with open("experiments/demo.yaml") as f:
        data = yaml.safe_load(f)
    data["fabric"] = dict(data["fabric"], link_queue="fair")
    exp = next(e for e in expand(data, "x") if e.name.endswith("ecmp"))
    plan = build_plan(exp.fabric, exp.rate_scale)
    return plan, [resolve(j.model_copy(update=overrides or {}), plan, j.hosts)
                  for j in exp.jobs]


def test_the_demos_ecmp_flows_get_a_bucket_each_on_every_link_they_may_share():
    """Under the default salt two pairs of the demo's jobs' flows may meet in one bucket on an
    uplink (j0 with j3, j1 with j2); the run's salt parts every pair, and records each flow's
    bucket."""
    import itertools

    plan, jobs = _demo_ecmp_jobs()
    flows = [f for j in jobs for f in fair_queue.job_flows(plan, j)]
    assert len(flows) == 8
    shared = {(f.job, g.job) for f, g in itertools.combinations(flows, 2)
              if f.may_meet(g) and f.bucket() == g.bucket()}
    assert shared == {("j0", "j3"), ("j1", "j2")}
    salt, record = fair_queue.run_salt(plan, jobs)
    assert salt != fair_queue.DEFAULT_SALT
    assert record["shared"] == [] and record["unknown_jobs"] == {}
    assert [r["bucket"] for r in record["flows"]] == [f.bucket(salt) for f in flows]
    assert record["flows"][0]["flow"].startswith("j0:h0->h4:")


def test_flows_of_one_job_in_different_rounds_or_on_other_links_do_not_meet():
    plan, jobs = _demo_ecmp_jobs()
    j0 = fair_queue.job_flows(plan, jobs[0])
    j1 = fair_queue.job_flows(plan, jobs[1])
    assert j0[0].may_meet(j1[0])  # h0->h4 and h1->h5 may take one of leaf0's uplinks
    assert not j0[0].may_meet(j1[1])  # h5->h1 crosses none of h0->h4's links
    assert not j0[0].may_meet(j0[1])
    later = fair_queue.Flow("j0", "h1", "h5", j1[0].key, step=1, links=j1[0].links)
    same_job = fair_queue.Flow("j0", "h0", "h4", j0[0].key, step=0, links=j0[0].links)
    assert not later.may_meet(same_job) and later.may_meet(j1[0])


def test_jobs_whose_flows_are_not_known_are_named_and_more_flows_than_buckets_share():
    plan, jobs = _demo_ecmp_jobs({"source_port_seed": None})
    salt, record = fair_queue.run_salt(plan, jobs)
    assert salt == fair_queue.DEFAULT_SALT and record["flows"] == []
    assert set(record["unknown_jobs"]) == {"j0", "j1", "j2", "j3"}
    assert "source_port_seed" in record["unknown_jobs"]["j0"]
    # 17 flows on one link: some two share one of 16 buckets whatever the salt
    link = frozenset({("leaf0", "spine0")})
    many = [fair_queue.Flow(f"j{i}", "h0", "h4", (i, 7, (40000 + i) << 16 | 7100), 0, link)
            for i in range(fair_queue.BUCKETS + 1)]
    salt, left = fair_queue.choose_salt(many, tries=64)
    assert left and all(f.bucket(salt) == g.bucket(salt) for f, g in left)
