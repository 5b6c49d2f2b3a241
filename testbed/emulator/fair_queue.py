"""Per-flow fair queueing on a shaped link (``link_queue: fair``), built from what this kernel
has: HTB classes and a classic-BPF classifier (no sfq, fq or fq_codel here; DESIGN.md).

The simulator splits a link max-min fairly between the flows crossing it. TCP flows sharing
one drop-tail FIFO do not split it so: in the demo's ECMP draw, jobs sharing an uplink came
out 16-22% apart (BENCHMARKS.md). With ``fair``, a link's data class (``5:20``,
:mod:`testbed.emulator.shaping`) has :data:`BUCKETS` child classes, each with its own FIFO;
a classifier hashes each packet's addresses and ports to one of them, and HTB serves the
backlogged ones in turn with equal quanta, so each flow gets an equal share of what the link
has, as in stochastic fair queueing. Two flows hash to one bucket with probability
1/:data:`BUCKETS`; they then share that bucket's turn.

The classifier is a classic BPF program (``tc filter ... bpf bytecode``): cls_bpf takes a
program's return value as the class id. It runs at the interface's egress, where the packet
starts at its Ethernet header.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

from testbed.core.formulas import FRAME_BYTES

if TYPE_CHECKING:
    from testbed.core.jobs import ResolvedJob
    from testbed.core.topology import FabricPlan

BUCKETS = 16
FIRST_MINOR = 0x100  # bucket b is class 5:(0x100 + b)

# Classic BPF opcodes (linux/filter.h) used by the classifier.
_LDH_ABS, _LDW_ABS, _LDW_IND = 0x28, 0x20, 0x40
_LDX_MSH, _LDX_MEM, _ST = 0xB1, 0x61, 0x02
_TAX, _XOR_X, _RSH_K, _MOD_K, _ADD_K = 0x07, 0xAC, 0x74, 0x94, 0x04
_JEQ_K, _RET_A, _RET_K = 0x15, 0x16, 0x06
_ETH_IPV4 = 0x0800
_ETH_LEN = 14


def bucket_classid(major: int, bucket: int) -> int:
    """The class id (major:minor as one integer) of ``bucket`` under qdisc ``major``."""
    return (major << 16) | (FIRST_MINOR + bucket)


def classifier_program(major: int = 5, buckets: int = BUCKETS) -> list[tuple[int, int, int, int]]:
    """The classic BPF program mapping an IPv4 packet to its bucket's class id: source and
    destination address and the first word after the IP header (both ports for TCP and UDP)
    xored, folded to 8 bits' worth of mixing, modulo ``buckets``. Anything else returns 0
    (no match: HTB's default class, the first bucket)."""
    if not 1 <= buckets <= 0xFF00 - FIRST_MINOR:
        raise ValueError(f"buckets must be between 1 and {0xFF00 - FIRST_MINOR}, not {buckets}")
    body = [
        (_LDW_ABS, 0, 0, _ETH_LEN + 12),  # A = source address
        (_TAX, 0, 0, 0),
        (_LDW_ABS, 0, 0, _ETH_LEN + 16),  # A = destination address
        (_XOR_X, 0, 0, 0),
        (_ST, 0, 0, 0),  # M[0] = the addresses xored
        (_LDX_MSH, 0, 0, _ETH_LEN),  # X = the IP header's length
        (_LDW_IND, 0, 0, _ETH_LEN),  # A = the word after it (source and destination port)
        (_LDX_MEM, 0, 0, 0),
        (_XOR_X, 0, 0, 0),
        (_TAX, 0, 0, 0), (_RSH_K, 0, 0, 16), (_XOR_X, 0, 0, 0),  # fold the high half in
        (_TAX, 0, 0, 0), (_RSH_K, 0, 0, 8), (_XOR_X, 0, 0, 0),  # and the second byte
        (_MOD_K, 0, 0, buckets),
        (_ADD_K, 0, 0, bucket_classid(major, 0)),
        (_RET_A, 0, 0, 0),
    ]
    return [(_LDH_ABS, 0, 0, 12),  # the EtherType
            (_JEQ_K, 0, len(body), _ETH_IPV4),  # not IPv4: on to the last instruction
            *body,
            (_RET_K, 0, 0, 0)]


def bytecode(program: list[tuple[int, int, int, int]]) -> str:
    """``program`` in tc's ``bytecode`` syntax: the count, then ``code jt jf k`` each."""
    return ",".join([str(len(program)), *(f"{c} {t} {f} {k}" for c, t, f, k in program)])


def bucket_hash(src_ip: int, dst_ip: int, ports_word: int, buckets: int = BUCKETS) -> int:
    """The bucket :func:`classifier_program` gives an IPv4 packet (addresses and the ports'
    word as big-endian integers): what tests and run records compute without a kernel."""
    a = (src_ip ^ dst_ip ^ ports_word) & 0xFFFFFFFF
    a ^= a >> 16
    a ^= a >> 8
    return a % buckets


def quantum_bytes(segment_bytes: int) -> int:
    """Each bucket's DRR quantum when hosts send segments of at most ``segment_bytes``
    (:func:`testbed.emulator.segmentation.largest_segment_bytes`): one segment and a frame.

    HTB sends a backlogged bucket's packets while its quantum lasts, and at least one per
    turn; with a quantum no smaller than any packet, each bucket sends the same bytes per
    round. The round is also how far apart flows that start together finish: four flows of
    256 KiB through one 200 Mbit/s uplink are four quanta each, and with 64 KiB quanta they
    ended up to 16 ms apart (38-55 ms, against 44 ms for all four in the simulator); with
    12.5 kB segments served one a turn, 1-4 ms (BENCHMARKS.md, "Fair-queue quanta"). So a
    fabric that caps its segments (``segment_max_ms``) gets quanta as fine as its segments."""
    return segment_bytes + FRAME_BYTES


def bucket_commands(mbit_s: float, share: float, leaf: str, quantum: int,
                    buckets: int = BUCKETS) -> list[str]:
    """tc commands (Mininet's ``%s %s``: tc binary, interface) for the buckets under HTB
    class 5:20 of a link of ``mbit_s`` whose data class has ``share`` of it, each bucket
    behind a ``leaf`` qdisc (its FIFO, or netem) with a DRR quantum of ``quantum`` bytes
    (:func:`quantum_bytes`), and the filter that picks the bucket."""
    rate = mbit_s * share / buckets
    out = []
    for b in range(buckets):
        minor = f"{FIRST_MINOR + b:x}"
        out.append(f"%s class add dev %s parent 5:20 classid 5:{minor} htb rate {rate:f}Mbit "
                   f"ceil {mbit_s:f}Mbit burst 15k quantum {quantum} prio 1")
        out.append(f"%s qdisc add dev %s parent 5:{minor} {leaf}")
    out.append(f"%s filter add dev %s parent 5: protocol all prio 2 bpf bytecode "
               f"'{bytecode(classifier_program(5, buckets))}'")
    return out


def shared_buckets(plan: FabricPlan, job: ResolvedJob
                   ) -> list[tuple[str, str, int, list[tuple[str, str]]]]:
    """Where two or more of ``job``'s flows that run at once hash to one bucket of a link's
    fair queue (they then split one flow's share): ``(from node, to node, bucket, [(source
    host, destination host), ...])`` per such bucket. Flows that run at once: those of one
    step (one link role of a flat collective: halving-doubling's rounds come one after
    another) and of every dimension of a chunk-scheduled job together. The hash needs each
    flow's source port, which only a job with a ``source_port_seed`` fixes, and the links
    each flow crosses, which only a fabric without loops fixes: otherwise ValueError."""
    import ipaddress

    import networkx as nx

    from testbed.emulator.workers import fabric_configs
    from workloads.worker import WorkerConfig, link_plan

    if job.source_port_seed is None:
        raise ValueError(f"job {job.name} has no source_port_seed: its source ports, and so "
                         "its flows' buckets, are drawn by the kernel when it runs")
    if not plan.loop_free():
        raise ValueError("hosts have several paths on this fabric: which links a flow "
                         "crosses is the routing's choice")
    graph = plan.graph()
    host_of = {nic.ip: h.name for h in plan.hosts for nic in h.nics}
    on: dict[tuple[str, str, int, int], list[tuple[str, str]]] = {}
    for cfg in fabric_configs(plan, job, out_dir=Path("/nonexistent")):
        _, specs = link_plan(WorkerConfig.model_validate(cfg))
        for spec in specs:
            src, dst = spec.local.ip, spec.next_addr.ip
            bucket = bucket_hash(int(ipaddress.ip_address(src)), int(ipaddress.ip_address(dst)),
                                 (spec.sport << 16) | spec.next_addr.port)
            step = spec.slot if job.flat else 0
            path = nx.shortest_path(graph, host_of[src], host_of[dst])
            for a, b in itertools.pairwise(path):
                on.setdefault((a, b, step, bucket), []).append((host_of[src], host_of[dst]))
    return [(a, b, bucket, flows) for (a, b, _, bucket), flows in sorted(on.items())
            if len(flows) > 1]


__all__ = ["BUCKETS", "FIRST_MINOR", "bucket_classid", "bucket_commands", "bucket_hash",
           "bytecode", "classifier_program", "shared_buckets"]
