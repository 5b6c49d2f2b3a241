"""Chakra traces fabriclab writes (:func:`workloads.training.chakra.encode`), one file per rank
as ASTRA-sim 2.x reads them: astra-sim's All-Reduce microbenchmark (byte for byte what its
``examples/workload/microbenchmarks/generator_scripts/all_reduce.py`` writes; its bundled
``all_reduce/{8,16}npus_1MB`` are the 1 MiB ones) and a multi-layer data-parallel training
trace (none ships with ASTRA-sim 2.x)."""

from __future__ import annotations

from typing import Any

from workloads.training.chakra import encode, schema

MIB = 1 << 20
COMP_NODE, COMM_COLL_NODE, ALL_REDUCE = 4, 7, 0  # et_def.proto's values
# layers of the training trace: name, forward / input-gradient / weight-gradient compute (us),
# weight-gradient All-Reduce (MiB)
LAYERS = (("embed", 120, 0, 150, 8), ("conv1", 300, 280, 320, 2), ("conv2", 450, 430, 470, 16),
          ("conv3", 200, 190, 210, 4), ("fc1", 80, 75, 90, 32), ("fc2", 40, 35, 45, 1))
PASSES = 2


def _attr(node: Any, name: str, **value: Any) -> None:
    node.attr.add(name=name, **value)


def all_reduce_trace(npus: int, size_mib: int, rank: int) -> bytes:
    """Rank ``rank``'s file of astra-sim's All-Reduce microbenchmark (one collective node)."""
    c = schema()
    node = c["Node"](id=rank, name=f"all_reduce_{npus}npus_{size_mib}MB", type=COMM_COLL_NODE)
    _attr(node, "is_cpu_op", bool_val=False)
    _attr(node, "comm_type", int64_val=ALL_REDUCE)
    _attr(node, "comm_size", int64_val=size_mib * MIB)
    return encode([c["GlobalMetadata"](version="0.0.4"), node])


def training_trace() -> bytes:
    """A data-parallel training trace of :data:`LAYERS`, :data:`PASSES` passes: the forward
    pass in layer order (each layer after the one before and after its own weights' All-Reduce
    of the pass before), then the backward pass in reverse (weight gradient, its All-Reduce,
    and the input gradient the next layer down waits for; none for the first layer)."""
    c = schema()
    nodes = [c["GlobalMetadata"](version="0.0.4")]
    ids = iter(range(1, 10**6))

    def add(name: str, kind: int, deps: list[int], **fields: Any) -> int:
        n = c["Node"](id=next(ids), name=name, type=kind, data_deps=deps, **fields)
        _attr(n, "is_cpu_op", bool_val=False)
        nodes.append(n)
        return n.id

    last_ar: dict[str, int] = {}
    for p in range(PASSES):
        prev = None
        for name, fwd, _, _, _ in LAYERS:
            deps = [d for d in (prev, last_ar.get(name)) if d is not None]
            prev = add(f"{name}_fwd_{p}", COMP_NODE, deps, duration_micros=fwd)
        for i, (name, _, ig, wg, mib) in reversed(list(enumerate(LAYERS))):
            w = add(f"{name}_wg_{p}", COMP_NODE, [prev], duration_micros=wg)
            ar = add(f"{name}_ar_{p}", COMM_COLL_NODE, [w])
            _attr(nodes[-1], "comm_type", int64_val=ALL_REDUCE)
            _attr(nodes[-1], "comm_size", int64_val=mib * MIB)
            last_ar[name] = ar
            prev = add(f"{name}_ig_{p}", COMP_NODE, [w], duration_micros=ig) if i else w
    return encode(nodes)
