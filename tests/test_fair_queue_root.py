"""Per-flow fair queueing (``link_queue: fair``) on a real fabric (root): each flow's packets
land in the bucket the classifier's hash names, and flows sharing an uplink share it evenly."""

from __future__ import annotations

import ipaddress
import json
import subprocess

import pytest
from fabric_checks import htb_class_counts

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import fair_queue
from testbed.emulator.fabric import Fabric
from testbed.emulator.runner import Runner

pytestmark = [pytest.mark.root, pytest.mark.slow]

SERVER_PORT = 5311
SALT = fair_queue.candidate_salts(3)[2]  # not the default: the fabric's classifier is replaced


def _client_ports(src_ips: list[str], dst_ips: list[str]) -> list[int]:
    """Client ports putting each flow (src -> dst:SERVER_PORT) in a bucket of its own."""
    ports, used = [], set()
    for src, dst in zip(src_ips, dst_ips, strict=True):
        for port in range(41000, 42000):
            b = fair_queue.bucket_hash(int(ipaddress.IPv4Address(src)),
                                       int(ipaddress.IPv4Address(dst)),
                                       port << 16 | SERVER_PORT, salt=SALT)
            if b not in used:
                used.add(b)
                ports.append(port)
                break
    return ports


def _bucket_bytes(intf: str) -> dict[int, int]:
    """Bytes each bucket class of ``intf`` sent (``tc class show`` has no JSON here)."""
    out = subprocess.run(["tc", "-s", "class", "show", "dev", intf],
                         capture_output=True, text=True, check=True).stdout
    by_minor = {int(c.split(":")[1], 16): sent_bytes
                for c, (sent_bytes, _packets) in htb_class_counts(out).items()}
    return {minor - fair_queue.FIRST_MINOR: sent_bytes for minor, sent_bytes in by_minor.items()
            if minor >= fair_queue.FIRST_MINOR}


def test_flows_sharing_an_uplink_get_their_own_buckets_and_even_shares(tmp_path):
    plan = build_plan(parse_fabric({"fabric": {
        "kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
        "host_link_mbit_s": 40, "uplink_mbit_s": 10, "link_queue": "fair"}}))
    uplink = next(lk for lk in plan.links if {lk.a, lk.b} == {"leaf0", "spine0"})
    up_intf = uplink.a_intf if uplink.a == "leaf0" else uplink.b_intf
    srcs, dsts = ["h0", "h1"], ["h2", "h3"]
    src_ips = [plan.node(h).ip() for h in srcs]
    dst_ips = [plan.node(h).ip() for h in dsts]
    cports = _client_ports(src_ips, dst_ips)
    fab = Fabric(plan, tmp_path / "run")
    fab.start()
    procs = []
    try:
        fab.set_fair_salt(SALT)
        servers = [fab.popen(d, ["iperf3", "-s", "-1", "-p", str(SERVER_PORT)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for d in dsts]
        procs += servers
        for d in dsts:
            fab.wait_listening(d, SERVER_PORT)
        clients = [fab.popen(s, ["iperf3", "-c", ip, "-p", str(SERVER_PORT), "--cport",
                                 str(port), "-t", "6", "-J"], stdout=subprocess.PIPE, text=True)
                   for s, ip, port in zip(srcs, dst_ips, cports, strict=True)]
        procs += clients
        ends = [json.loads(c.communicate(timeout=60)[0])["end"] for c in clients]
        sent = _bucket_bytes(up_intf)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert fab.stop() == []
    mbit_s = [e["sum_received"]["bits_per_second"] / 1e6 for e in ends]
    buckets = [fair_queue.bucket_hash(int(ipaddress.IPv4Address(s)),
                                      int(ipaddress.IPv4Address(d)), p << 16 | SERVER_PORT,
                                      salt=SALT)
               for s, d, p in zip(src_ips, dst_ips, cports, strict=True)]
    # each flow's data went through the bucket the pure hash names with the salt installed
    # after the fabric came up, nothing through the others
    for b in buckets:
        assert sent[b] > 2e6, (buckets, sent)  # 6 s at some 5 Mbit/s: ~3.6 MB
    assert sum(v for b, v in sent.items() if b not in buckets) < 1e5, (buckets, sent)
    assert sum(mbit_s) >= 0.85 * 10, mbit_s
    assert min(mbit_s) / max(mbit_s) >= 0.8, mbit_s


class FilterReadingRunner(Runner):
    """The runner, reading one uplink's bucket classifier as the jobs start."""

    shown = ""
    uplink = ""

    def _leg(self, fab, jobs, what, key) -> None:
        if not self.shown:
            self.shown = subprocess.run(["tc", "filter", "show", "dev", self.uplink,
                                         "parent", "5:"], capture_output=True, text=True,
                                        check=True).stdout
        super()._leg(fab, jobs, what, key)


def test_a_run_salts_the_hash_it_records_and_parts_its_known_flows(tmp_path):
    """Two seeded jobs under ECMP on fair queues: the run records a salt under which no two of
    their flows that may cross one link share a bucket, and every fair link classifies with
    it while the jobs run."""
    from testbed.core.experiment import expand
    from testbed.emulator import cbpf

    (exp,) = expand({
        "name": "fair-salt",
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "host_link_mbit_s": 50, "uplink_mbit_s": 50, "link_queue": "fair"},
        "policy": "ecmp", "timeout_s": 240, "solo_baselines": False,
        "jobs": [{"name": n, "hosts": hosts, "source_port_seed": 1,
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 2}}
                 for n, hosts in (("a", ["h0", "h2"]), ("b", ["h1", "h3"]))]})
    plan = build_plan(exp.fabric)
    uplink = next(lk for lk in plan.links if {lk.a, lk.b} == {"leaf0", "spine0"})
    runner = FilterReadingRunner(exp, tmp_path)
    runner.uplink = uplink.a_intf if uplink.a == "leaf0" else uplink.b_intf
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    record = json.loads((run_dir / fair_queue.FAIR_QUEUE_FILE).read_text())
    assert record["shared"] == [] and record["unknown_jobs"] == {}
    assert len(record["flows"]) == 4
    salt = record["salt"]
    program = cbpf.bytecode(fair_queue.classifier_program(5, fair_queue.BUCKETS, salt))
    assert f"bytecode '{program}'" in runner.shown, runner.shown
    # h0->h2 and h1->h3 may take one uplink of leaf0: their buckets differ
    up = {r["flow"].split(":")[1]: r["bucket"] for r in record["flows"]}
    assert up["h0->h2"] != up["h1->h3"] and up["h2->h0"] != up["h3->h1"]
