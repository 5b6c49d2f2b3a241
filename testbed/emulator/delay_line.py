"""A userspace delay line for kernels without netem: packets held in the kernel, released late.

Inside a host's network namespace, netfilter's ``NFQUEUE`` target hands each arriving packet
to this process (``mangle PREROUTING``, one queue per group of sources that share a path
delay). The packet stays in the kernel; this process only learns its queue and number, and
tells the kernel when to let it go on (a *batch verdict*: every packet of the queue up to that
number). So no payload is copied and one message releases a whole burst.

Each queue's packets leave in the order they came: the release time is
``max(arrival + delay + jitter draw, previous release)``, as on a wire, which does not reorder.
The jitter draw is netem's: uniform within ± each link's jitter, summed over the path.

With wires (``wires``, the fabric's ``wire_serialization``: each of the host's input links
by interface, at its rate; a queue names the one its packets arrive over), each packet is also
held until that link would have carried it (:class:`Wire`), before its delay: the
shaped queues (HTB) send a whole 64 KiB segment whenever their class has credit, so on an
idle link a small transfer otherwise arrives sooner than its rate allows. The line then sees
every packet the host receives, and the kernel gives each one's length.

Why at the receiver, for the whole path: a packet held on the *sender's* way out still counts
against its socket (TCP small queues), which would throttle TCP to a fraction of the rate. A
packet that arrives has no socket yet. So each path's one-way delay (its links' delays added
up) is applied where the path ends; round trips come out as the spec's.

Speaks nfnetlink_queue over a raw netlink socket (the standard library's ``socket``); the
library bindings (python-netfilterqueue, libnetfilter_queue) give one verdict per packet and
copy payloads, which this does not need. Run as
``python -m testbed.emulator.delay_line CONFIG_JSON`` inside the namespace (``nsenter -n``);
it prints ``ready`` once every queue is bound, writes its statistics to the config's
``stats_path`` every second and at SIGTERM, and exits 0 on SIGTERM.
"""

from __future__ import annotations

import collections
import json
import os
import random
import resource
import select
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 1, 2, 3
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_TIMESTAMP = 1, 2, 4
NFQA_PAYLOAD, NFQA_CAP_LEN = 10, 13
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META, NFQNL_COPY_PACKET = 1, 2
COPY_BYTES = 1  # with COPY_PACKET: the kernel then says each packet's length (NFQA_CAP_LEN)
NFQA_CFG_F_GSO = 1 << 2  # hand over GSO packets whole, not segmented first
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NF_ACCEPT = 1
SO_RCVBUFFORCE, SO_TIMESTAMP = 33, 29
QUEUE_MAXLEN = 65536  # packets a queue holds (the kernel drops past it, and counts them)
RCVBUF_BYTES = 16 * 1024**2
STATS_EVERY_S = 1.0
LATENESS_SAMPLES = 20_000  # a reservoir of how late releases were
# released with what is due this soon: one wakeup for packets due a few µs apart (a wakeup
# itself takes 20-60 µs, so waking for each would release them later, not sooner)
RELEASE_EARLY_S = 50e-6
# shorter packets pass the wire's queue, as acknowledgements take the shaped link's priority
# class: testbed.emulator.shaping.ACK_BYTES, written again since this script imports nothing
# of the project (tests/test_delay_line.py holds the two equal). The priority class takes no
# TCP data; here a short data packet may pass the wire, but each queue still releases its
# packets in order (InOrderDelay), so none overtakes its flow's bytes.
ACK_BYTES = 128
REALTIME_PRIORITY = 2  # scripts/start-ovs.sh runs ovs-vswitchd's forwarding thread at 1


# -- pure: the schedule ------------------------------------------------------------------------

@dataclass
class InOrderDelay:
    """Release times for one queue: a constant delay plus a jitter draw per link, never before
    the previous packet's release (a wire keeps order)."""

    delay_s: float
    jitters_s: tuple[float, ...] = ()
    rng: random.Random = field(default_factory=random.Random)
    last_s: float = float("-inf")

    def release(self, arrival_s: float) -> float:
        draw = sum(self.rng.uniform(-j, j) for j in self.jitters_s) if self.jitters_s else 0.0
        self.last_s = max(arrival_s + max(0.0, self.delay_s + draw), self.last_s)
        return self.last_s


