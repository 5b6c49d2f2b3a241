"""Built-in training workloads, by name, and the one way a job's workload is loaded.

A built-in is a :class:`~workloads.training.model.Workload` stored as JSON in
``workloads/training/data/`` (``provenance`` says where its numbers came from and the command
that stored them), or made from one of the four DDP profiles of :mod:`workloads.dnn` (one
weight-gradient All-Reduce per bucket, in backward order, so the same replay serves every
model). Researchers add their own through the ``fabriclab.training_workloads`` registry
(:data:`testbed.core.registry.TRAINING_WORKLOADS`): an entry is any object with
``load() -> Workload``.

:func:`scaled` shrinks a workload for the emulator: collective bytes by ``size_scale`` (whole
float32 values), compute by ``compute_scale``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import TypeAdapter

from testbed.core.errors import FabricLabError
from testbed.core.registry import TRAINING_WORKLOADS
from workloads import dnn
from workloads.training.astra_text import parse_workload
from workloads.training.chakra import TraceNode, read_trace
from workloads.training.model import ALLREDUCE, DATA, Comm, Layer, Workload, cycles_to_ns

DATA_DIR = Path(__file__).parent / "data"
_ADAPTER = TypeAdapter(Workload)
BYTES_PER_VALUE = 4  # collectives move float32 values


def to_json(workload: Workload, provenance: dict[str, str]) -> str:
    """``workload`` as the JSON a built-in is stored in, with where it came from."""
    body = json.loads(_ADAPTER.dump_json(workload))
    return json.dumps({"provenance": provenance, "workload": body}, indent=1) + "\n"


def from_json(text: str, source: str) -> Workload:
    """The workload stored by :func:`to_json`."""
    try:
        return _ADAPTER.validate_python(json.loads(text)["workload"])
    except (ValueError, KeyError, TypeError) as exc:
        raise FabricLabError(f"{source}: not a stored training workload ({exc})") from None


@dataclass(frozen=True)
class Stored:
    """A built-in kept as JSON in :data:`DATA_DIR`."""

    file: str

    def load(self) -> Workload:
        path = DATA_DIR / self.file
        return from_json(path.read_text(), str(path))

    def provenance(self) -> dict[str, str]:
        return json.loads((DATA_DIR / self.file).read_text())["provenance"]


@dataclass(frozen=True)
class DdpProfile:
    """One of :mod:`workloads.dnn`'s DDP profiles at full size, as a ``DATA`` workload: the
    forward compute on the first layer, then per bucket (backward order) its backward compute
    and a weight-gradient All-Reduce of its bytes, issued without blocking; the next pass's
    forward waits for every bucket."""

    model: str
    bucket_cap_mb: float = dnn.DEFAULT_BUCKET_CAP_MB

    def load(self) -> Workload:
        prof = dnn.profile(self.model, bucket_cap_mb=self.bucket_cap_mb)
        # the workload's layers are in forward order: the last bucket (first layers) first
        buckets = list(reversed(prof.buckets))
        layers = []
        for i, b in enumerate(buckets):
            layers.append(Layer(
                name=f"bucket{len(buckets) - 1 - i}",
                fwd_cycles=_cycles(prof.forward_s) if i == 0 else 0, fwd_comm=Comm(),
                ig_cycles=0, ig_comm=Comm(),
                wg_cycles=_cycles(b.backward_s), wg_comm=Comm(ALLREDUCE, b.bytes),
                update_cycles=0))
        return Workload(DATA, tuple(layers), source=f"workloads.dnn profile {self.model}")


@dataclass(frozen=True)
class ChakraTrace:
    """One rank's Chakra execution trace (``.et``), replayed as ASTRA-sim 2.x issues nodes."""

    nodes: tuple[TraceNode, ...]
    source: str


CHAKRA_SUFFIX = ".et"


def _cycles(seconds: float) -> int:
    return round(seconds * 1e9)  # ns, ASTRA-sim's 1 GHz cycles


