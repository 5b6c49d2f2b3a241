"""``whole-direct``: ASTRA-sim's direct All-Reduce, with a knob of its own.

With ``whole_buffers`` (an option of this plug-in, off by default) its Reduce-Scatter sends
every peer the whole buffer instead of that peer's shard, and each rank adds only its own
shard of what it receives: the sum is the same, the bytes sent are ``n`` times as many. So a
test can tell from the bytes a run recorded that the knob reached every backend.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

from workloads.collectives.base import Group, Transfer, shard_bounds
from workloads.collectives.direct import Direct
from workloads.transports import Tag


class WholeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    whole_buffers: bool = False


class WholeDirect(Direct):
    name = "whole-direct"
    options_model = WholeOptions

    def __init__(self, whole_buffers: bool = False) -> None:
        self.whole_buffers = whole_buffers

    def configure(self, options: WholeOptions) -> WholeDirect:
        return WholeDirect(options.whole_buffers)

    def reduce_scatter(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                       phase: int = 0, first_step: int = 0) -> tuple[int, int]:
        if not self.whole_buffers or group.size == 1:
            return super().reduce_scatter(group, buf, coll, chunk, phase, first_step)
        lo, hi = shard_bounds(buf.size, group.size)[group.pos]
        tag = Tag(coll, chunk, phase, first_step)
        whole = buf.copy()  # what every peer gets, unchanged while it is being sent
        for link in group.links:
            link.start_send(tag, whole)
        try:
            for link in group.links:
                incoming = link.scratch(buf.size)
                link.receive(tag, incoming)
                np.add(buf[lo:hi], incoming[lo:hi], out=buf[lo:hi])
        except BaseException:
            for link in group.links:
                link.finish_send(tag, quiet=True)
            raise
        for link in group.links:
            link.finish_send(tag)
        return lo, hi

    def rs_transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        per_peer = size_bytes if self.whole_buffers else size_bytes / n
        return [[(i, j, per_peer) for i in range(n) for j in range(n) if i != j]]

    def sent_bytes(self, op: str, n: int, size_bytes: float) -> float:
        if op == "AG":
            return super().sent_bytes(op, n, size_bytes)
        rs = (n - 1) * size_bytes if self.whole_buffers else (n - 1) * size_bytes / n
        return rs if op == "RS" else rs + (n - 1) * size_bytes / n


COLLECTIVE = WholeDirect()
