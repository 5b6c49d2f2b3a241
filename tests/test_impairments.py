"""Link impairments on the emulator, the pure parts: which mechanism carries each link, netem's
arguments, the fallback's rules and counters, the ping probes' spec, and the invariant."""

from __future__ import annotations

import pytest

from analysis.impairment_invariant import (
    delay_line_violation,
    delay_violation,
    loss_violation,
    ping_loss_violation,
)
from testbed.core.errors import FabricLabError
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan, dim_peers, ring_neighbours
from testbed.emulator import impairments as imp
from testbed.emulator.shaping import htb_commands

LS = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
      "host_link_mbit_s": 50, "uplink_mbit_s": 50}


def plan_of(**extra):
    return build_plan(parse_fabric({"fabric": LS | extra}))


def test_perfect_wires_need_no_mechanism():
    assert imp.mechanisms(plan_of(), netem=False) == []


def test_without_netem_delay_goes_to_the_delay_line_and_loss_on_host_links_to_input():
    got = imp.mechanisms(plan_of(links=[{"between": ["h0", "leaf0"], "loss": 0.01}]), False)
    assert [(i.a, i.b, i.mechanism) for i in got] == [("h0", "leaf0", imp.HOST_INPUT)]
    both = imp.mechanisms(plan_of(host_link_delay_us=5000, host_link_loss=0.01), False)
    assert {i.mechanism for i in both} == {"delay-line+host-input"}
    assert all(i.uses(imp.DELAY_LINE) and i.uses(imp.HOST_INPUT) for i in both)
    uplinks = imp.mechanisms(plan_of(uplink_delay_us=2000), False)
    assert {(i.kind, i.mechanism) for i in uplinks} == {("uplink", imp.DELAY_LINE)}
    with pytest.raises(FabricLabError, match=r"loss between switches needs the netem qdisc"):
        imp.mechanisms(plan_of(uplink_loss=0.01), False)


def test_the_delay_line_holds_each_path_end_for_the_path_s_one_way_delay():
    plan = plan_of(host_link_delay_us=1000, uplink_delay_us=3000, uplink_jitter_us=500)
    queues = imp.delay_queues(plan)
    ip = {h.name: h.ip() for h in plan.hosts}
    # into h0: from h1 (same leaf) two host links; from h2, h3 two host links and two uplinks
    assert queues["h0"] == [
        {"queue": 0, "delay_us": 2000, "jitters_us": [], "sources": [ip["h1"]]},
        {"queue": 1, "delay_us": 8000, "jitters_us": [500, 500],
         "sources": [ip["h2"], ip["h3"]]}]
    assert set(queues) == set(ip)
    assert imp.delay_queues(plan_of()) == {}


def test_bare_acks_pass_a_wire_only_queue_and_wait_in_a_delayed_one():
    wired = imp.delay_queues(plan_of(wire_serialization=True, uplink_delay_us=3000),
                             every_source=True)["h0"]
    assert [q["delay_us"] for q in wired] == [0, 6000]  # h1 over the wire only; h2, h3 delayed
    lines = imp.steering(wired).splitlines()
    assert lines[0] == "*mangle" and lines[-1] == "COMMIT"
    h1, h2 = (q["sources"][0] for q in wired)
    # h1's bare ACKs are accepted before its queue's rule; h2's go into their queue, delayed
    assert lines[1] == (f'-A PREROUTING -s {h1}/32 -m bpf --bytecode "{imp.BARE_ACK_BYTECODE}"'
                        ' -m comment --comment "fabriclab wire: bare ACKs pass" -j ACCEPT')
    assert lines[2].startswith(f"-A PREROUTING -s {h1}/32 ") and lines[2].endswith(
        "-j NFQUEUE --queue-num 0")
    assert lines[3].startswith(f"-A PREROUTING -s {h2}/32 ") and "bpf" not in lines[3]
    assert len(lines) == 6  # h3's one rule, then COMMIT
    assert not imp.wire_only({"queue": 0, "delay_us": 0, "jitters_us": [300], "wire": "x"})
    assert not imp.wire_only({"queue": 0, "delay_us": 0, "jitters_us": []})  # no wire


