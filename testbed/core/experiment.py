"""Experiment specs: a fabric, a routing policy and jobs, optionally in several variants.

    name: contention
    fabric: {kind: leaf_spine, ...}          # the fabric block of testbed.core.spec, unchanged
                                              # (or preset: NAME, a Themis-paper system scaled
                                              # down: testbed.core.presets)
    rate_scale: 0.001                         # optional: the fabric states real rates, emulated
                                              # at rate × rate_scale (testbed.core.scaling)
    policy: ecmp                              # a registered policy (ecmp, ecmp-l3, vclos,
                                              # ocs-vclos, shortest, ...) or static
    solo_baselines: true                      # run every job alone first
    measure_step_latency: true                # emulator: the workers' latency per step,
                                              # measured first, added to the prediction
    repeats: 3                                # run it 3 times: headlines give median [min, max]
    hosts: {runtime: docker, cpus: 1}         # optional: every host a container
    jobs:
      - name: a
        hosts_wanted: 4                       # or hosts: [h0, h1, h4, h5]
        host_runtime: {runtime: docker}       # optional: this job's (listed) hosts only
        source_port_seed: 1                   # optional: fixed source ports, one ECMP draw
        algorithm: ring                       # a collective (ring | halving-doubling) or
                                              # a chunk schedule (baseline | themis)
        dim_algorithm: ring                   # the collective each dimension of a schedule runs
        workload: {kind: allreduce, sizes: [4MiB], iterations: 5}
        # or all-to-alls of 4 MiB per rank (algorithm: pairwise | all-pairs, default
        # pairwise; leaf-spine only): {kind: alltoall, sizes: [4MiB], iterations: 5}
        # or any program on each host: {kind: command, argv: [python, -m, my.train]}
    variants:                     # each a run of its own: its keys replace the ones above
      - {name: ecmp}
      - {name: vclos, policy: vclos}
      - {name: themis, job_overrides: {algorithm: themis, order: scf}}

Every mistake is one sentence naming the field path (``jobs.1.workload.sizes.0: ...``).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from testbed.core.algorithms import (
    BY_KIND,
    AlgorithmName,
    DimAlgorithmName,
    TransportName,
    alltoall_sizes_error,
    groups_error,
    kind_error,
)
from testbed.core.errors import FabricLabError, SpecError
from testbed.core.formulas import ALLTOALL
from testbed.core.host_runtime import NAMESPACE, HostRuntime
from testbed.core.limits import check_size
from testbed.core.presets import DIM_ALGORITHM_OF_KIND, expand_preset
from testbed.core.registry import (
    ALLTOALLS,
    COLLECTIVES,
    POLICIES,
    SCHEDULES,
    TRAINING_WORKLOADS,
    TRANSPORTS,
    Registry,
)
from testbed.core.scaling import UNSCALED
from testbed.core.spec import FabricSpec, RateScale, load_yaml, validate
from testbed.core.units import parse_size

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$"  # safe in paths and shell words
Name = Annotated[str, Field(pattern=NAME)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AllReduceWorkload(_Strict):
    kind: Literal["allreduce"] = "allreduce"
    sizes: Annotated[list[int], Field(min_length=1, max_length=32)]
    iterations: Annotated[int, Field(ge=1, le=10_000)] = 5
    warmup: Annotated[int, Field(ge=0, le=100)] = 1

    @field_validator("sizes", mode="before")
    @classmethod
    def _sizes(cls, v: Any) -> Any:
        if isinstance(v, list):
            try:
                return [parse_size(x) if isinstance(x, str) else x for x in v]
            except FabricLabError as exc:  # named with its field path
                raise ValueError(str(exc)) from None
        return v

    @field_validator("sizes")
    @classmethod
    def _floats(cls, v: list[int]) -> list[int]:
        for s in v:
            check_size(s)
            if s < 4 or s % 4:
                raise ValueError(f"{s} bytes is not a whole number of float32 values (>= 4)")
        return v


class AllToAllWorkload(AllReduceWorkload):
    """All-to-alls: ``sizes`` are each rank's buffer (nccl-tests' ``alltoall_perf`` size),
    split into one equal block per rank, so each must be a multiple of 4 bytes × ranks."""

    kind: Literal["alltoall"] = ALLTOALL  # type: ignore[assignment]


# The policy value that means no controller: the fabric's proactive rules
# (sdn_app.static_routes), on the emulator only.
STATIC_POLICY = "static"


def _policy_or_static(name: str) -> str:
    return name if name == STATIC_POLICY else POLICIES.check(name)


DEFAULT_BUCKET_CAP_MB = 25.0  # PyTorch DDP's default


class DnnWorkload(_Strict):
    kind: Literal["dnn"]
    # (transformer is BERT-large: workloads.dnn's model and alias names)
    model: Literal["resnet50", "gnmt", "dlrm", "transformer", "bert-large"]
    scale: Annotated[float, Field(gt=0, le=1)] = 0.01
    compute_scale: Annotated[float, Field(ge=0, le=10)] = 1.0
    compute: Literal["sleep", "busy"] = "sleep"
    iterations: Annotated[int, Field(ge=1, le=10_000)] = 3
    warmup: Annotated[int, Field(ge=0, le=100)] = 1
    # gradients are grouped into buckets of at most this many MB, each All-Reduced as one
    # collective (PyTorch DDP's bucket_cap_mb); 0: unbucketed, one collective per layer
    # (variable), as TensorFlow's parameter-server training sends them
    bucket_cap_mb: Annotated[float, Field(ge=0, le=4096)] = DEFAULT_BUCKET_CAP_MB


class TrainingWorkload(_Strict):
    """A training iteration replayed with ASTRA-sim 1.0's semantics (docs/workload-replay.md):
    a registered workload (``model``, workloads.training.library) or an ASTRA-sim 1.0
    workload text ``file``. ``passes`` are ASTRA-sim's (whole iterations); the first
    ``warmup`` of them are left out of iteration statistics. ``size_scale`` multiplies every
    collective's bytes and ``compute_scale`` every compute time, so a run scaled down to
    emulated link rates keeps the workload's ratio of compute to communication.
    ``scheduling`` is ASTRA-sim's ``scheduling-policy`` between collectives."""

    kind: Literal["training"]
    model: Annotated[str, AfterValidator(TRAINING_WORKLOADS.check)] | None = None
    file: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    passes: Annotated[int, Field(ge=1, le=1000)] = 2
    warmup: Annotated[int, Field(ge=0, le=100)] = 0
    size_scale: Annotated[float, Field(gt=0, le=1)] = 1.0
    compute_scale: Annotated[float, Field(ge=0, le=1e6)] = 1.0
    compute: Literal["sleep", "busy"] = "sleep"
    scheduling: Literal["lifo", "fifo"] = "lifo"

    @model_validator(mode="after")
    def _one_source(self) -> TrainingWorkload:
        if (self.model is None) == (self.file is None):
            raise ValueError("give exactly one of model (a registered workload) or file")
        if self.warmup >= self.passes:
            raise ValueError(f"warmup ({self.warmup}) must leave at least one of the "
                             f"{self.passes} passes")
        return self


