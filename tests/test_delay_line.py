"""The userspace delay line's pure parts: its release schedule and its netlink messages."""

from __future__ import annotations

import random
import struct

import pytest

from testbed.emulator import delay_line as dl


def test_releases_keep_order_and_add_the_delay():
    line = dl.InOrderDelay(0.005)
    assert line.release(1.0) == pytest.approx(1.005)
    assert line.release(1.001) == pytest.approx(1.006)
    assert line.release(0.5) == pytest.approx(1.006)  # an earlier stamp waits its turn


def test_jitter_is_drawn_per_link_within_its_bounds_and_never_reorders():
    line = dl.InOrderDelay(0.010, (0.001, 0.002), random.Random(3))
    arrivals = [i * 1e-4 for i in range(5000)]
    releases = [line.release(t) for t in arrivals]
    assert releases == sorted(releases)
    spread = [r - t for r, t in zip(releases, arrivals, strict=True)]
    assert min(spread) >= 0.010 - 0.003
    # packets far apart see the draw itself: uniform within ± the jitters summed
    apart = dl.InOrderDelay(0.010, (0.001, 0.002), random.Random(4))
    draws = [apart.release(i * 1.0) - i * 1.0 for i in range(5000)]
    assert 0.007 <= min(draws) < 0.0075 and 0.0125 < max(draws) <= 0.013
    assert abs(sum(draws) / len(draws) - 0.010) < 2e-4


def test_a_jitter_larger_than_the_delay_never_releases_before_arrival():
    line = dl.InOrderDelay(0.001, (0.005,), random.Random(1))
    assert all(line.release(t) >= t for t in (i * 1.0 for i in range(1000)))


def _attrs(msg: bytes) -> dict[int, bytes]:
    out, off = {}, 20
    while off < len(msg):
        length, kind = struct.unpack_from("=HH", msg, off)
        out[kind] = msg[off + 4:off + length]
        off += (length + 3) & ~3
    return out


def test_bind_asks_for_metadata_only_a_long_queue_and_whole_gso_packets():
    cmd, params, flags = dl.bind_messages(7, maxlen=4096)
    for msg in (cmd, params, flags):
        length, kind, nl_flags, _seq, _pid = struct.unpack_from("=IHHII", msg)
        assert length == len(msg) and kind == (3 << 8) | dl.NFQNL_MSG_CONFIG
        assert nl_flags == dl.NLM_F_REQUEST | dl.NLM_F_ACK
        assert struct.unpack_from("!H", msg, 18)[0] == 7  # the queue number
    assert _attrs(cmd)[dl.NFQA_CFG_CMD][0] == dl.NFQNL_CFG_CMD_BIND
    p = _attrs(params)
    assert struct.unpack("!IB", p[dl.NFQA_CFG_PARAMS]) == (0, dl.NFQNL_COPY_META)
    assert struct.unpack("!I", p[dl.NFQA_CFG_QUEUE_MAXLEN]) == (4096,)
    f = _attrs(flags)
    assert f[dl.NFQA_CFG_MASK] == f[dl.NFQA_CFG_FLAGS] == struct.pack("!I", dl.NFQA_CFG_F_GSO)


def _packet(queue: int, packet_id: int, stamp: tuple[int, int] | None) -> bytes:
    attrs = dl._attr(dl.NFQA_PACKET_HDR, struct.pack("!IHB", packet_id, 0x0800, 0))
    if stamp is not None:
        attrs += dl._attr(dl.NFQA_TIMESTAMP, struct.pack("!QQ", *stamp))
    return dl._message(dl.NFQNL_MSG_PACKET, queue, attrs)


def test_packets_and_acknowledgements_are_parsed_from_one_buffer():
    ack = struct.pack("=IHHII", 36, dl.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -1) + bytes(16)
    buf = _packet(2, 41, (100, 250_000)) + _packet(0, 7, None) + ack
    packets, errors = dl.parse(buf)
    assert packets == [(2, 41, 100.25, 0), (0, 7, None, 0)]
    assert errors == [1]


def test_a_batch_verdict_accepts_up_to_a_packet_number():
    msg = dl.verdict_batch(3, 99)
    assert struct.unpack_from("=H", msg, 4)[0] == (3 << 8) | dl.NFQNL_MSG_VERDICT_BATCH
    assert struct.unpack("!II", _attrs(msg)[dl.NFQA_VERDICT_HDR]) == (dl.NF_ACCEPT, 99)


def test_statistics_keep_a_bounded_sample_of_lateness():
    stats = dl.Stats()
    for i in range(dl.LATENESS_SAMPLES * 2):
        stats.released(i * 1e-6)
    got = stats.to_json()
    assert got["packets"] == dl.LATENESS_SAMPLES * 2
    assert len(stats.late_us) == dl.LATENESS_SAMPLES
    assert 0 < got["late_us"]["p50"] < got["late_us"]["p99"] <= got["late_us"]["max"]


def test_a_packet_s_length_is_read_from_the_kernel_s_or_from_its_payload():
    hdr = dl._attr(dl.NFQA_PACKET_HDR, struct.pack("!IHB", 5, 0x0800, 0))
    capped = dl._message(dl.NFQNL_MSG_PACKET, 1, hdr + dl._attr(dl.NFQA_PAYLOAD, b"E")
                         + dl._attr(dl.NFQA_CAP_LEN, struct.pack("!I", 65226)))
    whole = dl._message(dl.NFQNL_MSG_PACKET, 1, hdr + dl._attr(dl.NFQA_PAYLOAD, bytes(60)))
    assert dl.parse(capped + whole)[0] == [(1, 5, None, 65226), (1, 5, None, 60)]


def test_bind_with_lengths_copies_a_byte_of_each_packet():
    _cmd, params, _flags = dl.bind_messages(7, lengths=True)
    assert struct.unpack("!IB", _attrs(params)[dl.NFQA_CFG_PARAMS]) == (
        dl.COPY_BYTES, dl.NFQNL_COPY_PACKET)


def test_a_short_packet_is_what_the_shaped_links_give_priority():
    from testbed.emulator.shaping import ACK_BYTES

    assert dl.ACK_BYTES == ACK_BYTES


def test_a_wire_carries_a_burst_at_its_rate_and_short_packets_beside_it():
    wire = dl.Wire(100e6)  # 100 Mbit/s: 8 KiB in 0.65536 ms
    burst = [wire.through(1.0, 8192) for _ in range(4)]
    assert burst == pytest.approx([1.0 + k * 0.00065536 for k in range(1, 5)])
    # an acknowledgement takes its own 5.28 µs, not its turn behind the burst
    assert wire.through(1.0, 66) == pytest.approx(1.0 + 66 * 8 / 100e6)
    # once idle, a packet takes its own time from its arrival
    assert wire.through(2.0, 1500) == pytest.approx(2.0 + 1500 * 8 / 100e6)
    # arrivals spaced at the rate leave one packet's time after each
    paced = dl.Wire(100e6)
    assert [paced.through(k * 0.00012, 1500) - k * 0.00012 for k in range(5)] == \
        pytest.approx([0.00012] * 5)