def test_the_delay_line_refuses_wire_sized_packets_faster_than_it_keeps_up_with():
    lossy = {"host_link_delay_us": 2000, "host_link_loss": 0.01}
    assert imp.mechanisms(plan_of(**lossy, host_link_mbit_s=400, uplink_mbit_s=400), False)
    with pytest.raises(FabricLabError, match=r"^link h0-leaf0 would run at 1000 Mbit/s of "
                       r"wire-sized packets.*MAX_DELAY_LINE_WIRE_MBIT_S"):
        imp.mechanisms(plan_of(**lossy, host_link_mbit_s=1000, uplink_mbit_s=1000), False)
    # segmentation offload on: the line keeps up at the emulator's own link limit
    assert imp.mechanisms(plan_of(host_link_delay_us=2000, host_link_mbit_s=1000,
                                  uplink_mbit_s=1000), False)
    assert imp.mechanisms(plan_of(**lossy, host_link_mbit_s=1000, uplink_mbit_s=1000), True)
    # a multidim host's wires: its dimensions' links are its host links
    multidim = build_plan(parse_fabric({"fabric": {
        "kind": "multidim", "wire_serialization": True, "segmentation_offload": False,
        "dims": [{"kind": "switch", "size": 2, "mbit_s": 1000}]}}))
    with pytest.raises(FabricLabError, match=r"^link h0-d0s0 would run at 1000 Mbit/s of "
                       r"wire-sized packets"):
        imp.emulation(multidim, netem=False)


def test_equal_cost_paths_of_different_delay_are_refused_without_netem():
    plan = plan_of(links=[{"between": ["leaf0", "spine0"], "delay_us": 2000}])
    with pytest.raises(FabricLabError, match=r"^the equal-cost paths from h2 to h0 differ in "
                       r"delay \(0 and 2000 µs one way\)"):
        imp.mechanisms(plan, False)
    assert imp.mechanisms(plan, True)  # netem delays each link where it is


@pytest.mark.parametrize("dims", [2, 1])
def test_the_delay_line_refuses_hosts_with_an_address_per_dimension(dims):
    plan = build_plan(parse_fabric({"fabric": {
        "kind": "multidim", "dims": [{"kind": "switch", "size": 2, "mbit_s": 50,
                                      "delay_us": 2000},
                                     {"kind": "switch", "size": 2, "mbit_s": 50}][:dims]}}))
    with pytest.raises(FabricLabError, match=r"one address each \(leaf-spine\)"):
        imp.delay_queues(plan)
    with pytest.raises(FabricLabError, match=r"one address each \(leaf-spine\)"):
        imp.emulation(plan, netem=False)


def test_a_wire_puts_every_source_into_each_host_s_line_at_its_link_s_rate():
    plan = plan_of(wire_serialization=True, host_link_mbit_s=40, uplink_delay_us=3000)
    ip = {h.name: h.ip() for h in plan.hosts}
    links, queues = imp.emulation(plan, netem=False)
    assert {i.mechanism for i in links} == {imp.DELAY_LINE}
    # into h0: from h1 (same leaf, no delay: for the wire only) and from across the spine
    assert queues["h0"] == [
        {"queue": 0, "delay_us": 0, "jitters_us": [], "sources": [ip["h1"]], "wire": "h0-eth0"},
        {"queue": 1, "delay_us": 6000, "jitters_us": [], "sources": [ip["h2"], ip["h3"]],
         "wire": "h0-eth0"}]
    assert imp.wire_rates(plan) == {h: {f"{h}-eth0": 40e6} for h in ip}
    # netem holds the delays: each line holds its wire only, for every other host
    _links, on_netem = imp.emulation(plan, netem=True)
    assert on_netem["h0"] == [{"queue": 0, "delay_us": 0.0, "jitters_us": [],
                               "sources": [ip["h1"], ip["h2"], ip["h3"]], "wire": "h0-eth0"}]
    # perfect wires otherwise: no link is impaired, every host still has its line
    _none, plain = imp.emulation(plan_of(wire_serialization=True), netem=False)
    assert set(plain) == set(ip) and imp.wire_rates(plan_of()) == {}


def test_a_wire_is_refused_without_the_delay_line():
    with pytest.raises(FabricLabError, match=r"^fabric\.wire_serialization: .*NFQUEUE"):
        imp.emulation(plan_of(wire_serialization=True), netem=True, delay_line=False)


