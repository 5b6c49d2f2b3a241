"""The HTB tree every shaped interface gets (pure: the tc commands, no root)."""

from __future__ import annotations

import pytest

from testbed.emulator import cbpf
from testbed.emulator.shaping import (
    ACK_BYTES,
    ShapedLink,
    ack_program,
    htb_commands,
    htb_r2q,
    queue_bytes,
)


def test_tree_has_rate_cap_ack_class_and_bounded_fifo():
    cmds = htb_commands(50)
    assert "classid 5:1 htb rate 50.000000Mbit" in cmds[1]
    assert "classid 5:10" in cmds[2] and "prio 0" in cmds[2] and "ceil 50.000000Mbit" in cmds[2]
    assert "classid 5:20" in cmds[3] and "prio 1" in cmds[3]
    assert f"bfifo limit {queue_bytes(50)}" in cmds[5]
    assert cmds[6].endswith(f"prio 1 bpf bytecode '{cbpf.bytecode(ack_program())}'")
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


def _frame(proto: int, ip_len: int, tcp_header_words: int = 8, ethertype: int = 0x0800
           ) -> bytes:
    """An Ethernet frame with an IPv4 header of ``ip_len`` total length (20-byte header) and,
    for TCP, a header of ``tcp_header_words`` words, padded to that length."""
    ip = bytes([0x45, 0]) + ip_len.to_bytes(2, "big") + bytes(5) + bytes([proto]) + bytes(10)
    tcp = bytes(12) + bytes([tcp_header_words << 4]) + bytes(7) if proto == 6 else b""
    eth = bytes(12) + ethertype.to_bytes(2, "big")
    return (eth + ip + tcp).ljust(14 + max(ip_len, 40), b"\0")


@pytest.mark.parametrize(("frame", "priority"), [
    (_frame(6, 52), True),  # a pure ACK with timestamps (20 + 32 bytes of headers)
    (_frame(6, 40, tcp_header_words=5), True),  # a bare ACK
    (_frame(6, 60, tcp_header_words=10), True),  # a SYN with its options
    (_frame(6, 72), False),  # 20 bytes of data: stays with its flow
    (_frame(6, 53), False),  # one byte of data
    (_frame(6, 1500), False),
    (_frame(1, 84), True),  # a ping
    (_frame(17, 100), True),  # a short UDP datagram, as before
    (_frame(1, ACK_BYTES), False),  # the class takes packets under ACK_BYTES only
    (_frame(6, 52, ethertype=0x86DD), False),  # not IPv4
])
def test_the_ack_class_takes_short_packets_without_tcp_data(frame, priority):
    assert cbpf.run(ack_program(), frame) == (cbpf.classid(5, 0x10) if priority else 0)
    if frame[12:14] == bytes.fromhex("0800"):  # netfilter's match: from the IP header on
        assert bool(cbpf.run(ack_program(l2_bytes=0), frame[cbpf.ETH_LEN:])) is priority


def test_a_refused_tc_command_is_found_and_warnings_are_not():
    from testbed.emulator.shaping import tc_refusal

    assert tc_refusal(["", "Warning: sch_htb: quantum of class 50020 is big.\n"]) is None
    assert tc_refusal(["", "Unknown filter \"bpf\", hence option \"bytecode\" is "
                       "unparsable\n"]).startswith("Unknown filter")
    assert tc_refusal(["RTNETLINK answers: Invalid argument\nWe have an error talking to "
                       "the kernel\n"]) == "RTNETLINK answers: Invalid argument"
