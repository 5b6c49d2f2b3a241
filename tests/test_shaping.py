"""The HTB tree every shaped interface gets (pure: the tc commands, no root)."""

from __future__ import annotations

import pytest

from testbed.emulator.fair_queue import BUCKETS
from testbed.emulator.shaping import (
    ShapedLink,
    htb_commands,
    htb_r2q,
    queue_bytes,
    wire_burst_bytes,
)


def test_tree_has_rate_cap_ack_class_and_bounded_fifo():
    cmds = htb_commands(50)
    assert "classid 5:1 htb rate 50.000000Mbit" in cmds[1]
    assert "classid 5:10" in cmds[2] and "prio 0" in cmds[2] and "ceil 50.000000Mbit" in cmds[2]
    assert "classid 5:20" in cmds[3] and "prio 1" in cmds[3]
    assert f"bfifo limit {queue_bytes(50)}" in cmds[5]
    assert cmds[6].endswith("u32 match u16 0x0000 0xff80 at 2 flowid 5:10")
    assert all("netem" not in c for c in cmds)


def test_queue_and_quantum_scale_with_rate():
    assert queue_bytes(1) == 4 * 65536  # never less than four TSO segments
    assert queue_bytes(1000) == 1000 * 1e6 / 8 * 0.020
    assert htb_r2q(10) == 13 and htb_r2q(1000) == 1250
    for mbit_s in (1, 20, 50, 200, 1000):
        assert mbit_s * 1e6 / 8 / htb_r2q(mbit_s) <= 200_000


def test_netem_options_are_refused():
    with pytest.raises(ValueError, match="delay needs netem"):
        ShapedLink(None, None, delay="1ms")


def test_wire_sized_packets_get_a_wire_s_credit_on_every_class():
    """Hosts sending frames (segmentation offload off, or loss): every HTB class, fair
    buckets included, holds two frames of credit (50 µs at rates where that is more), so a
    message of a few frames waits for its rate; otherwise the default 15 kB."""
    assert wire_burst_bytes(100) == 2 * 1514
    assert wire_burst_bytes(10_000) == 62_500  # 50 µs at 10 Gbit/s
    for fair in (False, True):
        classes = [c for c in htb_commands(100, fair=fair, burst_bytes=3028) if " class " in c]
        assert len(classes) == 3 + (BUCKETS if fair else 0)
        assert all("burst 3028 cburst 3028" in c for c in classes)
        assert all("burst 15k" in c and "cburst" not in c
                   for c in htb_commands(100, fair=fair) if " class " in c)


def test_a_wire_sized_fabric_s_links_are_given_that_credit():
    from testbed.core.spec import LeafSpineSpec
    from testbed.core.topology import build_plan
    from testbed.emulator.mn_topo import FabricTopo

    spec = {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 1,
            "host_link_mbit_s": 100, "uplink_mbit_s": 200}
    for offload, want in ((True, {None}), (False, {3028})):
        plan = build_plan(LeafSpineSpec.model_validate(spec | {"segmentation_offload": offload}))
        topo = FabricTopo(plan)
        got = {topo.linkInfo(a, b).get("burst_bytes") for a, b in topo.links()}
        assert got == want
