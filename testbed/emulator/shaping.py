"""Link shaping: Mininet's TCLink with HTB and bandwidth only (this kernel has no netem, and of
the other qdiscs only HTB, TBF and the plain FIFOs; its classifiers are u32 and classic BPF).

Each shaped interface gets one HTB class at the link rate with two children:

- ``5:10``, strict priority, for IP packets under 128 bytes that carry no TCP data (pure
  ACKs, handshakes, pings): :func:`ack_program`;
- ``5:20`` for everything else, behind a byte-limited FIFO of QUEUE_MS at the link rate.

Why: with userspace TSO a veth carries 64 KiB TCP packets. In one FIFO, the ACKs of a flow
wait behind (and are tail-dropped with) the 64 KiB segments of a flow going the other way,
and two opposite TCP flows on one 50 Mbit/s path measured 48 and 10 Mbit/s. With the ACK
class both measured 47-49 Mbit/s (BENCHMARKS.md). The parent class still caps the sum at the
link rate. Without a queue limit the FIFO would hold 1000 packets of 64 KiB: seconds.

``r2q`` is scaled with the rate: the kernel derives the HTB quantum as rate / r2q and warns
for every class when it exceeds 200 kB (any rate above ~16 Mbit/s with the default of 10).
"""

from __future__ import annotations

import math
import shlex

from mininet.link import TCIntf, TCLink

from testbed.core.errors import FabricLabError
from testbed.emulator import cbpf, fair_queue
from testbed.emulator.cbpf import (
    ADD_X,
    IP_TCP,
    JEQ_K,
    JGE_K,
    JGT_X,
    LD_MEM,
    LDB_ABS,
    LDB_IND,
    LDH_ABS,
    LDX_MSH,
    LSH_K,
    RET_K,
    RSH_K,
    ST,
    TAX,
)

QUEUE_MS = 20.0
MIN_QUEUE_BYTES = 4 * 65536
ACK_BYTES = 128  # IP packets shorter than this take the priority class


def queue_bytes(mbit_s: float, ms: float = QUEUE_MS) -> int:
    """The data FIFO limit: ``ms`` of traffic at the link rate, at least four TSO segments."""
    return max(MIN_QUEUE_BYTES, int(mbit_s * 1e6 / 8 * ms / 1000))


def htb_r2q(mbit_s: float) -> int:
    """r2q giving an HTB quantum of at most 100 kB at ``mbit_s``."""
    return max(10, math.ceil(mbit_s * 1e6 / 8 / 100_000))


# The HTB classes of a shaped interface: (parent, class id, share of the link rate, prio).
ACK_SHARE, DATA_SHARE = 0.1, 0.9  # of the link rate, guaranteed to each class
CLASSES = (("5:0", "5:1", 1.0, None), ("5:1", "5:10", ACK_SHARE, 0),
           ("5:1", "5:20", DATA_SHARE, 1))


