"""A job of a run, on either backend: the job -> worker contract (:class:`ResolvedJob`,
decided once after placement by :func:`resolve`), its record in ``jobs.json``, and the checks
only a built plan can make."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field, model_validator

from testbed.core.algorithms import (
    BY_KIND,
    alltoall_sizes_error,
    default_dims,
    dim_algorithms,
    groups_error,
    is_flat,
    kind_error,
    ring_dimension_error,
)
from testbed.core.errors import FabricLabError, SpecError
from testbed.core.experiment import (
    CollectiveOptions,
    Experiment,
    JobSpec,
    WorkloadSpec,
)
from testbed.core.formulas import ALLREDUCE, ALLTOALL, link_share
from testbed.core.link_model import hop_delay_us, hop_loss, path_loss
from testbed.core.registry import COLLECTIVES, SCHEDULES
from testbed.core.spec import DimKind, validate
from testbed.core.topology import FabricPlan


class ResolvedJob(CollectiveOptions):
    """A job once placed: what its workers, the simulator and the analysis all read, decided
    once by :func:`resolve` and recorded in ``jobs.json``. Rank ``r`` runs on ``hosts[r]``;
    ``dims`` are the job's logical dimensions (a flat collective's one group, a multidim
    fabric's own, or a leaf-spine job's split), ``dim_kinds`` what each dimension is
    (``switch``, ``ring``, ``fully_connected``), ``dim_host_rates_bps`` what a host has in each
    (bit/s; on a fully connected dimension its total over its links), ``dim_rates_bps`` the
    part of that each dimension's collective can use (bit/s; what chunk schedules plan with),
    ``dim_algorithms`` the collective each dimension runs under a schedule (``dim_algorithm``
    itself, or with ``by-kind`` each dimension's kind's), ``dim_delays_us`` the one-way delay
    of one hop in each dimension as emulated (µs: the plan's link delays, the longest of the
    job's hops there) and ``dim_losses`` the fraction of packets such a hop loses (both empty
    when its links are perfect wires). Every fabric fact a job needs is here: nothing
    downstream looks it up again from the plan."""

    name: str
    hosts: Annotated[list[str], Field(min_length=1)]
    dims: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1)]
    dim_kinds: list[DimKind]
    dim_host_rates_bps: list[Annotated[float, Field(gt=0)]]
    dim_rates_bps: list[Annotated[float, Field(gt=0)]]
    dim_algorithms: list[str] = Field(default_factory=list)
    dim_delays_us: list[Annotated[float, Field(ge=0)]] = Field(default_factory=list)
    dim_losses: list[Annotated[float, Field(ge=0, lt=1)]] = Field(default_factory=list)
    workload: WorkloadSpec

    @model_validator(mode="before")
    @classmethod
    def _one_collective(cls, data: Any) -> Any:
        """A job that names one ``dim_algorithm`` runs it on every dimension."""
        if isinstance(data, dict) and not data.get("dim_algorithms") and data.get(
                "dim_algorithm", "ring") != BY_KIND and data.get("dims"):
            return {**data, "dim_algorithms": [data.get("dim_algorithm", "ring")]
                    * len(data["dims"])}
        return data

    @model_validator(mode="after")
    def _shape(self) -> ResolvedJob:
        if math.prod(self.dims) != self.world:
            raise ValueError(f"dims {'x'.join(map(str, self.dims))} do not multiply to "
                             f"{self.world} hosts")
        for facts in ("dim_kinds", "dim_host_rates_bps", "dim_rates_bps"):
            if len(getattr(self, facts)) != len(self.dims):
                raise ValueError(f"{facts} must give one value per dimension")
        for facts in ("dim_delays_us", "dim_losses"):  # empty: none
            if getattr(self, facts) and len(getattr(self, facts)) != len(self.dims):
                raise ValueError(f"{facts} must give one value per dimension, or none")
        if self.workload.kind == "command":
            return self
        if bad := kind_error(self.workload.kind, self.algorithm):
            raise ValueError(f"algorithm: {bad}")
        if len(self.dim_algorithms) != len(self.dims):
            raise ValueError("dim_algorithms must name one collective per dimension")
        for name in set(self.dim_algorithms) if not self.flat else [self.dim_algorithm]:
            if name != BY_KIND and (bad := groups_error(self.algorithm, name, self.world,
                                                        self.dims)):
                raise ValueError(f"{bad[0]}: {bad[1]}")
        if self.workload.kind == ALLTOALL and (
                bad_size := alltoall_sizes_error(self.workload.sizes, self.world)):
            raise ValueError(f"workload.sizes.{bad_size[0]}: {bad_size[1]}")
        return self

    @property
    def world(self) -> int:
        return len(self.hosts)

    def uniform_dim_algorithm(self) -> str:
        """The one collective every dimension runs, for code that runs one (the emulator's
        workers, the flow-level simulator); one sentence when ``by-kind`` gives several."""
        names = sorted(set(self.dim_algorithms))
        if len(names) != 1:
            raise SpecError(f"job {self.name}: dim_algorithm by-kind gives its dimensions "
                            f"different collectives ({', '.join(self.dim_algorithms)}); only "
                            "training jobs on the sim backend run that: name one collective")
        return names[0]

    @property
    def flat(self) -> bool:
        """One collective over all ranks (a collective or an all-to-all), not a schedule."""
        return is_flat(self.algorithm)

    def chunk_count(self, count: int, chunks: int | None = None) -> int:
        """The chunks a collective of ``count`` float32 values runs in: one for a flat job,
        else ``chunks`` (default the job's), at most one per value."""
        return 1 if self.flat else min(self.chunks if chunks is None else chunks, count)

    def plugin(self, name: str) -> Any:
        """The job's registered plug-in ``name`` (its algorithm, dimensions' collective or
        transport), configured with the job's options for it: ``configure(options)`` of a
        plug-in that declares an ``options_model``, which returns the configured plug-in."""
        obj = self.plugins()[name].get(name)
        options = self.plugin_options(name)
        return obj if options is None else obj.configure(options)

    @property
    def collective_kind(self) -> str:
        """What its collectives are: ``alltoall`` or ``allreduce`` (sizes or DNN buckets)."""
        return ALLTOALL if self.workload.kind == ALLTOALL else ALLREDUCE

    def record(self) -> dict[str, Any]:
        """The fields ``jobs.json`` keeps (:func:`knobs_record`); delays and losses only
        where the links have them."""
        return knobs_record(self.model_dump(mode="json", exclude={
            f for f in ("dim_delays_us", "dim_losses") if not getattr(self, f)}))

    @property
    def dim_delays_s(self) -> list[float]:
        """Each dimension's one-way hop delay in seconds (0 where none is recorded)."""
        return [d * 1e-6 for d in self.dim_delays_us] or [0.0] * len(self.dims)

    @property
    def dim_hop_losses(self) -> list[float]:
        """Each dimension's hop loss (0 where none is recorded)."""
        return list(self.dim_losses) or [0.0] * len(self.dims)


def knobs_record(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` (a dumped job with its ``workload``) with the knobs that mean nothing for its
    workload set to None: a command's collectives are its own business, an all-to-all has
    no chunk schedule."""
    kind = job["workload"]["kind"]
    meaningless = set(CollectiveOptions.model_fields)
    if kind == ALLTOALL:
        meaningless -= {"algorithm", "transport"}
    elif kind != "command":
        meaningless = set()
    return {**job, **dict.fromkeys(meaningless, None)}


def logical_dims(spec: JobSpec, plan: FabricPlan, size: int) -> list[int]:
    """The logical dimensions of ``spec`` on ``size`` hosts of ``plan``, the one place they
    are decided: one group for a flat collective (or a command), the fabric's own on a
    multidim fabric, else the spec's split or the default 2-D one."""
    if spec.workload.kind == "command" or is_flat(spec.algorithm):
        return [size]
    if plan.kind == "multidim":
        return [d.size for d in plan.spec.dims]
    return list(spec.dims) if spec.dims else default_dims(size, spec.algorithm)


def resolve(spec: JobSpec, plan: FabricPlan, hosts: list[str]) -> ResolvedJob:
    """``spec`` placed on ``hosts`` of ``plan``: its dimensions (:func:`logical_dims`), what
    each is and what a host has in it, read from the plan here and only here."""
    dims = logical_dims(spec, plan, len(hosts))
    if spec.workload.kind != "command" and not is_flat(spec.algorithm):
        # the hosts fit the dims: a multidim job spans every host in order, with the
        # fabric's own dims (a spec's other dims are refused); a split multiplies out
        job_dims(plan, hosts, spec.dims or dims)
    if plan.kind == "multidim":  # (flat jobs are refused there: check_against_fabric)
        host_rates = [float(d.mbit_s) * 1e6 for d in plan.spec.dims]
    else:  # a leaf-spine job's dimensions all cross the host's one link
        host_rates = [float(plan.spec.host_link_mbit_s) * 1e6] * len(dims)
    kinds = dim_kinds(plan, len(dims))
    job = resolve_on(spec, hosts, dims, kinds, host_rates)
    if any(lk.impaired for lk in plan.links):
        delays, losses = hop_impairments(plan, hosts, kinds)
        job = job.model_copy(update={"dim_delays_us": delays, "dim_losses": losses})
    return job


def hop_impairments(plan: FabricPlan, hosts: list[str], kinds: list[str]
                    ) -> tuple[list[float], list[float]]:
    """(one-way delay in µs, loss) of one hop in each of a job's dimensions on ``plan``: the
    longest and lossiest of its hosts' hops there. On a multidim fabric a hop of dimension d
    is one of its links, or two of a switch dimension (up and down); on leaf-spine every
    dimension's hop is host link, (uplink, uplink,) host link, the uplinks when the job spans
    leaves."""
    mine = set(hosts)
    if plan.kind == "multidim" and len(kinds) == len(plan.spec.dims):
        out = []
        for d, kind in enumerate(kinds):
            links = [lk for lk in plan.links if lk.dim == d and (lk.a in mine or lk.b in mine)]
            out.append((hop_delay_us(kind, max((lk.delay_us for lk in links), default=0.0)),
                        hop_loss(kind, max((lk.loss for lk in links), default=0.0))))
        return [d for d, _ in out], [p for _, p in out]
    own = [lk for lk in plan.links if lk.kind == "host" and lk.a in mine]
    leaves = {lk.b for lk in own}
    ups = [lk for lk in plan.links if lk.kind != "host" and len(leaves) > 1]
    delay = 2 * max((lk.delay_us for lk in own), default=0.0) + 2 * max(
        (lk.delay_us for lk in ups), default=0.0)
    loss = path_loss([max((lk.loss for lk in own), default=0.0)] * 2
                     + [max((lk.loss for lk in ups), default=0.0)] * 2)
    return [delay] * len(kinds), [loss] * len(kinds)


def resolve_on(spec: JobSpec, hosts: list[str], dims: list[int], kinds: list[str],
               host_rates_bps: list[float]) -> ResolvedJob:
    """The one constructor of a :class:`ResolvedJob`: ``spec`` on ``hosts`` with the given
    logical ``dims``, their ``kinds`` and a host's rate in each (bit/s). It decides each
    dimension's collective and the rate that collective can use (planning rate)."""
    names = dim_algorithms(spec.dim_algorithm, kinds)
    rates = [rate * float(link_share(kind, size, COLLECTIVES.get(name)))
             for rate, kind, size, name in zip(host_rates_bps, kinds, dims, names, strict=True)]
    return validate(ResolvedJob, {
        **spec.model_dump(include=set(CollectiveOptions.model_fields)), "name": spec.name,
        "hosts": list(hosts), "dims": list(dims), "dim_kinds": list(kinds),
        "dim_host_rates_bps": list(host_rates_bps), "dim_rates_bps": rates,
        "dim_algorithms": names, "workload": spec.workload.model_dump()}, f"job {spec.name}")


def dim_kinds(plan: FabricPlan, n_dims: int) -> list[str]:
    """What each of a job's ``n_dims`` logical dimensions is: a multidim fabric's own
    kinds, else switches (a leaf-spine job's dimensions meet at its leaves and spines)."""
    if plan.kind == "multidim" and n_dims == len(plan.spec.dims):
        return list(plan.spec.kinds)
    return ["switch"] * n_dims


@dataclass
class JobRun:
    """One job of a run (or the solo baseline of one): its spec, its placement and, once
    placed, its :class:`ResolvedJob`; then how it went."""

    name: str
    spec: JobSpec
    resolved: ResolvedJob | None = None
    allocation: dict[str, Any] = field(default_factory=dict)
    solo_of: str | None = None
    status: str = "pending"  # pending | running | ok | failed | incomplete
    start: float | None = None
    end: float | None = None
    error: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    command: dict[str, Any] | None = None  # a command job's exit codes and iteration counts
    # the model's time per All-Reduce size (workloads.model.job_model_s), as the backend
    # predicted it when the job was placed; None where the model does not cover the job
    model_s: dict[str, float] | None = None
    # retransmission timeouts its hosts' TCP counted while it ran (emulator; None: not read)
    tcp_timeouts: int | None = None

    @property
    def hosts(self) -> list[str]:
        return self.resolved.hosts if self.resolved else []

    def solo(self) -> JobRun:
        """This job's solo baseline: the same resolved job, alone, as ``<name>-solo``."""
        name = f"{self.name}-solo"
        resolved = self.resolved.model_copy(update={"name": name}) if self.resolved else None
        return JobRun(name, self.spec, resolved, self.allocation, solo_of=self.name,
                      model_s=self.model_s)

    def record(self) -> dict[str, Any]:
        """The job's ``jobs.json`` record: its resolved job (or, if it was never placed, the
        spec's knobs), its placement and how it went."""
        job = self.resolved.record() if self.resolved else knobs_record(
            {**self.spec.model_dump(mode="json", include=set(CollectiveOptions.model_fields)),
             "hosts": [], "dims": None, "dim_kinds": None, "dim_host_rates_bps": None,
             "dim_rates_bps": None,
             "workload": self.spec.workload.model_dump(mode="json")})
        return {
            **job, "name": self.name, "solo_of": self.solo_of,
            "policy": self.allocation.get("policy"), "spines": self.allocation.get("spines", []),
            "circuits": self.allocation.get("ocs_ports", []),
            "model_s": self.model_s, "start": self.start, "end": self.end,
            "status": self.status, "error": self.error, "results": self.rows,
            "tcp_timeouts": self.tcp_timeouts,
            **({"command": self.command} if self.command is not None else {}),
        }


def check_against_fabric(exp: Experiment, plan: FabricPlan) -> None:
    """What only the built plan can tell: hosts exist and jobs fit. (Whether the policy
    routes this fabric is ``sdn_app.policies.policy_for``'s to say.)"""
    names = {h.name for h in plan.hosts}
    for i, job in enumerate(exp.jobs):
        for h in job.hosts or []:
            if h not in names:
                raise SpecError(f"jobs.{i}.hosts: {h} is not a host of this fabric "
                                f"(h0..h{len(names) - 1})")
        size = len(job.hosts) if job.hosts else job.hosts_wanted
        if job.workload.kind == "command" and plan.kind == "multidim":
            raise SpecError(f"jobs.{i}.workload: a command job needs one fabric interface per "
                            "host; run it on a leaf_spine or ocs_leaf_spine fabric")
        if job.workload.kind == ALLTOALL and plan.kind == "multidim":
            raise SpecError(f"jobs.{i}.workload.kind: an alltoall job needs one fabric "
                            "interface per host; run it on a leaf_spine or ocs_leaf_spine "
                            "fabric")
        if size > len(names):
            raise SpecError(f"jobs.{i}.hosts_wanted: {size} hosts, the fabric has {len(names)}")
        if job.workload.kind == "command":
            continue  # the rest is about fabriclab's own collectives
        if plan.kind == "multidim" and size != len(names):
            raise SpecError(f"jobs.{i}: a job on a multidim fabric spans all {len(names)} hosts")
        flat = is_flat(job.algorithm)
        if flat and plan.kind == "multidim":
            raise SpecError(f"jobs.{i}.algorithm: a flat {job.algorithm} needs a leaf-spine "
                            f"fabric; use a chunk schedule ({', '.join(SCHEDULES.names())}) "
                            "on multidim")
        dims = logical_dims(job, plan, size)
        per_dim = dim_algorithms(job.dim_algorithm, dim_kinds(plan, len(dims)))
        for name in dict.fromkeys(per_dim) if not flat else [job.dim_algorithm]:
            if bad := groups_error(job.algorithm, name, size, dims):
                raise SpecError(f"jobs.{i}.{bad[0]}: {bad[1]} (job {job.name})")
        for d, dim in enumerate(plan.spec.dims if plan.kind == "multidim" else []):
            if dim.kind == "ring" and (
                    bad_ring := ring_dimension_error(per_dim[d], dim.size)):
                raise SpecError(f"jobs.{i}.dim_algorithm: {bad_ring} (job {job.name}, "
                                f"fabric.dims.{d})")


def job_dims(plan: FabricPlan, hosts: list[str], dims: list[int] | None) -> list[int]:
    """The logical dimensions of a job: the fabric's own on a multidim fabric, else the
    given split (or one flat dimension) over the hosts' single NICs."""
    if plan.kind == "multidim":
        sizes = list(plan.spec.sizes)
        if hosts != [h.name for h in plan.hosts]:
            raise FabricLabError("a multidim job spans every host of the fabric, in host order")
        if dims and list(dims) != sizes:
            raise FabricLabError(f"dims must be the fabric's own, {'x'.join(map(str, sizes))}")
        return sizes
    dims = list(dims) if dims else [len(hosts)]
    if math.prod(dims) != len(hosts):
        raise FabricLabError(f"dims {'x'.join(map(str, dims))} do not multiply to "
                             f"{len(hosts)} hosts")
    return dims
