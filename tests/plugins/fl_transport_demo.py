"""A transport from outside fabriclab, as a researcher would write one: ``copy`` is ``zerocopy``
with the copies put back (each side stages every transfer in a buffer of its own, as socket
code that builds its messages does), to measure what zero-copy saves. The tests register it
through the registry's API; docs/extending.md walks through it."""

from __future__ import annotations

import numpy as np

from workloads.transports import Tag
from workloads.transports.zerocopy import ZeroCopyLink, ZeroCopyTransport


class CopyLink(ZeroCopyLink):
    """zerocopy's link, copying every transfer once on each side."""

    def send(self, tag: Tag, arr: np.ndarray) -> None:
        super().send(tag, arr.copy())

    def receive(self, tag: Tag, out: np.ndarray) -> None:
        staging = np.empty_like(out)
        super().receive(tag, staging)
        out[...] = staging


class CopyTransport(ZeroCopyTransport):
    name = "copy"
    link_class = CopyLink
    wire_speed = False  # the copies cost time the simulator does not model