@pytest.mark.parametrize("netem", [False, True])
def test_a_multidim_host_has_a_wire_per_link_carrying_its_dimension_s_peers(netem):
    plan = build_plan(parse_fabric({"fabric": {
        "kind": "multidim", "wire_serialization": True,
        "dims": [{"kind": "switch", "size": 2, "mbit_s": 50},
                 {"kind": "switch", "size": 2, "mbit_s": 30},
                 {"kind": "ring", "size": 4, "mbit_s": 20}]}}))
    h = {x.name: x for x in plan.hosts}
    sizes = plan.spec.sizes
    _links, queues = imp.emulation(plan, netem=netem)
    rates = imp.wire_rates(plan)["h0"]
    # one queue per input link (two on the ring: from each neighbour), each with its wire
    assert [q["queue"] for q in queues["h0"]] == [0, 1, 2, 3]
    assert sorted(q["wire"] for q in queues["h0"]) == sorted(rates) == sorted(
        n.intf for n in h["h0"].nics)
    by_dim: dict[int, list[str]] = {}
    for q in queues["h0"]:
        nic = next(n for n in h["h0"].nics if n.intf == q["wire"])
        assert q["delay_us"] == 0.0 and q["jitters_us"] == []
        assert rates[q["wire"]] == {0: 50e6, 1: 30e6, 2: 20e6}[nic.dim]
        by_dim.setdefault(nic.dim, []).extend(q["sources"])
    # the switches' dimensions: the one peer on the dimension's switch, at its address there
    for d in (0, 1):
        assert by_dim[d] == [plan.hosts[j].ip(d) for j in dim_peers(0, d, sizes) if j != 0]
    # the ring: each neighbour over its own link
    assert sorted(by_dim[2]) == sorted(plan.hosts[j].ip(2) for j in ring_neighbours(0, 2, sizes))


def test_with_netem_every_link_class_is_emulated():
    got = imp.mechanisms(plan_of(uplink_delay_us=2000, host_link_loss=0.001), True)
    assert {i.mechanism for i in got} == {imp.NETEM}
    assert len(got) == len(plan_of().links)


def test_netem_arguments_hold_the_queue_and_what_the_delay_keeps_in_flight():
    args = imp.netem_args(5000, 1000, 0.01, mbit_s=1000, queue_bytes=2_500_000)
    assert args.startswith("netem delay 5000us 1000us loss 1%")
    # 1 Gbit/s × 6 ms = 750 kB in flight, plus 2.5 MB of queue, in 1500-byte packets, twice
    assert args.endswith(" limit 4333")
    assert imp.netem_args(0, 0, 0.5, 10, 0) == "netem loss 50% limit 1000"


def test_a_netem_link_puts_netem_under_both_classes():
    cmds = htb_commands(50, {"delay_us": 5000, "jitter_us": 0, "loss": 0.01})
    assert sum("netem delay 5000us" in c for c in cmds) == 2
    # Mininet formats each command with % (tc, interface): the loss's % must survive it
    assert all("loss 1% limit" in (c % ("tc", "h0-eth0")) for c in cmds if "netem" in c)
    assert not any("fifo" in c for c in cmds)
    assert any("bfifo" in c for c in htb_commands(50))


def test_host_input_rules_drop_into_and_out_of_the_lossy_host():
    plan = plan_of(links=[{"between": ["h0", "leaf0"], "loss": 0.02}])
    rules = imp.input_rules(plan, imp.mechanisms(plan, False))
    assert rules["h0"] == [("h0-leaf0:in", ["-i", "h0-eth0"], 0.02)]
    ip = plan.node("h0").ip()
    for other in ("h1", "h2", "h3"):
        assert rules[other] == [("h0-leaf0:out", ["-s", f"{ip}/32"], 0.02)]


def test_fallback_and_netem_counters_are_read():
    listing = """Chain INPUT (policy ACCEPT 0 packets, 0 bytes)
    pkts      bytes target     prot opt in     out     source               destination
    9146   123456            all  --  h0-eth0 *       0.0.0.0/0            0.0.0.0/0            /* fabriclab h0-leaf0:in */
      92     1234 DROP       all  --  h0-eth0 *       0.0.0.0/0            0.0.0.0/0            /* fabriclab h0-leaf0:in */ statistic mode random probability 0.01000000000
"""  # noqa: E501
    assert imp.parse_input_counters(listing) == {"h0-leaf0:in": {"judged": 9146,
                                                                 "dropped": 92}}
    tc = """qdisc htb 5: root refcnt 2 r2q 10 default 0x20 direct_packets_stat 0
 Sent 900 bytes 9 pkt (dropped 0, overlimits 0 requeues 0)
qdisc netem 10: parent 5:10 limit 1000 delay 5ms
 Sent 100 bytes 10 pkt (dropped 1, overlimits 0 requeues 0)
qdisc netem 20: parent 5:20 limit 1000 delay 5ms
 Sent 9000 bytes 90 pkt (dropped 2, overlimits 0 requeues 0)
"""
    assert imp.parse_netem_counters(tc) == {"judged": 103, "dropped": 3}