class CommandWorkload(_Strict):
    """Any program, one process per host, with the environment a distributed job expects
    (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ...: :mod:`testbed.emulator.commands`). An
    ``argv`` starting with ``python`` runs the Python that has fabriclab. Iteration times
    come from the program's stdout (:mod:`workloads.iteration_log`)."""

    kind: Literal["command"]
    argv: Annotated[list[Annotated[str, Field(min_length=1, max_length=4096)]],
                    Field(min_length=1, max_length=256)]
    env: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")],
              Annotated[str, Field(max_length=4096)]] = {}
    master_port: Annotated[int, Field(ge=1024, le=65535)] = 29500
    # This program is another implementation of that (allreduce) job of the experiment: the
    # report compares their bus bandwidths (e.g. Gloo against fabriclab's ring).
    peer_of: Name | None = None


Order = Literal["fifo", "scf"]  # how a dimension serves queued chunk phases
# How chunk phases queue on a dimension: ASTRA-sim 1.0's (the default, what the Themis claims
# are checked against) or fabriclab's own earlier variant (docs/themis-semantics.md).
Semantics = Literal["astra-sim-1.0", "fabriclab"]


class CollectiveOptions(_Strict):
    """The knobs a job hands its collectives, declared once: a spec's job
    (:class:`JobSpec`) and a resolved job (:class:`testbed.core.jobs.ResolvedJob`, what
    ``jobs.json`` records and every worker and simulator reads) both are these. A new knob is
    a field here plus the code that uses it."""

    algorithm: AlgorithmName = "ring"  # COLLECTIVES (one flat group) or SCHEDULES (per dim)
    # what each dimension of a schedule runs (by-kind: each its kind's, as ASTRA-sim does)
    dim_algorithm: DimAlgorithmName = "ring"
    order: Order = "fifo"
    semantics: Semantics = "astra-sim-1.0"
    chunks: Annotated[int, Field(ge=1, le=4096)] = 4
    transport: TransportName = "zerocopy"
    # Settings of the plug-ins the job runs, by registered name ({ring-x: {window: 4}}), each
    # checked by that plug-in's own ``options_model`` (:func:`plugin_options`).
    options: dict[str, dict[str, Any]] = {}
    # Fix the source ports of the job's connections (testbed.core.ports): ECMP's 5-tuple hash
    # then makes the same draw on every run, instead of a new one per run.
    source_port_seed: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _options(self) -> CollectiveOptions:
        for name, values in self.options.items():
            self.plugin_options(name, values)
        if self.source_port_seed is not None and not getattr(
                TRANSPORTS.get(self.transport), "binds_source_port", False):
            raise ValueError(f"source_port_seed: transport {self.transport} cannot choose its "
                             "source ports; leave the seed out or use zerocopy")
        return self

    def plugins(self) -> dict[str, Registry[Any]]:
        """The registered things this job runs, by name: its algorithm, its dimensions'
        collective (under a chunk schedule) and its transport, each with its registry."""
        kinds = {self.algorithm: (ALLTOALLS if self.algorithm in ALLTOALLS.names() else
                                  COLLECTIVES if self.algorithm in COLLECTIVES.names() else
                                  SCHEDULES)}
        if kinds[self.algorithm] is SCHEDULES:
            names = set(DIM_ALGORITHM_OF_KIND.values()) if self.dim_algorithm == BY_KIND \
                else {self.dim_algorithm}
            kinds.update(dict.fromkeys(sorted(names), COLLECTIVES))
        return {**kinds, self.transport: TRANSPORTS}

    def plugin_options(self, name: str, values: dict[str, Any] | None = None) -> Any:
        """The options of plug-in ``name`` for this job (``values``, else this job's
        ``options[name]``), validated by its ``options_model``; None when it has none. A
        plug-in the job does not run, or one without options, takes none: a ValueError
        naming the field."""
        values = self.options.get(name, {}) if values is None else values
        runs = self.plugins()
        if name not in runs:
            raise ValueError(f"options.{name}: the job runs no {name} (its plug-ins are "
                             f"{', '.join(runs)})")
        model = getattr(runs[name].get(name), "options_model", None)
        if model is None:
            if values:
                raise ValueError(f"options.{name}: {name} takes no options")
            return None
        try:
            return model.model_validate(values)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(map(str, err["loc"]))
            raise ValueError(f"options.{name}{'.' + where if where else ''}: "
                             f"{err['msg']}") from None


