"""Link delay, jitter and loss as fabric data, on a real fabric (root): netem where the kernel
has it (the stock-kernel VM of ``make vm-check``), the host-input fallback where it has not."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

import pytest

from testbed.core.errors import FabricLabError
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import tcp_counters
from testbed.emulator.fabric import Fabric
from testbed.emulator.impairments import parse_ping
from testbed.emulator.preflight import netem_available, timing_problem, virtualization
from testbed.emulator.qdisc_stats import parse_qdiscs
from testbed.emulator.traffic import iperf_end

pytestmark = [pytest.mark.root, pytest.mark.slow]

TWO_HOSTS = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
             "host_link_mbit_s": 50, "uplink_mbit_s": 50}
UDP_PACKETS = 20_000  # 1% of them lost is 200 ± 14: [0.7%, 1.3%] is ±4.3 standard deviations
needs_netem = pytest.mark.skipif(not netem_available(), reason="this kernel has no netem "
                                 "(the stock-kernel VM has it: make vm-check)")


def software_emulated() -> bool:
    """On QEMU's software emulation (the TCG VM) time is not a real machine's."""
    return timing_problem(virtualization()) is not None


def plan_of(**extra):
    return build_plan(parse_fabric({"fabric": TWO_HOSTS | extra}))


def _elsewhere(fab: Fabric, src: str, dst: str) -> dict[str, int]:
    """Packets of ``src`` -> ``dst`` lost where the kernel counts them, not on the link: every
    qdisc on the way (``src``'s interface, the leaf's port to ``dst``) and ``dst``'s UDP
    receive buffer."""
    def host_link(host: str):
        return next(x for x in fab.plan.links if host in (x.a, x.b))

    out_link, in_link = host_link(src), host_link(dst)
    sender_end = out_link.a_intf if out_link.a == src else out_link.b_intf  # src's namespace
    switch_end = in_link.b_intf if in_link.a == dst else in_link.a_intf  # the root namespace
    # each interface's root qdisc, which counts its classes' drops too (as the runs read it)
    outputs = [fab.host(src).cmd(f"tc -s -j qdisc show dev {sender_end}"),
               subprocess.run(["tc", "-s", "-j", "qdisc", "show", "dev", switch_end],
                              capture_output=True, text=True, check=True).stdout]
    qdisc_drops = sum(q.drops for out in outputs for q in parse_qdiscs(out).values())
    snmp = Path(f"/proc/{fab.host_pids()[dst]}/net/snmp").read_text()
    udp = tcp_counters.group_counters(snmp, "Udp")
    return {"qdisc_drops": qdisc_drops, "receive_buffer": udp.get("RcvbufErrors", 0)}


def udp_loss(fab: Fabric, src: str, dst: str, packets: int = UDP_PACKETS) -> float:
    """The fraction of ``packets`` UDP datagrams from ``src`` that ``dst``'s iperf3 missed,
    less those a queue on the way or ``dst``'s receive buffer dropped and counted: the link's
    loss. (On a busy machine iperf3 catches up on a stall with a burst, which a queue can
    drop, or its receiver falls behind.)"""
    before = _elsewhere(fab, src, dst)
    end = iperf_end(fab, src, dst, ["-u", "-b", "10M", "-w", "2M", "-l", "1000",
                                    "-k", str(packets)], port=5302, timeout_s=120)
    assert "sum" in end, end
    after = _elsewhere(fab, src, dst)
    counted = {k: after[k] - before[k] for k in after}
    lost = end["sum"]["lost_packets"] - sum(counted.values())
    print(f"{src}->{dst}: {end['sum']['lost_packets']} of {end['sum']['packets']} lost, "
          f"counted elsewhere {counted}")
    return lost / end["sum"]["packets"]


def test_loss_on_one_host_link_is_the_specified_fraction(tmp_path):
    plan = plan_of(links=[{"between": ["h0", "leaf0"], "loss": 0.01}])
    fab = Fabric(plan, tmp_path / "run")
    fab.start()
    try:
        lost = udp_loss(fab, "h1", "h0")  # into h0: across its link once
        assert 0.007 <= lost <= 0.013, f"{lost:.2%} lost, specified 1%"
        back = udp_loss(fab, "h0", "h1")  # out of h0
        assert 0.007 <= back <= 0.013, f"{back:.2%} lost, specified 1%"
        record = fab.impairment_record()
    finally:
        assert fab.stop() == []
    (link,) = record["links"]
    assert link["mechanism"] == ("netem" if netem_available() else "host-input")
    for counts in link["directions"].values():  # the mechanism's own count agrees
        if counts["judged"] >= 10_000:
            assert 0.007 <= counts["dropped"] / counts["judged"] <= 0.013


def test_delay_and_jitter_on_host_links_are_the_specified_round_trip(tmp_path):
    """h0 and h1's links delay 5 ms each way with ±1 ms jitter; h2 and h3's links are plain.
    While h0 pings h1, h2 pings h3 through the same switch: what the delay adds is judged
    against that plain round trip, taken at the same moment. The rest of a round trip (the
    switch, the hosts' stacks, ping waking up) is no link's delay, and on this shared
    machine it varies: CI runs have seen delayed round trips 1.3-3 ms over the spec where a
    quiet machine gives 0.4-0.9 ms over it (plain round trips 0.2-0.3 ms)."""
    delayed = {"delay_us": 5000, "jitter_us": 1000}
    plan = plan_of(hosts_per_leaf=4, links=[{"between": [h, "leaf0"]} | delayed
                                            for h in ("h0", "h1")])
    fab = Fabric(plan, tmp_path / "run")
    fab.start()
    try:
        # -U: user to user (ping's default reads the kernel's arrival stamp, taken before a
        # delay line holds the packet)
        pings = {src: fab.popen(src, ["ping", "-n", "-U", "-c", "80", "-i", "0.05",
                                      plan.node(dst).ip()], stdout=subprocess.PIPE, text=True)
                 for src, dst in (("h0", "h1"), ("h2", "h3"))}
        outs = {src: proc.communicate(timeout=60)[0] for src, proc in pings.items()}
        record = fab.impairment_record()
    finally:
        assert fab.stop() == []
    mechanism = "netem" if netem_available() else "delay-line"
    assert {lk["mechanism"] for lk in record["links"]} == {mechanism}, record
    rtts, plain = (parse_ping(outs[h])["rtt_ms"] for h in ("h0", "h2"))
    assert len(rtts) >= 76 and len(plain) >= 76, outs
    if software_emulated():  # the delay is there; how long a software-emulated CPU adds is not
        assert statistics.median(rtts) >= 19.0 and min(rtts) >= 15.0, rtts
        return
    evidence = {"delayed": rtts, "plain": plain, "delay lines": record.get("delay_lines")}
    (tmp_path / "round_trips.json").write_text(json.dumps(evidence))  # kept with pytest's runs
    # the switch adds, it never takes away: the delay is all there
    assert statistics.median(rtts) >= 19.0, evidence
    # 4 crossings of 5 ms each, beyond what the plain round trip took
    added_ms = statistics.median(rtts) - statistics.median(plain)
    assert abs(added_ms - 20.0) <= 2.0, evidence
    # each crossing adds uniform jitter of ±1 ms: the middle half of the round trips spans
    # 1.56 ms (sd 2/sqrt(3) = 1.15 ms; of 50 000 simulated draws of 80, none spanned under
    # 0.88 or over 2.54 ms). By quartiles, not the standard deviation: the machine's
    # scheduling holds a few pings long, which moves the deviation far and the quartiles not
    quartiles = statistics.quantiles(rtts, n=4)
    assert 0.8 <= quartiles[2] - quartiles[0] <= 2.6, evidence


def test_a_delay_line_that_exits_is_named_and_its_fabric_still_comes_down(tmp_path):
    if netem_available():
        pytest.skip("this kernel has netem: no delay line")
    fab = Fabric(plan_of(host_link_delay_us=2000), tmp_path / "run")
    fab.start()
    try:
        assert fab.health() is None
        line = fab.delay_lines["h1"]
        line.terminate()
        line.wait(timeout=10)
        assert "the delay line in h1 exited" in (fab.health() or "")
    finally:
        assert fab.stop() == []
    stats = json.loads((tmp_path / "run" / "delay-lines" / "h1.json").read_text())
    assert stats["kernel_dropped"] == {"0": 0}  # written at SIGTERM


def test_uplink_loss_without_netem_is_refused_before_anything_is_made(tmp_path):
    if netem_available():
        pytest.skip("this kernel has netem: loss between switches is emulated")
    plan = build_plan(parse_fabric({"fabric": TWO_HOSTS | {"leaves": 2, "hosts_per_leaf": 1,
                                                           "uplink_loss": 0.01}}))
    with pytest.raises(FabricLabError, match=r"loss between switches needs the netem qdisc"):
        Fabric(plan, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def run_delayed(tmp_path, monkeypatch, extra_ms: float | None) -> dict:
    """A 2-host job on a fabric whose host links delay 5 ms each way; with ``extra_ms``, what
    arrives at h0 from h1 is held that long first, where no spec says so (a delay line of the
    test's own, ahead of the fabric's, whose 10 ms then count from the same arrival)."""
    from testbed.core.experiment import expand
    from testbed.emulator import impairments
    from testbed.emulator.runner import Runner

    if extra_ms is not None:
        start = Fabric.start

        def start_then_delay(self):
            start(self)
            impairments.start_delay_lines(
                self.host_pids(), {"h0": [{"queue": 9, "delay_us": extra_ms * 1e3,
                                           "jitters_us": [], "sources": [
                                               self.plan.node("h1").ip()]}]},
                self.run_dir / "injected", self.state.add_process, table="raw")

        monkeypatch.setattr(Fabric, "start", start_then_delay)
    (exp,) = expand({
        "name": "delayed", "policy": "ecmp", "timeout_s": 240,
        "fabric": TWO_HOSTS | {"host_link_delay_us": 5000},
        "jobs": [{"name": "a", "hosts": ["h0", "h1"],
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 3}}]})
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    return json.loads((run_dir / "fidelity.json").read_text())


def test_the_verdict_holds_a_delayed_path_to_its_spec(tmp_path, monkeypatch):
    if software_emulated():  # the VM check of 2026-11-29 measured 22.1 and 22.6 ms for 20
        pytest.skip("under software emulation the round trip runs more than 10% long, so the "
                    "verdict rightly calls the path off its spec")
    fid = run_delayed(tmp_path, monkeypatch, None)
    judged = fid["registered"]["impairments"]
    # The path is held to its spec: no round trip or loss off it. A line that released 1% of
    # its packets over 1 ms late is a verdict of its own, on the CPU this machine's 2 cores
    # leave the lines while both hosts send at once (2026-11-29: 3 runs of 8, CI included, with
    # the worker code of before or after that day's barrier change); it must name its host.
    late = [v for v in judged["violations"] if v["sentence"].startswith("the delay line in ")]
    assert judged["judged"] and judged["violations"] == late, judged
    assert all(v["place"] in ("h0", "h1") for v in late), late
    probes = judged["measured"]["probes"]
    # the spec's 20 ms, plus the fabric's own round trip (about 0.4 ms through Open vSwitch's
    # userspace datapath) and the lines' wakeups (0.3 ms): the fastest within the invariant's
    # 10% (the lower quartile ran to 22.3 ms once, in a CI run, its fastest 21.6: this
    # machine's scheduling; analysis/impairment_invariant.py)
    assert probes and all(20.0 <= p["fastest_ms"] <= 22.0 for p in probes), probes


def test_delay_the_spec_does_not_give_makes_the_run_not_faithful_naming_the_path(
        tmp_path, monkeypatch):
    fid = run_delayed(tmp_path, monkeypatch, 25.0)
    assert fid["verdict"] == "not faithful"
    named = [r for r in fid["reasons"] if r.startswith("impairments invariant")]
    # the round trip names the links it crossed; the fabric's own line at h0 also reports
    # packets later than due (its due time counts from the kernel's arrival stamp)
    assert any("round trip h0->h1 (across h0-leaf0, h1-leaf0)" in r
               and "specified 20.00 ms" in r for r in named), fid["reasons"]


def run_lossy(tmp_path, monkeypatch, extra_loss: float | None) -> dict:
    """A 2-host job on a fabric whose h0-leaf0 link loses 1%; with ``extra_loss``, h0 also
    drops that fraction of what arrives, where no spec says so (a rule before the fabric's)."""
    from testbed.core.experiment import expand
    from testbed.emulator.runner import Runner

    if extra_loss is not None:
        start = Fabric.start

        def start_then_lose(self):
            start(self)
            pid = self.host_pids()["h0"]
            subprocess.run(["nsenter", "-t", str(pid), "-n", "iptables-legacy", "-w", "-I",
                            "INPUT", "1", "-m", "statistic", "--mode", "random",
                            "--probability", str(extra_loss), "-j", "DROP"], check=True)

        monkeypatch.setattr(Fabric, "start", start_then_lose)
    (exp,) = expand({
        "name": "lossy", "policy": "ecmp", "timeout_s": 240,
        "fabric": TWO_HOSTS | {"links": [{"between": ["h0", "leaf0"], "loss": 0.01}]},
        "jobs": [{"name": "a", "hosts": ["h0", "h1"],
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 3}}]})
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    assert (run_dir / "impairments.json").is_file()
    return json.loads((run_dir / "fidelity.json").read_text())


def test_the_verdict_holds_a_lossy_link_to_its_spec(tmp_path, monkeypatch):
    fid = run_lossy(tmp_path, monkeypatch, None)
    judged = fid["registered"]["impairments"]
    assert judged["judged"] and judged["violations"] == [], judged
    assert not any(r.startswith("impairments invariant") for r in fid["reasons"])
    (probe,) = [p for p in judged["measured"]["probes"] if p["src"] == "h0"]
    assert probe["sent"] >= 1000 and probe["links"] == ["h0-leaf0"]


def test_loss_the_spec_does_not_give_makes_the_run_not_faithful_naming_the_link(
        tmp_path, monkeypatch):
    fid = run_lossy(tmp_path, monkeypatch, 0.05)
    assert fid["verdict"] == "not faithful"
    named = [r for r in fid["reasons"] if r.startswith("impairments invariant")]
    assert named and all("h0-leaf0" in r for r in named), fid["reasons"]