@dataclass
class Wire:
    """A host's input link as a wire of ``bit_s``: a packet is through once its length at
    that rate has passed after it arrived and after the packet before it was through. A
    packet under :data:`ACK_BYTES` takes its own time only, beside the queue, as it takes the
    shaped links' priority class (:mod:`testbed.emulator.shaping`)."""

    bit_s: float
    free_s: float = float("-inf")

    def through(self, arrival_s: float, length_bytes: int) -> float:
        took_s = length_bytes * 8 / self.bit_s
        if length_bytes < ACK_BYTES:
            return arrival_s + took_s
        self.free_s = max(arrival_s, self.free_s) + took_s
        return self.free_s


# -- pure: netlink messages --------------------------------------------------------------------

def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(msg_type: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST,
             seq: int = 0) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type, flags,
                       seq, 0) + body


def bind_messages(queue: int, maxlen: int = QUEUE_MAXLEN, seq: int = 1,
                  lengths: bool = False) -> list[bytes]:
    """Bind ``queue``, copy metadata only (with ``lengths``, :data:`COPY_BYTES` of each
    packet too, which makes the kernel give its length), hold up to ``maxlen`` packets, take
    GSO whole."""
    ack = NLM_F_REQUEST | NLM_F_ACK
    return [
        _message(NFQNL_MSG_CONFIG, queue, _attr(NFQA_CFG_CMD, struct.pack(
            "!BBH", NFQNL_CFG_CMD_BIND, 0, socket.AF_INET)), ack, seq),
        _message(NFQNL_MSG_CONFIG, queue, _attr(NFQA_CFG_PARAMS, struct.pack(
            "!IB", COPY_BYTES, NFQNL_COPY_PACKET) if lengths else struct.pack(
            "!IB", 0, NFQNL_COPY_META)) + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack(
                "!I", maxlen)), ack, seq + 1),
        _message(NFQNL_MSG_CONFIG, queue, _attr(NFQA_CFG_MASK, struct.pack(
            "!I", NFQA_CFG_F_GSO)) + _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_GSO)),
            ack, seq + 2),
    ]


def verdict_batch(queue: int, packet_id: int) -> bytes:
    """Accept every packet of ``queue`` numbered up to ``packet_id``."""
    return _message(NFQNL_MSG_VERDICT_BATCH, queue,
                    _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id)))


def parse(buf: bytes | memoryview
          ) -> tuple[list[tuple[int, int, float | None, int]], list[int]]:
    """The packets (queue, packet id, arrival on the wall clock in seconds where the kernel
    stamped it, length in bytes where it gave one, else 0) and the acknowledgement error
    codes in ``buf``."""
    packets, errors = [], []
    off = 0
    while off + 16 <= len(buf):
        length, msg_type, _flags, _seq, _pid = struct.unpack_from("=IHHII", buf, off)
        if length < 16:
            break
        if msg_type == NLMSG_ERROR:
            errors.append(-struct.unpack_from("=i", buf, off + 16)[0])
        elif msg_type == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            queue = struct.unpack_from("!H", buf, off + 18)[0]
            a = off + 20
            packet_id, stamp, pkt_len = None, None, 0
            while a + 4 <= off + length:
                alen, kind = struct.unpack_from("=HH", buf, a)
                if alen < 4:
                    break
                if kind & 0x7FFF == NFQA_PACKET_HDR:
                    packet_id = struct.unpack_from("!I", buf, a + 4)[0]
                elif kind & 0x7FFF == NFQA_TIMESTAMP:
                    sec, usec = struct.unpack_from("!QQ", buf, a + 4)
                    stamp = sec + usec / 1e6
                elif kind & 0x7FFF == NFQA_CAP_LEN:
                    pkt_len = struct.unpack_from("!I", buf, a + 4)[0]
                elif kind & 0x7FFF == NFQA_PAYLOAD and not pkt_len:
                    pkt_len = alen - 4
                a += (alen + 3) & ~3
            if packet_id is not None:
                packets.append((queue, packet_id, stamp, pkt_len))
        off += (length + 3) & ~3
    return packets, errors


