"""Read ASTRA-sim 1.0's workload text into a :class:`~workloads.training.model.Workload`.

The format is a stream of whitespace-separated tokens (ASTRA-sim reads it with ``>>``):

* the type (``DATA``, ``MICRO``, ``HYBRID_DLRM``, ``HYBRID_DLRM_ENHANCED``,
  ``HYBRID_TRANSFORMER``, ``HYBRID_TRANSFORMER_FWD_IN_BCKWD``) and its parameters: DLRM the index
  of its last bottom layer; the Transformer types ``model_parallel_NPU_group: N``, the recompute
  type also ``checkpoints: k l1..lk checkpoint_initiates: m l1..lm``;
* the number of layers;
* per layer 12 tokens: name, dependency, forward cycles, forward collective and bytes,
  input-gradient cycles, collective and bytes, weight-gradient cycles, collective and bytes,
  update cycles. A collective is ``NONE`` or one of ``ALLREDUCE``, ``ALLTOALL``,
  ``ALLGATHER``, ``REDUCESCATTER``.

Pure: text in, workload out; anything malformed is one :class:`FabricLabError` sentence naming
the file and line.
"""

from __future__ import annotations

from collections.abc import Iterator

from testbed.core.errors import FabricLabError
from workloads.training.model import (
    COLLECTIVE_KINDS,
    DLRM_TYPES,
    HYBRID_TRANSFORMER_FWD_IN_BCKWD,
    TRANSFORMER_TYPES,
    WORKLOAD_TYPES,
    Comm,
    Layer,
    Workload,
)

# types ASTRA-sim 1.0 knows that the replay does not run
UNSUPPORTED_TYPES = ("MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_CUSTOMIZED",
                     "DISTRIBUTED_INFERENCE")
LAYER_TOKENS = 12


class _Tokens:
    """The file's tokens with their line numbers, consumed in order."""

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self._items: Iterator[tuple[str, int]] = iter(
            [(tok, n) for n, line in enumerate(text.splitlines(), 1) for tok in line.split()])
        self.line = 1
        self._peeked: tuple[str, int] | None = None

    def fail(self, why: str, line: int | None = None) -> FabricLabError:
        return FabricLabError(f"{self.source} line {line or self.line}: {why}")

    def peek(self) -> str | None:
        if self._peeked is None:
            self._peeked = next(self._items, None)
        return None if self._peeked is None else self._peeked[0]

    def next(self, what: str) -> str:
        self.peek()
        if self._peeked is None:
            raise self.fail(f"the file ends where {what} should follow")
        tok, self.line = self._peeked
        self._peeked = None
        return tok

    def integer(self, what: str, minimum: int = 0) -> int:
        tok = self.next(what)
        try:
            value = int(tok)
        except ValueError:
            raise self.fail(f"{what} is {tok!r}, not a whole number") from None
        if value < minimum:
            raise self.fail(f"{what} is {value} but must be at least {minimum}")
        return value

    def keyword(self, expected: str) -> None:
        tok = self.next(expected)
        if tok != expected:
            raise self.fail(f"expected {expected!r} but found {tok!r}")


def _comm(tokens: _Tokens, what: str) -> Comm:
    kind = tokens.next(f"the {what} collective")
    size = tokens.integer(f"the {what} collective's size in bytes")
    if kind == "NONE":
        return Comm()
    if kind not in COLLECTIVE_KINDS:
        raise tokens.fail(f"the {what} collective {kind!r} is not NONE or one of "
                          f"{', '.join(COLLECTIVE_KINDS)}")
    return Comm(kind, size)


def _layer(tokens: _Tokens, index: int) -> Layer:
    name = tokens.next(f"layer {index}'s name")
    dependency = tokens.integer(f"layer {name}'s dependency", minimum=-1)
    fwd = tokens.integer(f"layer {name}'s forward compute cycles")
    fwd_comm = _comm(tokens, f"layer {name}'s forward")
    ig = tokens.integer(f"layer {name}'s input-gradient compute cycles")
    ig_comm = _comm(tokens, f"layer {name}'s input-gradient")
    wg = tokens.integer(f"layer {name}'s weight-gradient compute cycles")
    wg_comm = _comm(tokens, f"layer {name}'s weight-gradient")
    update = tokens.integer(f"layer {name}'s update cycles")
    return Layer(name, fwd, fwd_comm, ig, ig_comm, wg, wg_comm, update, dependency)


