"""The HTB tree every shaped interface gets (pure: the tc commands, no root)."""

from __future__ import annotations

import pytest

from testbed.emulator.shaping import ShapedLink, htb_commands, htb_r2q, queue_bytes


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
