"""Per-flow fair queueing on a shaped link (``link_queue: fair``), built from what this kernel
has: HTB classes and a classic-BPF classifier (no sfq, fq or fq_codel here; DESIGN.md).

The simulator splits a link max-min fairly between the flows crossing it. TCP flows sharing
one drop-tail FIFO do not split it so: in the demo's ECMP draw, jobs sharing an uplink came
out 16-22% apart (BENCHMARKS.md). With ``fair``, a link's data class (``5:20``,
:mod:`testbed.emulator.shaping`) has :data:`BUCKETS` child classes, each with its own FIFO;
a classifier hashes each packet's addresses and ports to one of them, and HTB serves the
backlogged ones in turn with equal quanta, so each flow gets an equal share of what the link
has, as in stochastic fair queueing. Two flows hash to one bucket with probability
1/:data:`BUCKETS`; they then share that bucket's turn, and split it as two TCP flows split a
FIFO, not evenly. The hash is multiplicative with an odd ``salt``: where the run knows its
flows (jobs with a ``source_port_seed``), :func:`choose_salt` picks the salt that puts no two
flows which may cross one link at once in one bucket, and the fabric installs it once the jobs
are placed (:meth:`testbed.emulator.fabric.Fabric.set_fair_salt`).

The classifier is a classic BPF program (``tc filter ... bpf bytecode``): cls_bpf takes a
program's return value as the class id. It runs at the interface's egress, where the packet
starts at its Ethernet header.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.core.formulas import FRAME_BYTES
from testbed.emulator import cbpf
from testbed.emulator.cbpf import (
    ADD_K,
    JEQ_K,
    LDH_ABS,
    LDW_ABS,
    LDW_IND,
    LDX_MEM,
    LDX_MSH,
    MOD_K,
    MUL_K,
    RET_A,
    RET_K,
    RSH_K,
    ST,
    TAX,
    XOR_X,
)

if TYPE_CHECKING:
    from testbed.core.jobs import ResolvedJob
    from testbed.core.topology import FabricPlan

BUCKETS = 16
MAX_BUCKETS = 256  # the hash keeps the product's top 8 bits
FIRST_MINOR = 0x100  # bucket b is class 5:(0x100 + b)
DEFAULT_SALT = 0x9E3779B1  # odd: 2^32 over the golden ratio (Knuth's multiplicative hash)
FILTER_HANDLE = 1  # the classifier's handle, so a new salt replaces it in place
SALT_TRIES = 512  # salts tried before the one with the fewest shared buckets is kept


def bucket_classid(major: int, bucket: int) -> int:
    """The class id (major:minor as one integer) of ``bucket`` under qdisc ``major``."""
    return cbpf.classid(major, FIRST_MINOR + bucket)


def classifier_program(major: int = 5, buckets: int = BUCKETS, salt: int = DEFAULT_SALT
                       ) -> list[cbpf.Insn]:
    """The classic BPF program mapping an IPv4 packet to its bucket's class id: source and
    destination address and the first word after the IP header (both ports for TCP and UDP)
    xored, its high half folded into the low, times the odd ``salt`` (32 bits), the top 8
    bits modulo ``buckets``. Anything else returns 0 (no match: HTB's default class, the
    first bucket)."""
    if not 1 <= buckets <= MAX_BUCKETS:
        raise ValueError(f"buckets must be between 1 and {MAX_BUCKETS}, not {buckets}")
    if not (0 < salt <= 0xFFFFFFFF and salt % 2):
        raise ValueError(f"the salt must be an odd 32-bit number, not {salt}")
    eth = cbpf.ETH_LEN
    body = [
        (LDW_ABS, 0, 0, eth + 12),  # A = source address
        (TAX, 0, 0, 0),
        (LDW_ABS, 0, 0, eth + 16),  # A = destination address
        (XOR_X, 0, 0, 0),
        (ST, 0, 0, 0),  # M[0] = the addresses xored
        (LDX_MSH, 0, 0, eth),  # X = the IP header's length
        (LDW_IND, 0, 0, eth),  # A = the word after it (source and destination port)
        (LDX_MEM, 0, 0, 0),
        (XOR_X, 0, 0, 0),
        (TAX, 0, 0, 0), (RSH_K, 0, 0, 16), (XOR_X, 0, 0, 0),  # fold the high half in
        (MUL_K, 0, 0, salt), (RSH_K, 0, 0, 24),  # the product's top byte
        (MOD_K, 0, 0, buckets),
        (ADD_K, 0, 0, bucket_classid(major, 0)),
        (RET_A, 0, 0, 0),
    ]
    return [(LDH_ABS, 0, 0, 12),  # the EtherType
            (JEQ_K, 0, len(body), cbpf.ETH_IPV4),  # not IPv4: on to the last instruction
            *body,
            (RET_K, 0, 0, 0)]


def bucket_hash(src_ip: int, dst_ip: int, ports_word: int, buckets: int = BUCKETS,
                salt: int = DEFAULT_SALT) -> int:
    """The bucket :func:`classifier_program` gives an IPv4 packet (addresses and the ports'
    word as big-endian integers, or numpy uint64 arrays of them): what tests, run records and
    :func:`choose_salt` compute without a kernel."""
    a = (src_ip ^ dst_ip ^ ports_word) & 0xFFFFFFFF
    a ^= a >> 16
    return (((a * salt) & 0xFFFFFFFF) >> 24) % buckets


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
    out.append(filter_command("add", buckets))
    return out


def filter_command(verb: str, buckets: int = BUCKETS, salt: int = DEFAULT_SALT) -> str:
    """The tc command (Mininet's ``%s %s``) that adds (``verb`` "add") or replaces
    ("replace") an interface's bucket classifier, hashing with ``salt``."""
    return (f"%s filter {verb} dev %s parent 5: protocol all prio 2 handle {FILTER_HANDLE} "
            f"bpf bytecode '{cbpf.bytecode(classifier_program(5, buckets, salt))}'")


@dataclass(frozen=True)
class Flow:
    """One connection a job's workers open, as the classifier and the links see it."""

    job: str
    src: str  # sending host
    dst: str
    key: tuple[int, int, int]  # source address, destination address, ports' word
    step: int  # flows of one job run at once only within one step
    links: frozenset[tuple[str, str]]  # every (from node, to node) it may cross

    def bucket(self, salt: int = DEFAULT_SALT, buckets: int = BUCKETS) -> int:
        return bucket_hash(*self.key, buckets=buckets, salt=salt)

    def may_meet(self, other: Flow) -> bool:
        """Whether the two may cross one link at once: of two jobs, or of one step of one
        job (halving-doubling's rounds come one after another), with a link both may cross."""
        return (self.job != other.job or self.step == other.step) and bool(
            self.links & other.links)


def job_flows(plan: FabricPlan, job: ResolvedJob) -> list[Flow]:
    """Every connection of ``job``: its source port fixed by the job's ``source_port_seed``,
    and the links of every shortest path between its hosts (all a flow may cross, whichever
    the routing takes). Flows that run at once: those of one step (one link role of a flat
    collective) and of every dimension of a chunk-scheduled job together. ValueError for a
    job without a seed: the kernel draws its source ports, and so its buckets, as it runs."""
    import ipaddress

    import networkx as nx

    from testbed.emulator.workers import fabric_configs
    from workloads.worker import WorkerConfig, link_plan

    if job.source_port_seed is None:
        raise ValueError(f"job {job.name} has no source_port_seed: its source ports, and so "
                         "its flows' buckets, are drawn by the kernel when it runs")
    graph = plan.graph()
    host_of = {nic.ip: h.name for h in plan.hosts for nic in h.nics}
    flows = []
    for cfg in fabric_configs(plan, job, out_dir=Path("/nonexistent")):
        _, specs = link_plan(WorkerConfig.model_validate(cfg))
        for spec in specs:
            src, dst = host_of[spec.local.ip], host_of[spec.next_addr.ip]
            links = frozenset(pair for path in nx.all_shortest_paths(graph, src, dst)
                              for pair in itertools.pairwise(path))
            key = (int(ipaddress.ip_address(spec.local.ip)),
                   int(ipaddress.ip_address(spec.next_addr.ip)),
                   (spec.sport << 16) | spec.next_addr.port)
            flows.append(Flow(job.name, src, dst, key, spec.slot if job.flat else 0, links))
    return flows


def shared_buckets(plan: FabricPlan, job: ResolvedJob, salt: int = DEFAULT_SALT
                   ) -> list[tuple[str, str, int, list[tuple[str, str]]]]:
    """Where two or more of ``job``'s flows that run at once hash to one bucket of a link's
    fair queue (they then split one flow's share): ``(from node, to node, bucket, [(source
    host, destination host), ...])`` per such bucket. Only a fabric without loops fixes the
    links each flow crosses, and only a ``source_port_seed`` its ports: otherwise ValueError."""
    if not plan.loop_free():
        raise ValueError("hosts have several paths on this fabric: which links a flow "
                         "crosses is the routing's choice")
    on: dict[tuple[str, str, int, int], list[tuple[str, str]]] = {}
    for f in job_flows(plan, job):
        for a, b in f.links:
            on.setdefault((a, b, f.step, f.bucket(salt)), []).append((f.src, f.dst))
    return [(a, b, bucket, sorted(flows)) for (a, b, _, bucket), flows in sorted(on.items())
            if len(flows) > 1]


def candidate_salts(tries: int = SALT_TRIES) -> list[int]:
    """The salts :func:`choose_salt` tries, in order: :data:`DEFAULT_SALT`, then its odd
    multiples (odd, so the hash stays a permutation of the folded word)."""
    return [(DEFAULT_SALT * (2 * k + 1)) & 0xFFFFFFFF for k in range(tries)]


def choose_salt(flows: list[Flow], tries: int = SALT_TRIES, buckets: int = BUCKETS
                ) -> tuple[int, list[tuple[Flow, Flow]]]:
    """The first salt of :func:`candidate_salts` that puts no two ``flows`` which may meet
    (:meth:`Flow.may_meet`) in one bucket, or the one that leaves the fewest such pairs, and
    the pairs it leaves (more flows may meet on a link than it has buckets)."""
    import numpy as np

    pairs = [(i, j) for i, j in itertools.combinations(range(len(flows)), 2)
             if flows[i].may_meet(flows[j])]
    if not pairs:
        return DEFAULT_SALT, []
    first, second = (np.array(side) for side in zip(*pairs, strict=True))
    keys = np.array([f.key for f in flows], dtype=np.uint64).T  # bucket_hash, on every flow
    best: tuple[int, np.ndarray] | None = None
    for salt in candidate_salts(tries):
        b = bucket_hash(*keys, buckets=buckets, salt=salt)
        same = b[first] == b[second]
        if best is None or same.sum() < best[1].sum():
            best = (salt, same)
        if not same.any():
            break
    assert best is not None
    salt, same = best
    return salt, [(flows[pairs[k][0]], flows[pairs[k][1]]) for k in np.flatnonzero(same)]


FAIR_QUEUE_FILE = "fair_queue.json"


def run_salt(plan: FabricPlan, jobs: list[ResolvedJob]) -> tuple[int, dict[str, Any]]:
    """The salt for a run of ``jobs`` (:func:`choose_salt` over every flow the run knows) and
    its record (``fair_queue.json``): each known flow's bucket, the pairs of flows that may
    still meet in one bucket, and the jobs whose flows it does not know (their buckets are
    drawn as they run): a program's, or a job whose source ports are the kernel's."""
    flows: list[Flow] = []
    unknown = {}
    for job in jobs:
        if job.workload.kind == "command":
            unknown[job.name] = "a program opens its own connections"
        elif job.source_port_seed is None:
            unknown[job.name] = "no source_port_seed: the kernel draws its source ports"
        else:
            flows += job_flows(plan, job)
    salt, shared = choose_salt(flows)

    def name(f: Flow) -> str:
        return f"{f.job}:{f.src}->{f.dst}:{f.key[2] >> 16}"

    return salt, {
        "salt": salt, "buckets": BUCKETS,
        "flows": [{"flow": name(f), "step": f.step, "bucket": f.bucket(salt)} for f in flows],
        "shared": [[name(f), name(g)] for f, g in shared],
        "unknown_jobs": unknown,
    }


__all__ = ["BUCKETS", "DEFAULT_SALT", "FAIR_QUEUE_FILE", "FIRST_MINOR", "Flow", "bucket_classid",
           "bucket_commands", "bucket_hash", "candidate_salts", "choose_salt",
           "classifier_program", "filter_command", "job_flows", "run_salt", "shared_buckets"]
