"""The chunks of one collective as ASTRA-sim 1.0 cuts and orders them, as phases for the chunk
schedule engine (:mod:`workloads.schedule_engine`).

A collective of ``S`` bytes is cut into chunks of ``S // splits`` bytes (the last may be
smaller). Each chunk runs one phase per involved dimension of more than one NPU:

* Reduce-Scatter, All-Gather, All-to-All: that collective on each dimension in turn, dimensions
  ascending (All-Gather: descending);
* All-Reduce under ``localBWAware``: Reduce-Scatter down all but the last dimension of its
  order, All-Reduce on the last, All-Gather back (baseline order); under Themis Reduce-Scatter
  on every dimension and All-Gather back on every one (:class:`ThemisGreedy` picks the order).

Themis (everything but All-to-All): :class:`ThemisGreedy` keeps a load per dimension, reset
whenever a collective is made at a later time than the previous one, and gives each chunk the
dimensions by ascending load (All-Gather: descending), falling back to index order when the
loads differ by less than a sixteenth of a chunk (then the loads are charged as ASTRA-sim
charges them, position by position). Sizes are whole bytes, divided down as
ASTRA-sim divides them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from testbed.core.registry import COLLECTIVES
from workloads.schedule_engine import Phase
from workloads.training.model import ALLGATHER, ALLREDUCE, ALLTOALL, REDUCESCATTER
from workloads.training.platform import LogicalDim, ReplaySystem

MB = 1048576  # the greedy counts its loads in MiB
BALANCE_DIVISOR = 16
OP_OF_KIND = {REDUCESCATTER: "RS", ALLGATHER: "AG", ALLTOALL: "A2A", ALLREDUCE: "AR"}


class ThemisGreedy:
    """ASTRA-sim 1.0's offline greedy: one load per logical dimension, kept as a list the
    greedy re-sorts (stably) for every chunk."""

    def __init__(self, dims: Sequence[LogicalDim]) -> None:
        self.sizes = [d.size for d in dims]
        self.bw = [d.gbyte_s for d in dims]
        self.reset()
        self.made_at: Fraction | None = None

    def reset(self) -> None:
        self.entries = [[d, 0.0] for d in range(len(self.sizes))]  # [dim, load]

    def _charge(self, entry: list, chunk: int, gather: bool, d: int | None = None) -> int:
        """Charge ``entry`` with a phase of ``chunk`` bytes on dimension ``d`` (default the
        entry's own); return the size after the phase."""
        d = entry[0] if d is None else d
        n = self.sizes[d]
        ratio = self.bw[d] / self.bw[0]
        if gather:
            entry[1] += (chunk / MB) * (n - 1) / ratio
            return chunk * n
        entry[1] += (chunk / MB) * ((n - 1) / n) / ratio
        return chunk // n

    def order(self, recommended: int, involved: Sequence[bool], gather: bool) -> list[int]:
        """The dimension order of the next chunk (recommended size ``recommended``)."""
        entries = sorted(self.entries, key=lambda e: e[1])
        if gather:
            entries.reverse()
        self.entries = entries

        def live(e: list) -> bool:
            return involved[e[0]] and self.sizes[e[0]] > 1

        result: list[int] = []
        chunk = recommended
        first = True
        for pos, entry in enumerate(entries):
            if not live(entry):
                result.append(entry[0])
                continue
            if first:
                first = False
                if self._balanced(entries, pos, entry, recommended, gather, live):
                    by_index = sorted(entries, key=lambda e: e[0])
                    if gather:
                        by_index.reverse()
                    self.entries = by_index
                    size = recommended
                    # ASTRA-sim charges the list by position with the parameters of the
                    # dimension of that index (for an All-Gather the list is reversed, so the
                    # loads land on other dimensions than the ones that move the bytes)
                    for d, e in enumerate(by_index):
                        if involved[d] and self.sizes[d] > 1:
                            size = self._charge(e, size, gather, d)
                    return list(range(len(self.sizes)))
            result.append(entry[0])
            chunk = self._charge(entry, chunk, gather)
        return result

    def _balanced(self, entries: list, pos: int, entry: list, recommended: int, gather: bool,
                  live) -> bool:
        d = entry[0]
        if not gather:
            gap = abs(entries[-1][1] - entry[1])
            n = self.sizes[d]
            diff = int(gap * (self.bw[d] / self.bw[0]) / ((n - 1) / n) * MB)
        else:
            last = max(i for i, e in enumerate(entries) if live(e))
            other = entries[last]
            gap = abs(other[1] - entry[1])
            m = self.sizes[other[0]]
            diff = int(gap * (self.bw[other[0]] / self.bw[0]) / (m - 1) * MB)
            for e in reversed(entries[pos:last]):
                if live(e):
                    diff //= self.sizes[e[0]]
        return diff < recommended // BALANCE_DIVISOR


@dataclass(frozen=True)
class ChunkSpec:
    """One chunk before it gets a global index: ``(op, logical dim, input bytes)`` per phase."""

    size: int
    steps: tuple[tuple[str, int, int], ...]


def chunk_specs(kind: str, size_bytes: int, involved: Sequence[bool],
                dims: Sequence[LogicalDim], system: ReplaySystem,
                greedy: ThemisGreedy | None) -> list[ChunkSpec]:
    """The chunks of a ``kind`` collective of ``size_bytes`` on the ``involved`` logical
    dimensions (none when no involved dimension has more than one NPU)."""
    n_dims = len(dims)
    recommended = max(1, size_bytes // system.splits)
    chunk = recommended
    left = size_bytes
    themis = system.inter == "themis" and kind != ALLTOALL and greedy is not None
    gather = kind == ALLGATHER
    out = []
    while left > 0:
        chunk = min(chunk, left)
        order = list(range(n_dims))
        if gather:
            order.reverse()
        if themis:
            order = greedy.order(recommended, involved, gather)
            chunk = min(left, recommended)
        left -= chunk
        live = [d for d in order if involved[d] and dims[d].size > 1]
        if not live:
            return []
        out.append(ChunkSpec(chunk, tuple(_steps(kind, chunk, live, dims, system, themis))))
    return out


def _steps(kind: str, chunk: int, live: list[int], dims: Sequence[LogicalDim],
           system: ReplaySystem, themis: bool) -> list[tuple[str, int, int]]:
    steps = []
    size = chunk
    if kind != ALLREDUCE or not system.localbw:
        op = OP_OF_KIND[kind]
        for d in live:
            steps.append((op, d, size))
            size = _after(op, size, dims[d].size)
        return steps
    down = live if themis else live[:-1]
    for d in down:
        steps.append(("RS", d, size))
        size //= dims[d].size
    if not themis:
        steps.append(("AR", live[-1], size))
    for d in reversed(down):
        steps.append(("AG", d, size))
        size *= dims[d].size
    return steps


def _after(op: str, size: int, n: int) -> int:
    if op == "RS":
        return size // n
    if op == "AG":
        return size * n
    return size


def phases(spec: ChunkSpec, chunk_index: int, kind: str, dims: Sequence[LogicalDim],
           system: ReplaySystem) -> list[Phase]:
    """The engine's phases of one chunk; ``sent`` is chosen so that ``sent`` over the dimension's
    :func:`phase_rate` is the phase's transfer time."""
    impl = system.implementations or {}
    out = []
    for index, (op, d, size) in enumerate(spec.steps):
        dim = dims[d]
        n = dim.size
        if op == "A2A":
            sent, steps = _all_to_all(impl.get(kind, ("direct",) * 99)[dim.physical], dim, size)
        else:
            collective = COLLECTIVES.get(impl.get(kind, ("ring",) * 99)[dim.physical])
            sent = Fraction(collective.sent_bytes(op, n, Fraction(size)))
            steps = collective.step_count(op, n)
        out.append(Phase(chunk_index, index, d, op, Fraction(size), sent, steps))
    return out


def _all_to_all(implementation: str, dim: LogicalDim, size: int) -> tuple[Fraction, int]:
    """(bytes at the NPU's rate, steps) of an All-to-All phase of ``size`` bytes. ``direct``
    sends its ``n-1`` messages of ``size/n`` at once and the analytical network lets each run at
    one link's full rate: one message's time (on a fully connected dimension a link has
    ``1/(n-1)`` of the NPU's bandwidth). ``ring`` sends ``n(n-1)/2`` such messages one after the
    other."""
    n = dim.size
    message = Fraction(size, n) * dim.links  # at the NPU's rate: a link has 1/links of it
    if implementation == "ring":
        return message * n * (n - 1) / 2, n * (n - 1) // 2
    return message, 1


def local_reduction_ns(op: str, size: Fraction, kind: str, dim: LogicalDim,
                       system: ReplaySystem) -> int:
    """ASTRA-sim 2.x's local-memory time of one Reduce-Scatter or All-Reduce phase on a ring:
    each of its ``n-1`` reducing messages (``size // n`` bytes) is written once and read twice
    at ``local-mem-bw``, each pass rounded down to whole ns. 0 without ``local-mem-bw``, for
    other phases and on other implementations (not charged there)."""
    gbyte_s = system.local_mem_gbyte_s
    impl = (system.implementations or {}).get(kind, ("ring",) * 99)[dim.physical]
    if gbyte_s is None or op not in ("RS", "AR") or impl != "ring" or dim.size < 2:
        return 0
    message = int(size) // dim.size
    one_pass = int(message / (gbyte_s * 1e9) * 1e9)  # as 2.x computes it, in doubles
    return (dim.size - 1) * 3 * one_pass


def phase_rate(dim: LogicalDim, kind: str, op: str, system: ReplaySystem) -> Fraction:
    """Bytes per ns a phase of ``op`` moves in ``dim`` (the NPU's bandwidth there, times the
    share of it the dimension's collective can use)."""
    rate = Fraction(dim.gbyte_s) * 2**30 / 10**9
    if op == "A2A":
        return rate
    impl = system.implementations or {}
    collective = COLLECTIVES.get(impl.get(kind, ("ring",) * 99)[dim.physical])
    if dim.links == 1:
        return rate
    # a fully connected dimension: the collective uses some of the NPU's links at once
    return rate * Fraction(min(collective.links_at_once(dim.size), dim.links), dim.links)