def test_ping_probes_expect_the_spec_of_their_shortest_paths():
    plan = plan_of(host_link_delay_us=5000, links=[{"between": ["h0", "leaf0"], "loss": 0.01}])
    same_leaf = imp.path_spec(plan, "h0", "h1")
    assert same_leaf["rtt_ms"] == [20.0, 20.0]
    assert same_leaf["loss"][0] == pytest.approx(1 - 0.99**2)
    assert same_leaf["links"] == ["h0-leaf0", "h1-leaf0"]
    assert imp.probe_pairs(plan) == [("h0", "h1"), ("h1", "h2"), ("h2", "h3"), ("h3", "h0")]
    got = imp.parse_ping("64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=20.4 ms\n"
                         "64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=19.9 ms\n"
                         "3 packets transmitted, 2 received, 33% packet loss, time 2003ms\n")
    assert got == {"rtt_ms": [19.9, 20.4], "sent": 3, "received": 2}


def test_the_invariant_allows_chance_and_names_what_is_off():
    assert loss_violation("h0-leaf0", "in", 0.01, 10_000, 110) is None
    v = loss_violation("h0-leaf0", "in", 0.01, 10_000, 300)
    assert v is not None and v.place == "h0-leaf0" and "3.00% of 10000" in v.sentence
    assert loss_violation("h0-leaf0", "in", 0.01, 100, 50) is None  # too few to judge
    assert delay_violation("h0", "h1", [20.0, 20.0], 21.5) is None
    off = delay_violation("h0", "h1", [20.0, 20.0], 25.0, ["h0-leaf0"])
    assert off is not None and "across h0-leaf0" in off.sentence
    assert delay_violation("h0", "h1", [20.0, 20.0], None) is not None
    # by quartiles: a CI run's pings h0->h1 (median 22.6 ms, the fastest quarter under 21.7)
    # are on the spec; a delay that moves every round trip, or one short of it, is not
    assert delay_violation("h0", "h1", [20.0, 20.0], 22.6, quartiles_ms=(21.7, 23.1)) is None
    slow = delay_violation("h0", "h1", [20.0, 20.0], 45.0, ["h0-leaf0"], (44.0, 46.0))
    assert slow is not None and "a quarter took under 44.00 ms" in slow.sentence
    fast = delay_violation("h0", "h1", [20.0, 20.0], 11.0, None, (10.0, 12.0))
    assert fast is not None and "a quarter took over 12.00 ms" in fast.sentence
    # by the fastest: the stop's CI run of 2026-11-29 (h0->h1 median 23.0 ms, lower quartile
    # 22.3, fastest 21.6) is on the spec; a delay that moves every round trip is not, and
    # jitter's short round trips are not too fast while the upper quartile holds
    assert delay_violation("h0", "h1", [20.0, 20.0], 23.0, None, (22.3, 24.2), 21.6) is None
    late = delay_violation("h0", "h1", [20.0, 20.0], 45.0, ["h0-leaf0"], (44.5, 46.0), 44.0)
    assert late is not None and "the fastest took 44.00 ms" in late.sentence
    assert delay_violation("h0", "h1", [20.0, 20.0], 20.1, None, (19.0, 21.2), 17.4) is None
    short = delay_violation("h0", "h1", [20.0, 20.0], 11.0, None, (10.5, 12.0), 10.0)
    assert short is not None and "a quarter took over 12.00 ms" in short.sentence
    assert ping_loss_violation("h0", "h1", [0.0199, 0.0199], 2000, 1960) is None
    lost = ping_loss_violation("h0", "h1", [0.0199, 0.0199], 2000, 1867, ["h0-leaf0"])
    assert lost is not None and "across h0-leaf0" in lost.sentence


def test_a_delay_line_that_drops_or_falls_behind_is_named():
    kept_up = {"packets": 9000, "late_us": {"p99": 150.0}, "kernel_dropped": {"0": 0},
               "delays_us": [5000.0, 10000.0]}
    assert delay_line_violation("h2", kept_up) is None
    behind = delay_line_violation("h2", kept_up | {"late_us": {"p99": 2500.0}})
    assert behind is not None and behind.place == "h2"
    assert "2.50 ms after they were due (allowed 1.00 ms)" in behind.sentence
    # a long delay allows 10% of itself
    assert delay_line_violation("h2", kept_up | {"late_us": {"p99": 2500.0},
                                                 "delays_us": [30000.0]}) is None
    dropped = delay_line_violation("h2", kept_up | {"kernel_dropped": {"0": 3, "1": 2}})
    assert dropped is not None and "dropped 5 packets" in dropped.sentence
    # a line that holds a wire only is held to the floor
    wire_only = kept_up | {"delays_us": [0.0], "wires_bit_s": {"h2-eth0": 1e8}}
    assert delay_line_violation("h2", wire_only) is None
    late = delay_line_violation("h2", wire_only | {"late_us": {"p99": 1500.0}})
    assert late is not None and "(allowed 1.00 ms)" in late.sentence
    assert delay_line_violation("h2", {**wire_only, "wires_bit_s": None,
                                       "late_us": {"p99": 1500.0}}) is None