def load(model: str | None = None, file: str | None = None) -> Workload | ChakraTrace:
    """The workload a job names: a registered ``model``, a Chakra trace ``file`` (``.et``) or
    an ASTRA-sim 1.0 workload text ``file`` (errors name the file and line or node)."""
    if (model is None) == (file is None):
        raise FabricLabError("a training workload names exactly one of model or file")
    if model is not None:
        return TRAINING_WORKLOADS.get(model).load()
    path = Path(file or "")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FabricLabError(f"workload file {path}: {exc.strerror or exc}") from None
    if path.suffix == CHAKRA_SUFFIX:
        return ChakraTrace(tuple(read_trace(data, str(path))), str(path))
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise FabricLabError(f"workload file {path} is not text: an ASTRA-sim 1.0 workload "
                             f"file, or a Chakra trace named *{CHAKRA_SUFFIX}") from None
    return parse_workload(text, str(path))


def _scale_comm(comm: Comm, size_scale: float) -> Comm:
    if not comm.active or size_scale == 1:
        return comm
    values = max(1, round(comm.size_bytes / BYTES_PER_VALUE * size_scale))
    return Comm(comm.kind, values * BYTES_PER_VALUE)


def scaled(workload: Workload | ChakraTrace, size_scale: float = 1.0,
           compute_scale: float = 1.0) -> Workload | ChakraTrace:
    """``workload`` with every collective's bytes × ``size_scale`` (whole float32 values, at
    least one) and every compute and update time × ``compute_scale`` (whole cycles)."""
    if not 0 < size_scale <= 1 or compute_scale < 0 or not math.isfinite(compute_scale):
        raise FabricLabError(f"size_scale must be in (0, 1] and compute_scale at least 0, "
                             f"not {size_scale} and {compute_scale}")

    def cyc(c: int) -> int:
        return round(c * compute_scale)

    if isinstance(workload, ChakraTrace):
        return replace(workload, nodes=tuple(replace(
            n, duration_ns=max(1, cyc(n.duration_ns)) if n.kind == "COMP_NODE"
            else n.duration_ns,
            size_bytes=_scale_comm(Comm(n.collective, n.size_bytes), size_scale).size_bytes
            if n.collective else n.size_bytes) for n in workload.nodes))

    layers = tuple(replace(
        layer, fwd_cycles=cyc(layer.fwd_cycles), ig_cycles=cyc(layer.ig_cycles),
        wg_cycles=cyc(layer.wg_cycles), update_cycles=cyc(layer.update_cycles),
        fwd_comm=_scale_comm(layer.fwd_comm, size_scale),
        ig_comm=_scale_comm(layer.ig_comm, size_scale),
        wg_comm=_scale_comm(layer.wg_comm, size_scale)) for layer in workload.layers)
    return replace(workload, layers=layers)


def compute_s(workload: Workload) -> float:
    """One pass's compute (forward, input and weight gradients, without updates), seconds."""
    cycles = sum(la.fwd_cycles + la.ig_cycles + la.wg_cycles for la in workload.layers)
    return cycles_to_ns(cycles) / 1e9


def comm_bytes(workload: Workload | ChakraTrace) -> int:
    """Bytes per NPU of one pass's collectives, as the file states them."""
    if isinstance(workload, ChakraTrace):
        return sum(n.size_bytes for n in workload.nodes if n.collective)
    return sum(c.size_bytes for la in workload.layers
               for c in (la.fwd_comm, la.ig_comm, la.wg_comm) if c.active)


# built-ins (the registry's entries)
THEMIS_RESNET50 = Stored("themis-resnet50.json")
THEMIS_GNMT = Stored("themis-gnmt.json")
THEMIS_DLRM_MEDIUM = Stored("themis-dlrm-medium.json")
THEMIS_DLRM_LARGE = Stored("themis-dlrm-large.json")
THEMIS_TRANSFORMER_1T = Stored("themis-transformer-1t.json")
DDP_RESNET50 = DdpProfile("resnet50")
DDP_GNMT = DdpProfile("gnmt")
DDP_DLRM = DdpProfile("dlrm")
DDP_BERT_LARGE = DdpProfile("bert-large")