def ack_program(major: int = 5, l2_bytes: int = cbpf.ETH_LEN) -> list[cbpf.Insn]:
    """The classic BPF program that sends a shaped interface's small control packets to the
    priority class ``major``:10: IPv4 packets under :data:`ACK_BYTES` that are not TCP, or are
    TCP with no data after the headers. A short TCP packet with data (a segment's tail) stays
    with its flow: in the priority class it would overtake the flow's queued bytes, and the
    sender's loss detection takes what it overtook for lost and sends it again (in the demo's
    ECMP draw one host resent 177 segments in one run, 166 of them needless by the receiver's
    D-SACKs: BENCHMARKS.md, "Fair-queue buckets parted by a salt").

    ``l2_bytes``: where the IP header starts. tc's classifier sees the Ethernet frame (14,
    and the program checks the EtherType); netfilter's ``bpf`` match sees the IP packet (0:
    the table is IPv4 already), where any non-zero return is a match."""
    ip = l2_bytes
    head: list[cbpf.Insn] = []
    if l2_bytes:
        head = [(LDH_ABS, 0, 0, 12), (JEQ_K, 0, 0, cbpf.ETH_IPV4)]  # the EtherType
    body: list[cbpf.Insn] = [
        (LDH_ABS, 0, 0, ip + 2),  # the IP total length
        (JGE_K, 0, 0, ACK_BYTES),
        (ST, 0, 0, 0),  # M[0] = the total length
        (LDB_ABS, 0, 0, ip + 9),  # the protocol
        (JEQ_K, 0, 0, IP_TCP),
        (LDX_MSH, 0, 0, ip),  # X = the IP header's length
        (LDB_IND, 0, 0, ip + 12),  # the TCP data offset, in words, in the high nibble
        (RSH_K, 0, 0, 4), (LSH_K, 0, 0, 2),  # A = the TCP header's length
        (ADD_X, 0, 0, 0), (TAX, 0, 0, 0),  # X = both headers' length
        (LD_MEM, 0, 0, 0),  # A = the total length
        (JGT_X, 0, 0, 0),  # longer than the headers: it carries data
    ]
    program = head + body
    yes, no = len(program), len(program) + 1  # the two returns
    # each jump's targets (if true, if false), by its place in the body: 128 bytes or more,
    # no; not TCP, yes; longer than its headers, no, else yes; and the head's: not IPv4, no
    targets = {1: (no, None), 4: (None, yes), 12: (no, yes)} | ({-1: (None, no)} if head else {})
    for at, (if_true, if_false) in targets.items():
        at += len(head)  # an offset counts from the next instruction
        code, _, _, k = program[at]
        program[at] = (code, 0 if if_true is None else if_true - at - 1,
                       0 if if_false is None else if_false - at - 1, k)
    return [*program, (RET_K, 0, 0, cbpf.classid(major, 0x10)), (RET_K, 0, 0, 0)]


def _class_args(mbit_s: float, parent: str, classid: str, share: float,
                prio: int | None) -> str:
    ceil = "" if prio is None else f" ceil {mbit_s:f}Mbit"
    tail = "" if prio is None else f" prio {prio}"
    return (f"parent {parent} classid {classid} htb rate {mbit_s * share:f}Mbit{ceil} "
            f"burst 15k{tail}")


def htb_commands(mbit_s: float, netem: dict[str, float] | None = None,
                 fair_quantum: int | None = None) -> list[str]:
    """tc commands (Mininet's ``%s %s`` = tc binary, interface) for one shaped interface.
    With ``netem`` (delay_us, jitter_us, loss), each leaf class's queue is a netem qdisc
    instead (:mod:`testbed.emulator.impairments`): shaped first, then delayed or dropped.
    With ``fair_quantum``, the data class is split into per-flow buckets served that many
    bytes in turn, each behind its own such queue (:mod:`testbed.emulator.fair_queue`)."""
    acks, data = "pfifo limit 1000", f"bfifo limit {queue_bytes(mbit_s)}"
    if netem:
        from testbed.emulator.impairments import netem_args

        # Mininet fills in "%s %s" (tc, interface) with the % operator: netem's "loss 1%"
        # must reach it as "1%%"
        acks = netem_args(**netem, mbit_s=mbit_s * ACK_SHARE, queue_bytes=0).replace("%", "%%")
        data = netem_args(**netem, mbit_s=mbit_s,
                          queue_bytes=queue_bytes(mbit_s)).replace("%", "%%")
    if fair_quantum:
        default = f"{fair_queue.FIRST_MINOR:x}"
        data_queues = fair_queue.bucket_commands(mbit_s, DATA_SHARE, data, fair_quantum)
    else:
        default, data_queues = "20", [f"%s qdisc add dev %s parent 5:20 handle 20: {data}"]
    return [
        f"%s qdisc add dev %s root handle 5:0 htb default {default} r2q {htb_r2q(mbit_s)}",
        *(f"%s class add dev %s {_class_args(mbit_s, *c)}" for c in CLASSES),
        f"%s qdisc add dev %s parent 5:10 handle 10: {acks}",
        *data_queues,
        f"%s filter add dev %s parent 5: protocol ip prio 1 bpf bytecode "
        f"'{cbpf.bytecode(ack_program())}'",
    ]


def reshape_commands(intf: str, mbit_s: float) -> list[list[str]]:
    """tc argument lists that set a shaped interface's classes to ``mbit_s`` (what tests and
    benchmarks use to make a link send short of its configured rate on purpose)."""
    return [["tc", "class", "change", "dev", intf, *_class_args(mbit_s, *c).split()]
            for c in CLASSES]


