"""Source ports of a job's connections: ephemeral (the kernel draws them, so ECMP's 5-tuple
hash draws anew each run), or, with a job's ``source_port_seed``, fixed by the seed so that
one draw of the hash repeats from run to run (Open vSwitch's select group picks the same
bucket for the same 5-tuple; the simulator hashes it with CRC32)."""

from __future__ import annotations

import random

SPORTS = (32768, 61000)  # the ephemeral range a connection draws from (Linux's default)


def seeded_source_ports(seed: int, job: str, rank: int, count: int) -> list[int]:
    """``count`` distinct source ports for rank ``rank`` of job ``job``'s connections (in the
    order the rank opens them), the same for the same seed on every run and machine; the
    first ``k`` of them do not depend on ``count``."""
    rng = random.Random(f"{seed}/{job}/{rank}")
    ports: list[int] = []
    while len(ports) < count:
        if (port := rng.randrange(*SPORTS)) not in ports:
            ports.append(port)
    return ports
