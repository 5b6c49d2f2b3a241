"""Link invariants on a real fabric (root): the sampler reads every egress qdisc, a saturated
link keeps its promise, and a link throttled behind the configuration's back is caught."""

from __future__ import annotations

import subprocess

import pytest

from analysis.invariants import loaded_seconds, violations
from testbed.core.spec import one_switch_fabric, parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.fabric import Fabric
from testbed.emulator.sampler import LinkSampler
from testbed.emulator.shaping import reshape_commands
from testbed.emulator.traffic import IperfFlow, run_flows

pytestmark = [pytest.mark.root, pytest.mark.slow]

# one switch, three hosts: h0 and h1 both send to h2, so a queue stands at the switch's port
# towards h2 (a lone TCP sender keeps its own queue short)
FABRIC = one_switch_fabric(3, 40)


def incast(fab: Fabric, plan, seconds: float = 5.0):
    h0, h1, h2 = (plan.node(f"h{i}") for i in range(3))
    with LinkSampler(plan, fab.host_pids()) as sampler:
        run_flows(fab, [IperfFlow("h0", "h2", h0.ip(), h2.ip()),
                        IperfFlow("h1", "h2", h1.ip(), h2.ip())], seconds)
    return sampler.queues()


def test_a_saturated_link_keeps_its_rate_and_a_throttled_one_is_a_violation(tmp_path):
    plan = build_plan(parse_fabric({"fabric": FABRIC}))
    with Fabric(plan, tmp_path / "run") as fab:
        samples = incast(fab, plan)
        port = samples[(samples["src"] == "leaf0") & (samples["dst"] == "h2")]
        assert len(port) > 200 and port["sent_bytes"].iloc[-1] > 20_000_000
        assert loaded_seconds(port) >= 1.0  # the queue covered much of the incast
        assert violations(samples).empty

        # halve the switch port's HTB classes towards h2,
        # leaving the plan at 40 Mbit/s: the link now sends short of its configured rate
        # while the queue stands
        (lk,) = plan.link_between("leaf0", "h2")
        for cmd in reshape_commands(lk.a_intf if lk.a == "leaf0" else lk.b_intf, 20):
            subprocess.run(cmd, check=True)
        found = violations(incast(fab, plan))
    assert {(v.src, v.dst) for v in found.itertuples()} == {("leaf0", "h2")}
    assert 0.4 < found["ratio"].min() < 0.65