# What a job runs: one of the workload kinds, told apart by ``kind``.
WorkloadSpec = Annotated[AllReduceWorkload | AllToAllWorkload | DnnWorkload | TrainingWorkload
                         | CommandWorkload, Field(discriminator="kind")]


class JobSpec(CollectiveOptions):
    """A job as the spec states it; placement turns it into a ResolvedJob."""

    name: Name
    hosts: Annotated[list[str], Field(min_length=1)] | None = None
    hosts_wanted: Annotated[int, Field(ge=1)] | None = None
    dims: list[Annotated[int, Field(ge=1)]] | None = None  # logical split on leaf-spine
    workload: WorkloadSpec
    start_offset_s: Annotated[float, Field(ge=0, le=3600)] = 0.0
    # What this job's hosts are, if not what the experiment's `hosts` says (containers are
    # made when the fabric comes up, so the hosts must be listed).
    host_runtime: HostRuntime | None = None

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, v: list[str] | None) -> list[str] | None:
        for h in v or []:
            if not re.fullmatch(r"h[0-9]{1,4}", h):
                raise ValueError(f"{h!r} is not a host name (h0, h1, ...)")
        if v is not None and len(set(v)) != len(v):
            raise ValueError("a host is listed twice")
        return v

    @model_validator(mode="before")
    @classmethod
    def _alltoall_default(cls, data: Any) -> Any:
        """An alltoall job that names no algorithm runs the first all-to-all algorithm."""
        if isinstance(data, dict) and "algorithm" not in data and isinstance(
                data.get("workload"), dict) and data["workload"].get("kind") == ALLTOALL:
            return {**data, "algorithm": ALLTOALLS.names()[0]}
        return data

    @model_validator(mode="after")
    def _one_of(self) -> JobSpec:
        if (self.hosts is None) == (self.hosts_wanted is None):
            raise ValueError("give exactly one of hosts or hosts_wanted")
        if self.host_runtime is not None and self.hosts is None:
            raise ValueError("host_runtime needs the job's hosts listed (hosts: [h0, ...]): "
                             "containers are made when the fabric comes up, before placement")
        world = len(self.hosts) if self.hosts else self.hosts_wanted
        kind = self.workload.kind
        if kind != "command" and (bad_kind := kind_error(kind, self.algorithm)):
            raise ValueError(f"algorithm: {bad_kind} (job {self.name})")
        if bad := groups_error(self.algorithm, self.dim_algorithm, world, self.dims):
            raise ValueError(f"{bad[0]}: {bad[1]} (job {self.name})")
        sizes = getattr(self.workload, "sizes", [])
        if kind == ALLTOALL and (bad_size := alltoall_sizes_error(sizes, world or 1)):
            raise ValueError(f"workload.sizes.{bad_size[0]}: {bad_size[1]} (job {self.name})")
        return self