# -- the process -------------------------------------------------------------------------------

class Stop(Exception):
    """SIGTERM arrived."""


@dataclass
class Stats:
    """What the line did: packets released, their bytes (counted where the kernel gives
    lengths: with a wire), how late (µs) against their release time
    (negative: up to :data:`RELEASE_EARLY_S` early), the deepest queue, and its CPU time."""

    packets: int = 0
    bytes: int = 0
    verdicts: int = 0
    deepest: int = 0
    late_us: list[float] = field(default_factory=list)
    rng: random.Random = field(default_factory=lambda: random.Random(1))

    def released(self, late_s: float) -> None:
        self.packets += 1
        if len(self.late_us) < LATENESS_SAMPLES:
            self.late_us.append(late_s * 1e6)
        elif (k := self.rng.randrange(self.packets)) < LATENESS_SAMPLES:
            self.late_us[k] = late_s * 1e6

    def to_json(self) -> dict[str, Any]:
        late = sorted(self.late_us)

        def q(p: float) -> float | None:
            return round(late[min(len(late) - 1, int(p * len(late)))], 1) if late else None

        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {"packets": self.packets, "bytes": self.bytes, "verdicts": self.verdicts,
                "deepest": self.deepest,
                "late_us": {"p50": q(0.5), "p99": q(0.99), "max": q(1.0)},
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
                "cpu_user_s": round(usage.ru_utime, 3)}


def kernel_drops() -> dict[str, int]:
    """Per queue, the packets the kernel dropped: queue full (``queue_dropped``) or not
    delivered to this process (``user_dropped``), from this namespace's proc file."""
    out = {}
    try:
        text = Path("/proc/net/netfilter/nfnetlink_queue").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 7:
            out[f[0]] = int(f[5]) + int(f[6])
    return out


def _write_stats(path: Path, stats: Stats) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(stats.to_json() | {"kernel_dropped": kernel_drops()}))
    os.replace(tmp, path)


def _fine_timers() -> None:
    """Wake on time: a 1 µs timer slack for this process (the default 50 µs batches wakeups)."""
    import ctypes

    pr_set_timerslack = 29
    with_errno = ctypes.CDLL(None, use_errno=True)
    with_errno.prctl(pr_set_timerslack, 1, 0, 0, 0)


