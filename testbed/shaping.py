"""Link shaping: Mininet's TCLink with HTB and bandwidth only (this kernel has no netem).

The one change from Mininet's HTB setup is ``r2q``: the kernel derives the HTB quantum as
rate / r2q and warns for every link when it exceeds 200 kB (any rate above ~16 Mbit/s with the
default r2q of 10). Scaling r2q with the rate keeps the quantum near 100 kB.
"""

from __future__ import annotations

import math
import os

from mininet.link import TCIntf, TCLink

# The HTB class queue, in milliseconds at the link rate. Without a limit the queue is
# txqueuelen (1000) packets of up to 64 KiB each (userspace TSO): seconds of buffer, so a flow
# whose ACKs share a loaded direction starves. A bfifo bounds it (fq_codel/netem are absent).
QUEUE_MS = float(os.environ.get("FABRICLAB_QUEUE_MS", "20"))
MIN_QUEUE_BYTES = 4 * 65536


def queue_bytes(mbps: float, ms: float = QUEUE_MS) -> int:
    """The bfifo limit for a link: ``ms`` of traffic at its rate, at least four TSO segments."""
    return max(MIN_QUEUE_BYTES, int(mbps * 1e6 / 8 * ms / 1000))


def htb_r2q(mbps: float) -> int:
    """r2q giving an HTB quantum of at most 100 kB at ``mbps``."""
    return max(10, math.ceil(mbps * 1e6 / 8 / 100_000))


class ShapedIntf(TCIntf):
    """A TCIntf whose only shaping is an HTB rate (delay/loss/queue options are refused)."""

    def bwCmds(self, bw=None, **_ignored):
        if bw is None:
            return [], " root "
        cmds = [
            f"%s qdisc add dev %s root handle 5:0 htb default 1 r2q {htb_r2q(bw)}",
            f"%s class add dev %s parent 5:0 classid 5:1 htb rate {bw:f}Mbit burst 15k",
            f"%s qdisc add dev %s parent 5:1 handle 10: bfifo limit {queue_bytes(bw)}",
        ]
        return cmds, " parent 10: "


class ShapedLink(TCLink):
    def __init__(self, node1, node2, **params):
        for key in ("delay", "jitter", "loss", "max_queue_size"):
            if params.get(key):
                raise ValueError(f"{key} needs netem, which this kernel does not have")
        params.setdefault("cls1", ShapedIntf)
        params.setdefault("cls2", ShapedIntf)
        super().__init__(node1, node2, **params)


__all__ = ["ShapedIntf", "ShapedLink", "htb_r2q"]