def _layer_list(tokens: _Tokens, what: str) -> frozenset[int]:
    count = tokens.integer(f"the number of {what}")
    return frozenset(tokens.integer(f"a layer index in {what}") for _ in range(count))


def parse_workload(text: str, source: str = "workload.txt") -> Workload:
    """The workload in ASTRA-sim 1.0 workload ``text`` (``source`` names it in errors)."""
    tokens = _Tokens(text, source)
    kind = tokens.next("the workload type")
    if kind in UNSUPPORTED_TYPES:
        raise tokens.fail(f"workload type {kind} is not replayed; fabriclab runs "
                          f"{', '.join(WORKLOAD_TYPES)}")
    if kind not in WORKLOAD_TYPES:
        raise tokens.fail(f"{kind!r} is not an ASTRA-sim 1.0 workload type "
                          f"({', '.join(WORKLOAD_TYPES)})")
    group = None
    checkpoints: frozenset[int] = frozenset()
    recompute: frozenset[int] = frozenset()
    last_bottom = None
    if kind in TRANSFORMER_TYPES:
        tokens.next("model_parallel_NPU_group:")  # ASTRA-sim reads any word here
        group = tokens.integer("the model-parallel NPU group", minimum=1)
        if kind == HYBRID_TRANSFORMER_FWD_IN_BCKWD:
            tokens.next("checkpoints:")
            checkpoints = _layer_list(tokens, "checkpoints")
            tokens.next("checkpoint_initiates:")
            recompute = _layer_list(tokens, "checkpoint_initiates")
    elif kind in DLRM_TYPES:
        last_bottom = tokens.integer("the DLRM last bottom layer")
    count = tokens.integer("the number of layers", minimum=1)
    layers = tuple(_layer(tokens, i) for i in range(count))
    if tokens.peek() is not None:
        tokens.next("")
        raise tokens.fail(f"there is more after the {count} layers the file announces")
    for what, indices in (("checkpoints", checkpoints), ("checkpoint_initiates", recompute)):
        if bad := sorted(i for i in indices if i >= count):
            raise FabricLabError(f"{source} line 1: {what} names layer {bad[0]} but the file "
                                 f"has {count} layers")
    if recompute and not checkpoints:
        raise FabricLabError(f"{source} line 1: checkpoint_initiates needs at least one "
                             "checkpoint below it")
    for i in recompute:
        if not any(c <= i for c in checkpoints):
            raise FabricLabError(f"{source} line 1: layer {i} recomputes from a checkpoint "
                                 "but no checkpoint is at or below it")
    if last_bottom is not None and last_bottom >= count - 1:
        raise FabricLabError(f"{source} line 1: the DLRM last bottom layer is {last_bottom} "
                             f"but must be below the last of the {count} layers")
    return Workload(kind, layers, group, checkpoints, recompute, last_bottom, source)


def _comm_tokens(comm: Comm) -> str:
    return f"{comm.kind or 'NONE'} {comm.size_bytes if comm.active else 0}"


def format_workload(workload: Workload) -> str:
    """``workload`` as ASTRA-sim 1.0 workload text (what :func:`parse_workload` reads back)."""
    head = [workload.kind]
    if workload.kind in TRANSFORMER_TYPES:
        head.append(f"model_parallel_NPU_group: {workload.model_parallel_group}")
        if workload.kind == HYBRID_TRANSFORMER_FWD_IN_BCKWD:
            for word, layers in (("checkpoints:", workload.checkpoints),
                                 ("checkpoint_initiates:", workload.recompute_from)):
                head.append(" ".join([word, str(len(layers)), *map(str, sorted(layers))]))
    elif workload.kind in DLRM_TYPES:
        head.append(str(workload.last_bottom_layer))
    lines = [" ".join(head), str(len(workload.layers))]
    lines += [" ".join(map(str, (
        la.name, la.dependency, la.fwd_cycles, _comm_tokens(la.fwd_comm), la.ig_cycles,
        _comm_tokens(la.ig_comm), la.wg_cycles, _comm_tokens(la.wg_comm), la.update_cycles)))
        for la in workload.layers]
    return "\n".join(lines) + "\n"