def serve(queues: list[dict[str, Any]], stats_path: Path | None = None,
          realtime: bool = False, wires: dict[str, float] | None = None) -> None:
    """Delay each of ``queues`` (``queue``, ``delay_us``, ``jitters_us``, and ``wire``: the
    input link its packets arrive over, a key of ``wires``, where there are wires) until
    SIGTERM. With
    ``realtime``, at a real-time priority just above ovs-vswitchd's forwarding thread's
    (``SCHED_RR`` :data:`REALTIME_PRIORITY`, not inherited by children): the line is part of
    the wire, and a line that waits for a CPU delays its packets by that wait. On 8 busy
    hosts of 2 cores, 1% of packets left 14-19 ms late at normal priority, and 1.0-1.7 ms
    late (some 25-38 ms) at the switch's own priority, where a round-robin peer does not
    preempt it; its work per wakeup is short and bounded by what the switch forwards. With
    ``wires`` (interface -> bit/s), every packet also passes its queue's input link as a
    :class:`Wire` first; queues arriving over one link share its wire."""
    def stop(_sig: int, _frame: Any) -> None:
        raise Stop

    signal.signal(signal.SIGTERM, stop)
    if realtime:
        os.sched_setscheduler(0, os.SCHED_RR | os.SCHED_RESET_ON_FORK,
                              os.sched_param(REALTIME_PRIORITY))
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
    sock.bind((0, 0))
    schedule = {}
    for n, q in enumerate(queues):
        for msg in bind_messages(q["queue"], seq=1 + 3 * n, lengths=bool(wires)):
            sock.send(msg)
            _packets, errors = parse(sock.recv(65536))
            if any(errors):
                raise OSError(errors[0], f"binding netfilter queue {q['queue']}: "
                              f"{os.strerror(errors[0])}")
        schedule[q["queue"]] = InOrderDelay(q["delay_us"] / 1e6,
                                            tuple(j / 1e6 for j in q.get("jitters_us", ())))
    sock.setblocking(False)
    # any socket asking for receive timestamps makes the kernel stamp every packet as it
    # arrives, and the queue then hands the stamp over: the delay counts from the wire, not
    # from when this process got round to reading
    stamper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stamper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
    _fine_timers()
    wall_offset = time.time() - time.monotonic()
    pending: dict[int, collections.deque] = {q: collections.deque() for q in schedule}
    links = {name: Wire(bit_s) for name, bit_s in (wires or {}).items()}
    wire_of = {q["queue"]: links[q["wire"]] for q in queues if q.get("wire") in links}
    buf = bytearray(65536)  # one receive buffer, reused: no 64 KiB allocation per message
    view = memoryview(buf)
    stats = Stats()
    print("ready", flush=True)
    next_stats = time.monotonic() + STATS_EVERY_S
    # While packets wait, the line sleeps until the next is due and reads what arrived
    # meanwhile only then (each packet carries its arrival stamp, so reading late costs no
    # precision): one wakeup per release, not one per arrival. A packet that arrives while
    # it sleeps is due no sooner than its queue's delay less its jitter, so the line never
    # sleeps longer than the shortest of those.
    longest_sleep_s = max(RELEASE_EARLY_S, min(
        (q.delay_s - sum(q.jitters_s) for q in schedule.values()), default=0.0))
    try:
        while True:
            now = time.monotonic()
            heads = [d[0][0] for d in pending.values() if d]
            if heads:
                wait = min(min(heads) - now, next_stats - now)
                if wire_of:  # a short packet may be due before the head: wake for it
                    select.select([sock], [], [], max(0.0, wait))
                elif (wait := min(wait, longest_sleep_s)) > 0:
                    time.sleep(wait)
            else:
                select.select([sock], [], [], max(0.0, next_stats - now))
            now = time.monotonic()
            arrived_any = False
            while True:
                try:
                    n = sock.recv_into(buf)
                except BlockingIOError:
                    break
                arrived_any = True
                for queue, pid, stamp, length in parse(view[:n])[0]:
                    if queue in pending:
                        # the kernel's arrival stamp, on the monotonic clock; else now
                        arrived = now if stamp is None else min(now, stamp - wall_offset)
                        stats.bytes += length
                        if queue in wire_of:
                            arrived = wire_of[queue].through(arrived, length)
                        pending[queue].append((schedule[queue].release(arrived), pid))
            if arrived_any:
                stats.deepest = max(stats.deepest, sum(len(d) for d in pending.values()))
            now = time.monotonic()
            for queue, due in pending.items():
                last = None
                while due and due[0][0] <= now + RELEASE_EARLY_S:
                    at, last = due.popleft()
                    stats.released(now - at)
                if last is not None:
                    sock.send(verdict_batch(queue, last))
                    stats.verdicts += 1
            if now >= next_stats:
                wall_offset = time.time() - time.monotonic()  # follows clock adjustments
                if stats_path is not None:
                    _write_stats(stats_path, stats)
                next_stats = now + STATS_EVERY_S
    except Stop:
        pass
    finally:
        if stats_path is not None:
            _write_stats(stats_path, stats)
        sock.close()
        stamper.close()


def main(argv: list[str] | None = None) -> int:
    config = json.loads((argv or sys.argv[1:])[0])
    stats = Path(config["stats_path"]) if config.get("stats_path") else None
    serve(config["queues"], stats, bool(config.get("realtime")), config.get("wires"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
