"""A training workload as ASTRA-sim 1.0's workload text describes it, typed.

Per layer: the forward, input-gradient and weight-gradient compute (cycles), each followed by
an optional collective (kind and bytes per NPU), and the update time (cycles) added after each
of the layer's collectives finishes. Cycles are ASTRA-sim's ticks: 1 ns at its 1 GHz clock
(:data:`CLOCK_GHZ`).
"""

from __future__ import annotations

from dataclasses import dataclass

CLOCK_GHZ = 1.0  # ASTRA-sim 1.0's clock: one cycle (tick) is 1 ns

# collective kinds, as the workload text names them
ALLREDUCE, ALLTOALL, ALLGATHER, REDUCESCATTER = (
    "ALLREDUCE", "ALLTOALL", "ALLGATHER", "REDUCESCATTER")
COLLECTIVE_KINDS = (ALLREDUCE, ALLTOALL, ALLGATHER, REDUCESCATTER)

# workload types (parallelism), as the first token of the file names them
DATA, MICRO = "DATA", "MICRO"
HYBRID_DLRM, HYBRID_DLRM_ENHANCED = "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED"
HYBRID_TRANSFORMER = "HYBRID_TRANSFORMER"
HYBRID_TRANSFORMER_FWD_IN_BCKWD = "HYBRID_TRANSFORMER_FWD_IN_BCKWD"
WORKLOAD_TYPES = (DATA, MICRO, HYBRID_DLRM, HYBRID_DLRM_ENHANCED, HYBRID_TRANSFORMER,
                  HYBRID_TRANSFORMER_FWD_IN_BCKWD)
TRANSFORMER_TYPES = (HYBRID_TRANSFORMER, HYBRID_TRANSFORMER_FWD_IN_BCKWD)
DLRM_TYPES = (HYBRID_DLRM, HYBRID_DLRM_ENHANCED)


def cycles_to_ns(cycles: float, clock_ghz: float = CLOCK_GHZ) -> float:
    """Nanoseconds of ``cycles`` at ``clock_ghz``."""
    return cycles / clock_ghz


@dataclass(frozen=True)
class Comm:
    """One collective: ``kind`` (a :data:`COLLECTIVE_KINDS` name, or None for none) of
    ``size_bytes`` per NPU (for an All-Gather the shard each NPU starts with)."""

    kind: str | None = None
    size_bytes: int = 0

    @property
    def active(self) -> bool:
        return self.kind is not None


@dataclass(frozen=True)
class Layer:
    """One layer; compute in cycles."""

    name: str
    fwd_cycles: int
    fwd_comm: Comm
    ig_cycles: int
    ig_comm: Comm
    wg_cycles: int
    wg_comm: Comm
    update_cycles: int
    dependency: int = -1


@dataclass(frozen=True)
class Workload:
    """A whole workload file. ``model_parallel_group``: NPUs per model-parallel group
    (Transformer types); ``checkpoints`` / ``recompute_from``: layers whose activations are kept,
    and layers whose input-gradient step first recomputes the forward pass from the nearest
    checkpoint below (``HYBRID_TRANSFORMER_FWD_IN_BCKWD``); ``last_bottom_layer``: DLRM's last
    bottom-MLP layer, where the forward pass waits for the embedding all-to-all."""

    kind: str
    layers: tuple[Layer, ...]
    model_parallel_group: int | None = None
    checkpoints: frozenset[int] = frozenset()
    recompute_from: frozenset[int] = frozenset()
    last_bottom_layer: int | None = None
    source: str = "workload"