class Experiment(_Strict):
    """One run: what `fabriclab run` brings up, runs and tears down."""

    name: Name
    fabric: FabricSpec
    # Emulated rate ÷ real rate: the fabric's rates are real, emulated at rate × rate_scale.
    rate_scale: RateScale = UNSCALED
    # A registered routing policy, or "static": no controller, the fabric's proactive rules.
    policy: Annotated[str, AfterValidator(_policy_or_static)] | None = None
    ocs_delay_s: Annotated[float, Field(ge=0, le=60)] = 0.0
    # What the emulator's switches are: auto (kernel bridges wherever the routing allows,
    # else Open vSwitch), ovs, or kernel (testbed.emulator.switch_kinds).
    switches: Literal["auto", "ovs", "kernel"] = "auto"
    # What the hosts are: network namespaces, or Docker containers (testbed.core.host_runtime).
    hosts: HostRuntime = NAMESPACE
    # The preset the fabric came from (testbed.core.presets), if any: kept for the report.
    preset: str | None = None
    solo_baselines: bool = False
    # Run the experiment this many times (the sim backend: seed, seed+1, ...): headlines then
    # give the median [min, max] over the repeats.
    repeats: Annotated[int, Field(ge=1, le=20)] = 1
    calibrate: bool = False
    # Emulator: before the jobs, each flat All-Reduce job runs a tiny one on its hosts; its
    # time per step beyond the model's is added to every step of the prediction and the model
    # (testbed.emulator.step_latency). The sim backend takes it as --step-latency-us.
    measure_step_latency: bool = False
    sample_hz: Annotated[float, Field(ge=1, le=50)] = 10.0
    timeout_s: Annotated[float, Field(gt=0, le=24 * 3600)] = 600.0
    jobs: Annotated[list[JobSpec], Field(min_length=1, max_length=64)]

    @model_validator(mode="after")
    def _unique(self) -> Experiment:
        names = [j.name for j in self.jobs]
        if len(set(names)) != len(names):
            raise ValueError("job names must be unique")
        owner: dict[str, str] = {}
        for j in self.jobs:
            for h in j.hosts or []:
                if h in owner and owner[h] != j.name:
                    raise ValueError(f"jobs {owner[h]} and {j.name} both list host {h}; a "
                                     "host runs one job at a time")
                owner.setdefault(h, j.name)
        kinds = {j.name: j.workload.kind for j in self.jobs}
        for j in self.jobs:
            peer = getattr(j.workload, "peer_of", None)
            if peer is not None and kinds.get(peer) != "allreduce":
                raise ValueError(f"job {j.name}: peer_of {peer!r} must name an allreduce job "
                                 "of this experiment")
        return self

    def host_runtimes(self, names: list[str]) -> dict[str, HostRuntime]:
        """What each of the fabric's hosts ``names`` is: the experiment's ``hosts``, unless
        a job's ``host_runtime`` says otherwise for its listed hosts."""
        chosen = dict.fromkeys(names, self.hosts)
        for job in self.jobs:
            if job.host_runtime is not None:
                chosen.update(dict.fromkeys(job.hosts or [], job.host_runtime))
        return chosen