def tc_refusal(outputs: list[str]) -> str | None:
    """The first line of tc's ``outputs`` that is not a warning: what a command refused
    (Mininet prints such lines and goes on, which would leave a link shaped in part)."""
    for out in outputs:
        for line in out.splitlines():
            if line.strip() and not line.startswith("Warning:"):
                return line.strip()
    return None


class ShapedIntf(TCIntf):
    """A TCIntf shaped by the HTB tree above; Mininet's own delay/loss/queue options are
    refused (they would put netem at the wrong place); ``netem`` puts it under the classes,
    ``fair_quantum`` splits the data class into fair buckets."""

    netem: dict[str, float] | None = None
    fair_quantum: int | None = None

    def config(self, netem: dict[str, float] | None = None, fair_quantum: int | None = None,
               **params):
        self.netem, self.fair_quantum = netem, fair_quantum
        result = super().config(**params)
        if refused := tc_refusal((result or {}).get("tcoutputs", [])):
            raise FabricLabError(f"{self.name}: tc refused the link's shaping ({refused}); "
                                 "the kernel needs HTB, the FIFOs and the bpf classifier "
                                 "(cls_bpf)")
        return result

    def bwCmds(self, bw=None, **_ignored):
        if bw is None:
            if self.netem:
                raise ValueError(f"{self.name}: link delay and loss need a shaped link")
            return [], " root "
        return htb_commands(bw, self.netem, self.fair_quantum), " parent 20: "


class ShapedLink(TCLink):
    """A veth pair shaped with the HTB tree above. With ``mark`` (the run's
    ``fabriclab-run=<id>``), every end in the root namespace carries it as its alias, so
    cleanup can tell this run's interfaces from anyone else's of the same name."""

    def __init__(self, node1, node2, mark: str | None = None, **params):
        for key in ("delay", "jitter", "loss", "max_queue_size"):
            if params.get(key):
                raise ValueError(f"{key} needs netem, which this kernel does not have")
        params.setdefault("cls1", ShapedIntf)
        params.setdefault("cls2", ShapedIntf)
        self.mark = mark
        super().__init__(node1, node2, **params)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None,
                     node1=None, node2=None, deleteIntfs=True):
        """Make the veth pair and mark its root-namespace ends, so that a runner killed at
        any moment leaves nothing ``fabriclab clean`` cannot prove is the run's:

        - a pair with an end in a host's (pinned) namespace dies with that namespace, so it
          is made as Mininet makes it, each end in place, and then marked;
        - a pair between two switches lives wholly in the root namespace: it is made and both
          ends marked by one ``ip -batch`` in a session of its own, which a dying runner's
          hangup cannot cut short.

        Never deletes an existing interface of the same name (Mininet's default): it may not
        be ours, and the fabric refuses to start if any of its names exists."""
        if not self.mark or node1 is None or node2 is None:
            return super().makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2,
                                        deleteIntfs=False)
        q = shlex.quote
        if node1.inNamespace or node2.inNamespace:
            super().makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2,
                                 deleteIntfs=False)
            for name, node in ((intfname1, node1), (intfname2, node2)):
                if not node.inNamespace:
                    node.cmd(f"ip link set dev {q(name)} alias {q(self.mark)}")
            return None
        add = f"link add name {intfname1}" + (f" address {addr1}" if addr1 else "")
        add += f" type veth peer name {intfname2}" + (f" address {addr2}" if addr2 else "")
        batch = [add, f"link set dev {intfname1} alias {self.mark}",
                 f"link set dev {intfname2} alias {self.mark}"]
        # names, MACs and the mark are plain tokens (validated plan names, run id), and each
        # line is one shell word below; ip -batch stops at the first failing line
        script = "printf '%s\\n' " + " ".join(q(line) for line in batch) + " | ip -batch -"
        out = node1.cmd("setsid -w sh -c " + q(script))
        if out.strip():
            raise RuntimeError(f"could not make the link {intfname1}-{intfname2}: {out.strip()}")
        return None


__all__ = ["ShapedIntf", "ShapedLink", "htb_commands", "htb_r2q", "queue_bytes"]
