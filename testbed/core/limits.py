"""The named upper bounds on what a spec, a sweep or a command line may ask of a root process.

Without them one line of YAML could make every rank allocate a terabyte (the OOM killer then
picks a victim, maybe ovs-vswitchd), a grid expand into hundreds of thousands of runs, or a
parser spend minutes and gigabytes on an alias bomb. Each bound is generous for real use and
each refusal is one sentence that names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from testbed.core.errors import FabricLabError

GIB = 1024**3

MAX_SIZE_BYTES = 4 * GIB  # one collective's buffer (each rank holds a few copies of it)
# a size plan and model only compute with (they allocate nothing): far past any real collective
MAX_MODEL_SIZE_BYTES = 1024**5
MAX_SIZE_DIGITS = 20  # of a size as written: far beyond MAX_SIZE_BYTES, far below overflow
MAX_SPEC_BYTES = 4 * 1024**2  # a YAML spec or sweep file
MAX_YAML_DEPTH = 64  # nested lists and mappings in one
MAX_YAML_NODES = 1_000_000  # values in one once its aliases are expanded
MAX_GRID_POINTS = 10_000  # runs one sweep expands into
# Copies of its largest buffer each rank of a collective job holds (region, inputs, the
# transport's scratch and a received chunk): what a run's memory estimate multiplies by.
BUFFER_COPIES = 4

# simulate-cluster's dimensions (the vClos paper's largest setup is 256 leaves of 32 GPUs)
MAX_CLUSTER = {"leaves": 4096, "spines": 4096, "hosts_per_leaf": 1024, "ocs_count": 4096,
               "spine_ports_per_ocs": 4096, "jobs": 1_000_000, "rounds": 10_000}
MAX_CLUSTER_GPUS = 262_144

# What an emulated link's delay line holds, per link, as emulated (a real delay ÷ rate_scale:
# testbed.core.scaling). Provisional until the emulator's fallback is measured (issue #42):
# the largest one-way delay plus jitter (1 s: beyond it TCP's retransmission timers, not the
# wire, set the pace), and the smallest nonzero delay the userspace delay line used where the
# kernel has no netem holds (a 5 ms line held its RTT within 10%; at 0.5 ms it was imprecise).
MAX_EMULATED_DELAY_US = 1_000_000.0
MIN_FALLBACK_DELAY_US = 1_000.0
# The fastest host link the delay line (testbed.emulator.delay_line) kept up with when hosts
# send wire-sized packets (any loss on the fabric, or segmentation_offload: false): at 400
# Mbit/s it released 99% of packets within 0.19 ms of when they were due in 5 runs of 5, at
# 1000 Mbit/s 1% left 0.8-2.6 ms late and TCP reached 0.60-0.78 of the rate (BENCHMARKS.md,
# "Link delay, jitter and loss on this kernel"). With segmentation offload on it kept up at
# 1000 Mbit/s, the emulator's own link limit.
MAX_DELAY_LINE_WIRE_MBIT_S = 400.0


class LimitError(FabricLabError, ValueError):
    """A value past one of these bounds (a ValueError too, so a pydantic validator that
    raises it names the field)."""


def check_size(n: int, what: str | None = None, limit_bytes: int = MAX_SIZE_BYTES) -> int:
    """``n`` bytes if it is within ``limit_bytes`` (:data:`MAX_SIZE_BYTES`, or
    :data:`MAX_MODEL_SIZE_BYTES` for what only computes), else one sentence naming it as
    ``what`` (by default its value, shortened)."""
    if n > limit_bytes:
        what = what or (f"size {n}" if n < 10**24 else "a size of over 10^24 bytes")
        why = ("the largest buffer fabriclab gives a rank (MAX_SIZE_BYTES)"
               if limit_bytes == MAX_SIZE_BYTES else
               "the largest size plan and model compute with (MAX_MODEL_SIZE_BYTES)")
        raise LimitError(f"{what} is more than {_binary(limit_bytes)}, {why}")
    return n


def _binary(n: int) -> str:
    """4294967296 -> '4GiB' (a power of 1024 at least 1 GiB)."""
    for unit, scale in (("PiB", 1024**5), ("TiB", 1024**4), ("GiB", GIB)):
        if n >= scale:
            return f"{n // scale}{unit}"
    return f"{n} bytes"


def cluster_error(params: Mapping[str, Any]) -> str | None:
    """The first of simulate-cluster's dimensions in ``params`` above its bound, as one
    sentence naming the flag; None when all are within them."""
    for name, top in MAX_CLUSTER.items():
        value = params.get(name)
        if isinstance(value, int) and value > top:
            return (f"--{name.replace('_', '-')} is {value}; at most {top:,} "
                    "(testbed.core.limits.MAX_CLUSTER)")
    gpus = params.get("leaves", 0) * params.get("hosts_per_leaf", 0)
    if gpus > MAX_CLUSTER_GPUS:
        return (f"{params['leaves']} leaves of {params['hosts_per_leaf']} hosts is {gpus:,} "
                f"GPUs; at most {MAX_CLUSTER_GPUS:,} (MAX_CLUSTER_GPUS)")
    return None


def emulated_links_error(plan: Any, min_delay_us: float = MIN_FALLBACK_DELAY_US) -> str | None:
    """One sentence naming the first link of ``plan`` (a
    :class:`~testbed.core.topology.FabricPlan`) whose emulated delay the emulator cannot
    hold: a delay plus jitter above :data:`MAX_EMULATED_DELAY_US`, or a nonzero delay or
    jitter below ``min_delay_us`` (:data:`MIN_FALLBACK_DELAY_US` for the userspace fallback;
    netem's own floor where the kernel has it). None when every link fits. The emulator
    calls it before it builds a fabric; a simulation holds any delay and does not."""
    scale = getattr(plan, "rate_scale", 1.0)
    scaled = f" (rate_scale {scale:g} emulates a delay at delay ÷ {scale:g})" if scale != 1 \
        else ""
    for lk in plan.links:
        if lk.delay_us + lk.jitter_us > MAX_EMULATED_DELAY_US:
            return (f"link {lk.a}-{lk.b} would be emulated with {lk.delay_us:g} µs delay and "
                    f"{lk.jitter_us:g} µs jitter, more than the {MAX_EMULATED_DELAY_US:g} µs "
                    f"an emulated link holds (MAX_EMULATED_DELAY_US){scaled}; raise "
                    "rate_scale or simulate it (--backend sim)")
        low = next((f for f in ("delay", "jitter")
                    if 0 < getattr(lk, f"{f}_us") < min_delay_us), None)
        if low is not None:
            fallback = min_delay_us == MIN_FALLBACK_DELAY_US
            return (f"link {lk.a}-{lk.b} would be emulated with {getattr(lk, low + '_us'):g} "
                    f"µs {low}, less than the {min_delay_us:g} µs the emulator's delay line "
                    f"holds faithfully{' (MIN_FALLBACK_DELAY_US)' if fallback else ''}{scaled}"
                    f"; lower rate_scale{', use a kernel with netem' if fallback else ''} or "
                    "simulate it (--backend sim)")
    return None


def grid_points_error(lengths: list[int]) -> str | None:
    """One sentence if a grid of value lists this long expands past :data:`MAX_GRID_POINTS`."""
    points = 1
    for n in lengths:
        points *= n
        if points > MAX_GRID_POINTS:
            return (f"the grid expands into more than {MAX_GRID_POINTS:,} runs "
                    f"(MAX_GRID_POINTS); split it into several sweeps")
    return None


def run_buffer_bytes(jobs: Iterable[Any]) -> int:
    """What the collective buffers of ``jobs`` (an experiment's, running together) take:
    every rank holds :data:`BUFFER_COPIES` of its job's largest size."""
    total = 0
    for job in jobs:
        sizes = getattr(job.workload, "sizes", None) or [0]
        world = len(job.hosts) if job.hosts else (job.hosts_wanted or 0)
        total += BUFFER_COPIES * max(sizes) * world
    return total