class Variant(BaseModel):
    """A variant names itself and replaces any top-level key of the experiment (``policy``,
    ``fabric``, ``jobs``, ...); ``job_overrides`` is merged into every job."""

    model_config = ConfigDict(extra="allow")
    name: Name
    job_overrides: dict[str, Any] | None = None


class ExperimentFile(BaseModel):
    """The YAML file: an experiment, optionally with variants."""

    model_config = ConfigDict(extra="allow")
    name: Name
    variants: list[Variant] | None = None


def expand(data: dict[str, Any], source: str = "spec", shaped: bool = True
           ) -> list[Experiment]:
    """Validate a spec mapping and return its runs (one per variant, or just the one);
    ``shaped`` False (the sim backend): no link rate is too fast to shape."""
    head = validate(ExperimentFile, data, source)
    base = {k: v for k, v in data.items() if k != "variants"}
    if not head.variants:
        return [validate(Experiment, expand_preset(base, source, keep_name=True), source,
                         shaped)]
    runs = []
    for i, variant in enumerate(head.variants):
        merged = copy.deepcopy(base)
        merged.update(copy.deepcopy(variant.model_extra or {}))
        merged["name"] = f"{head.name}-{variant.name}"
        if variant.job_overrides:
            merged["jobs"] = [dict(j, **variant.job_overrides) for j in merged.get("jobs", [])]
        where = f"{source} (variants.{i}: {variant.name})"
        runs.append(validate(Experiment, expand_preset(merged, where, keep_name=True), where,
                             shaped))
    return runs


def load_experiments(path: str | Path, shaped: bool = True) -> list[Experiment]:
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping at the top level")
    return expand(data, str(path), shaped)


def experiment_name(path: str | Path) -> str:
    """The ``name:`` of an experiment file (its variants' runs are named ``NAME-VARIANT``)."""
    data = load_yaml(path)
    return str(data.get("name")) if isinstance(data, dict) and data.get("name") else "run"
