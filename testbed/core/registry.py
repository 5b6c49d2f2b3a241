"""Registries of what researchers plug in: routing policies, collective algorithms (All-Reduce
and all-to-all), transports, chunk schedules, training workloads, fidelity invariants and the
cluster simulator's queue disciplines.

Each registry maps a name to an object that lives *above* the core (a policy module in
``sdn_app.policies``, a collective in ``workloads.collectives`` ...). The core holds only the
names and where to find them, as ``"module:attribute"`` strings, and imports an entry the first
time it is asked for, so validating a spec never loads the SDN framework or the simulator.

Outside code adds entries in either of two ways:

- at run time: ``POLICIES.register("my-policy", "my_pkg.policy:POLICY")`` (or the object);
- installed: a Python entry point in the registry's group, e.g. in the plug-in's
  ``pyproject.toml``::

      [project.entry-points."fabriclab.policies"]
      my-policy = "my_pkg.policy:POLICY"

The spec's allowed values (``policy:``, ``algorithm:``, ``transport:``) are the registry's
names, so a plug-in is usable from a YAML experiment as soon as it is installed. An entry with
``reference = True`` is what a comparison measures the others of its registry against
(:meth:`Registry.references`: ECMP for routing, rpc for transports, the baseline schedule).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from testbed.core.errors import FabricLabError

T = TypeVar("T")
NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")
TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


class RegistryError(FabricLabError, ValueError):
    """An unknown name, or an entry that cannot be loaded (one sentence)."""


class Registry(Generic[T]):
    """Names -> plug-in objects, loaded lazily; built-ins first, then registered, then entry
    points of ``group``."""

    def __init__(self, group: str, noun: str, builtins: Mapping[str, str]) -> None:
        self.group = group
        self.noun = noun
        self._targets: dict[str, T | str] = {}
        self._loaded: dict[str, T] = {}
        self._scanned = False
        for name, target in builtins.items():
            self.register(name, target)

    def register(self, name: str, target: T | str) -> None:
        """Add ``name``: an object, or a ``"module:attribute"`` string imported on first use."""
        if not NAME.fullmatch(name):
            raise RegistryError(f"{name!r} cannot name a {self.noun}: use lower-case letters, "
                                "digits and dashes, starting with a letter")
        if isinstance(target, str) and not TARGET.fullmatch(target):
            raise RegistryError(f"{self.noun} {name!r}: {target!r} is not 'module:attribute'")
        if name in self._targets and self._targets[name] is not target:
            raise RegistryError(f"a {self.noun} called {name!r} is already registered")
        self._targets[name] = target

    def unregister(self, name: str) -> None:
        """Forget ``name`` (tests use this to undo a registration)."""
        self._targets.pop(name, None)
        self._loaded.pop(name, None)

    def refresh(self) -> None:
        """Look for entry points again (a plug-in installed since the first look)."""
        self._scanned = False

    def names(self) -> tuple[str, ...]:
        """Every name, without importing any entry."""
        self._scan_entry_points()
        return tuple(self._targets)

    def get(self, name: str) -> T:
        """The entry called ``name``, imported if need be."""
        if name in self._loaded:
            return self._loaded[name]
        if name not in self.names():
            raise RegistryError(self._unknown(name))
        target = self._targets[name]
        obj = _load(target, f"{self.noun} {name!r}") if isinstance(target, str) else target
        self._loaded[name] = obj
        return obj

    def check(self, name: str) -> str:
        """``name`` if it is registered, else a ValueError naming the choices (for pydantic
        validators, which turn it into "field: message")."""
        if name not in self.names():
            raise RegistryError(self._unknown(name))
        return name

    def items(self) -> list[tuple[str, T]]:
        return [(name, self.get(name)) for name in self.names()]

    def references(self) -> tuple[str, ...]:
        """The names whose entry says it is the usual reference (``reference = True``: what a
        comparison measures the others against), in registration order. An entry that cannot
        be loaded is no reference."""
        out = []
        for name in self.names():
            try:
                entry = self.get(name)
            except RegistryError:
                continue
            if getattr(entry, "reference", False) is True:
                out.append(name)
        return tuple(out)

    def _unknown(self, name: str) -> str:
        return f"{name!r} is not a {self.noun}; choose one of {', '.join(self.names())}"

    def _scan_entry_points(self) -> None:
        if self._scanned:
            return
        self._scanned = True
        for ep in importlib.metadata.entry_points(group=self.group):
            if ep.name not in self._targets:
                self.register(ep.name, ep.value)


def _load(target: str, what: str) -> Any:
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise RegistryError(f"{what} cannot be loaded from {target}: {exc}") from None


POLICIES: Registry[Any] = Registry("fabriclab.policies", "routing policy", {
    "ecmp": "sdn_app.policies.ecmp:POLICY",
    "ecmp-l3": "sdn_app.policies.ecmp_l3:POLICY",
    "vclos": "sdn_app.policies.vclos:POLICY",
    "ocs-vclos": "sdn_app.policies.ocs_vclos:POLICY",
    "shortest": "sdn_app.policies.shortest:POLICY",
    "source-routing": "sdn_app.policies.source_routing:POLICY",
    "source-routing-flat": "sdn_app.policies.source_routing:FLAT",
    "gpu-count": "sdn_app.policies.gpu_count:POLICY",
})

COLLECTIVES: Registry[Any] = Registry("fabriclab.collectives", "collective algorithm", {
    "ring": "workloads.collectives.ring:COLLECTIVE",
    "halving-doubling": "workloads.collectives.halving_doubling:COLLECTIVE",
    "direct": "workloads.collectives.direct:COLLECTIVE",
    "ps": "workloads.collectives.parameter_server:COLLECTIVE",
})

# All-to-All algorithms (each rank sends block j of its buffer to rank j): not All-Reduces, so
# a registry of their own (workloads.alltoall.base.AllToAll); a job runs one with
# ``workload: {kind: alltoall}``.
ALLTOALLS: Registry[Any] = Registry("fabriclab.alltoalls", "all-to-all algorithm", {
    "pairwise": "workloads.alltoall.pairwise:ALLTOALL",
    "all-pairs": "workloads.alltoall.all_pairs:ALLTOALL",
})

TRANSPORTS: Registry[Any] = Registry("fabriclab.transports", "transport", {
    "zerocopy": "workloads.transports.zerocopy:ZeroCopyTransport",
    "staged": "workloads.transports.staged:StagedTransport",
    "serialised": "workloads.transports.serialised:SerialisedTransport",
    "rpc-lite": "workloads.transports.rpclite:RpcLiteTransport",
    "rpc-lite-sw": "workloads.transports.rpclitesw:RpcLiteStopAndWaitTransport",
    "rpc-proto": "workloads.transports.rpcproto:RpcProtoTransport",
    "rpc": "workloads.transports.rpc:RpcTransport",
    "rpc-pipelined": "workloads.transports.rpcpipelined:RpcPipelinedTransport",
})

# Hierarchical All-Reduce schedules: the per-chunk order of dimensions (Themis and its
# baseline); each dimension then runs a collective from COLLECTIVES.
SCHEDULES: Registry[Any] = Registry("fabriclab.schedules", "chunk schedule", {
    "baseline": "workloads.themis:BASELINE",
    "themis": "workloads.themis:THEMIS",
})

# Training workloads a job can name (``workload: {kind: training, model: NAME}``): objects
# with ``load() -> workloads.training.model.Workload`` (workloads.training.library).
TRAINING_WORKLOADS: Registry[Any] = Registry("fabriclab.training_workloads", "training workload", {
    "themis-resnet50": "workloads.training.library:THEMIS_RESNET50",
    "themis-gnmt": "workloads.training.library:THEMIS_GNMT",
    "themis-dlrm-medium": "workloads.training.library:THEMIS_DLRM_MEDIUM",
    "themis-dlrm-large": "workloads.training.library:THEMIS_DLRM_LARGE",
    "themis-transformer-1t": "workloads.training.library:THEMIS_TRANSFORMER_1T",
    "ddp-resnet50": "workloads.training.library:DDP_RESNET50",
    "ddp-gnmt": "workloads.training.library:DDP_GNMT",
    "ddp-dlrm": "workloads.training.library:DDP_DLRM",
    "ddp-bert-large": "workloads.training.library:DDP_BERT_LARGE",
})

# Fidelity invariants every emulated run is judged by (analysis.invariant.Invariant: a name,
# the run files it needs, a pure judge from them to violations with place and time), in the
# order fidelity.json gives their reasons; one reading another's judgement says so (``after``).
INVARIANTS: Registry[Any] = Registry("fabriclab.invariants", "invariant", {
    "link": "analysis.invariants:INVARIANT",
    "scheduler": "analysis.sched_invariant:SCHEDULER",
    "switch": "analysis.sched_invariant:SWITCH",
    "job": "analysis.job_invariant:INVARIANT",
    "loss": "analysis.loss_invariant:INVARIANT",
    "impairments": "analysis.impairment_invariant:INVARIANT",
})

# The cluster simulator's queue disciplines: which waiting job its allocator tries next
# (testbed.sim.queues.QueueDiscipline); ``--queue NAME``, ``queue:`` in a sweep file.
QUEUES: Registry[Any] = Registry("fabriclab.queues", "queue discipline", {
    "fifo": "testbed.sim.queues:FIFO",
    "easy-backfill": "testbed.sim.queues:EASY_BACKFILL",
    "first-fit": "testbed.sim.queues:FIRST_FIT",
    "fewest-gpus-first": "testbed.sim.queues:FEWEST_GPUS_FIRST",
    "shortest-job-first": "testbed.sim.queues:SHORTEST_JOB_FIRST",
    "smallest-model-first": "testbed.sim.queues:SMALLEST_MODEL_FIRST",
    "dynamic-matching": "testbed.sim.queues:DYNAMIC_MATCHING",
})
