"""Multi-tenant leaf-spine cluster simulation: a queue discipline, allocator, flow-level network.

Pure algorithms, no I/O (the CLI in :mod:`testbed.cli.simulate_cluster` writes the files).

Cluster
    ``leaves`` x ``hosts_per_leaf`` hosts, ``spines`` spines; one host is one GPU. Every
    host NIC, leaf-spine link and OCS circuit runs at ``link_bps`` in each direction.
    ``ecmp`` and ``vclos`` use a static leaf-spine fabric; ``ocs-vclos`` connects leaves and
    spines (or leaf pairs) only through circuits that the allocator sets up per job.

Admission
    The run's queue discipline (``queue``, :mod:`testbed.sim.queues`, registered in
    :data:`testbed.core.registry.QUEUES`) names the waiting job to try next; the policy's
    allocator decides whether it fits. A refused job is not tried again until a job ends (its
    resources freed); an admission pass runs at every arrival and every job's end. The
    default, ``fifo``, is strict FIFO: jobs queue in arrival order and only the head may be placed
    (:meth:`sdn_app.allocation.cluster.Cluster.allocate`); while the head is refused (no free hosts,
    or no isolated virtual Clos: ``fragmented``), every job behind it waits too, even one
    that would fit. That head-of-line blocking is FIFO's nature and is kept on purpose: it is
    how fragmentation turns into waiting time. The head is retried when a job ends. Jobs no
    policy could ever place (larger than the cluster, or ``unshapeable``) are dropped and
    counted as ``refused_unshapeable`` (a job refused while no other job runs is one of them).
    ``refused_fragmented`` counts refused admission attempts, ``refused_fragmented_links``
    those of them where leaves with the free hosts existed but no links or circuits joined
    them. ``placement``, ``rewiring`` and ``spine_ports_per_ocs`` are passed to the allocator
    (``spine_ports_per_ocs`` 0: leaves / OCSes, a spine port per leaf as in the electrical
    fabric).

Trace placement (``placement="trace"``)
    A trace that records where its jobs ran (``lingjun:DIR``:
    :class:`~testbed.sim.trace_formats.TracePlacement`) is replayed on those hosts: each trace
    host is a block of slots on the leaf of its leaf switch
    (:meth:`~testbed.sim.trace_formats.TracePlacement.fabric_slots`), and a job takes, on each
    of its hosts, as many free slots of that block as it used GPUs there, through the policy's
    ``claim`` instead of its allocator. While those slots are busy (the simulated jobs need
    not keep production's times) the job waits at the queue's head. ``vclos`` also needs the
    same GPUs on every leaf of a job: a trace placement of another shape is refused as
    ``unshapeable``; ``ocs-vclos`` wires circuits only for hosts it picks and is refused with
    this placement. Jobs the trace gives no hosts for are placed by the allocator (``joint``).

Routing (host -> leaf -> spine -> leaf -> host)
    ``ecmp``: the spine is a CRC32 hash of the flow's 5-tuple (src, dst, a source port drawn
    from the run's seeded RNG, a fixed destination port, TCP) modulo the spines; connections
    are opened once per job and kept, so a collision lasts for the job's life, as with
    persistent NCCL connections. ``vclos``: host j of a leaf goes through the job's spine
    ``spine_of[host]``. ``ocs-vclos``: up the source host's circuit ``circuit_of[host]`` to its
    spine and down the job's circuit from that spine to the destination leaf, or across the
    direct leaf-leaf circuit of a two-leaf job.

Collective and abstraction for scale
    A job runs ``iterations`` of (compute, collective of its gradients S): the run's
    ``collective`` (``ring`` by default), or the one its trace names. How a placed job
    communicates (its :class:`~testbed.sim.job_plans.JobPlan`) comes from the collective's
    own steps (any of the registries', or ``rail-ring``, the rail All-Reduce vClos is built
    for) and the policy's paths: see :mod:`testbed.sim.job_plans`. A one-leaf job's time is
    computed, not simulated; so are ``rail-ring``'s intra-leaf phases.
    Each bundle of a plan is one lockstep bundle on the flow network
    (:meth:`testbed.sim.flows.Network.add_bundle`): a step ends with its slowest flow, so
    all sub-flows move at the bottleneck rate, and bundles are max-min shared with everything
    else active; rates change only when a bundle starts or ends. Iterations are batched: a
    job's iterations are split into at most ``rounds`` rounds, each being its iterations'
    compute and intra-leaf time around its bundles carrying their total bytes. That keeps
    each job's duty cycle and bytes exact while bounding the events per job.
    ``isolated`` (the slowdown's reference) is the job's run time alone on an idle cluster
    with the same placement and collision-free routing (the flow leaving host j of a leaf
    through spine j, or, where that link already carries one of the job's flows, through the
    least used spine: an uneven ECMP placement can make spine j collide with itself).

``collided_flow_fraction``
    A job's flows are its cross-leaf connections (fixed for its life). A flow is
    *collided* when, while it was active, a leaf-spine link or circuit on its path also
    carried another active flow (of another job, or of the same job: an ECMP hash
    collision). The fraction is over all cross-leaf flows.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sdn_app.allocation.cluster import PLACEMENTS, Cluster
from sdn_app.allocation.ledger import Allocation, AllocationRefused, LeafSlot
from sdn_app.allocation.ocs import REWIRINGS, rewiring_name
from sdn_app.allocation.ocs_exact import solver_counts
from sdn_app.policies import get as get_policy
from testbed.core.errors import FabricLabError
from testbed.core.registry import QUEUES, RegistryError
from testbed.sim.flows import Flow, Network
from testbed.sim.gc_pace import paced_collections
from testbed.sim.job_plans import (
    ALIASES,
    IsolatedTimes,
    JobPlan,
    LinkDelays,
    cluster_collective,
    cluster_policy,
    job_plan,
    rails_time,
)
from testbed.sim.queues import QueueView, RunningJob, WaitingJob
from testbed.sim.rail_collisions import RailCollisions
from testbed.sim.trace_formats import TracePlacement
from testbed.sim.traces import TraceJob, job_set_sha256

# The allocator's placements, and "trace": the hosts a trace recorded (see the docstring).
SIM_PLACEMENTS = (*PLACEMENTS, "trace")


@dataclass(frozen=True)
class ClusterConfig:
    leaves: int
    spines: int
    hosts_per_leaf: int
    policy: str
    ocs_count: int = 0
    spine_ports_per_ocs: int = 0  # 0: ceil(leaves / ocs_count), a spine port per leaf
    placement: str = "joint"  # or "hosts-first" (see sdn_app.allocation), or "trace"
    rewiring: str = "augment"  # ocs-vclos: or "any", "conservative", "milp" (allocation.ocs)
    link_bps: float = 100e9
    rounds: int = 8
    seed: int = 1
    collective: str = "ring"
    sharing: str = "fast"  # the network's max-min filler (testbed.sim.flows.SHARING)
    gpus_per_server: int = 1  # a job crossing leaves takes whole idle servers of this many
    queue: str = "fifo"  # the queue discipline (testbed.sim.queues, registry QUEUES)
    # one-way propagation delay of every host link and of every link above the leaves (s)
    host_link_delay_s: float = 0.0
    uplink_delay_s: float = 0.0

    def __post_init__(self) -> None:
        # an older spelling (hierarchical) names the collective it now is
        object.__setattr__(self, "collective", ALIASES.get(self.collective, self.collective))
        object.__setattr__(self, "rewiring", rewiring_name(self.rewiring))  # exact: milp

    def check(self) -> None:
        cluster_policy(self.policy)
        try:
            QUEUES.check(self.queue)
        except RegistryError as exc:
            raise FabricLabError(f"--queue {exc}") from None
        for name in ("leaves", "spines", "hosts_per_leaf", "rounds"):
            if getattr(self, name) < 1:
                flag = name.replace("_", "-")
                raise FabricLabError(f"--{flag} is {getattr(self, name)}; it must be at least 1")
        try:
            cluster_collective(self.collective)
        except FabricLabError as exc:
            raise FabricLabError(f"--collective: {exc}") from None
        if self.uses_ocs and self.ocs_count < 1:
            raise FabricLabError("--policy ocs-vclos needs --ocs-count of at least 1")
        if self.placement not in SIM_PLACEMENTS:
            raise FabricLabError(f"--placement {self.placement!r} is unknown; use one of "
                                 f"{', '.join(SIM_PLACEMENTS)}")
        if self.placement == "trace" and self.uses_ocs:
            raise FabricLabError(f"--placement trace puts jobs on the trace's own hosts, and "
                                 f"--policy {self.policy} wires circuits only for hosts its "
                                 "allocator picks; use ecmp, ecmp-l3 or vclos")
        if self.rewiring not in REWIRINGS:
            raise FabricLabError(
                f"--rewiring {self.rewiring!r} is unknown; use one of {', '.join(REWIRINGS)}"
            )
        if self.spine_ports_per_ocs < 0:
            raise FabricLabError(
                f"--spine-ports-per-ocs is {self.spine_ports_per_ocs}; it must be at least 1 "
                "(or 0 for one spine port per leaf)"
            )
        if self.gpus_per_server < 1 or self.hosts_per_leaf % self.gpus_per_server:
            raise FabricLabError(f"--gpus-per-server is {self.gpus_per_server}; it must be at "
                                 f"least 1 and divide --hosts-per-leaf ({self.hosts_per_leaf})")
        if not self.link_bps > 0:
            raise FabricLabError(f"--link-gbit-s gives {self.link_bps} bit/s; it must be > 0")
        for name in ("host_link_delay_s", "uplink_delay_s"):
            if not 0 <= getattr(self, name) < 10:
                flag = name.removesuffix("_s").replace("_", "-")
                raise FabricLabError(f"--{flag}-us gives {getattr(self, name)} s; it must be "
                                     "in [0, 10) s")

    @property
    def delays(self) -> LinkDelays:
        return LinkDelays(self.host_link_delay_s, self.uplink_delay_s)

    @property
    def uses_ocs(self) -> bool:
        return cluster_policy(self.policy).allocates_as == "ocs-vclos"

    @property
    def total_gpus(self) -> int:
        return self.leaves * self.hosts_per_leaf

    @property
    def spine_ports(self) -> int:
        """Ports per spine per OCS: as set, or enough for one port per leaf."""
        if self.spine_ports_per_ocs:
            return self.spine_ports_per_ocs
        return max(1, math.ceil(self.leaves / max(1, self.ocs_count)))


@dataclass
class JobRecord:
    spec: TraceJob
    start: float = float("nan")
    finish: float = float("nan")
    leaves: int = 0
    flows: int = 0
    collided: set[int] = field(default_factory=set)
    isolated: float = 0.0

    def row(self) -> dict[str, Any]:
        run = self.finish - self.start
        return {
            "job_id": self.spec.job_id,
            "model": self.spec.model,
            "gpus": self.spec.gpus,
            "leaves": self.leaves,
            "iterations": self.spec.iterations,
            "arrival_s": self.spec.arrival,
            "start_s": self.start,
            "finish_s": self.finish,
            "jct_s": self.finish - self.spec.arrival,
            "wait_s": self.start - self.spec.arrival,
            "run_s": run,
            "isolated_s": self.isolated,
            "slowdown": run / self.isolated if self.isolated > 0 else 1.0,
            "flows": self.flows,
            "collided_flows": len(self.collided),
        }


@dataclass
class ClusterResult:
    rows: list[dict[str, Any]]
    summary: dict[str, Any]


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of sorted values."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class ClusterSimulation:
    """One run: feed :class:`TraceJob` s through the queue discipline onto the simulated
    fabric."""

    def __init__(self, jobs: Sequence[TraceJob], config: ClusterConfig,
                 progress: Callable[[int, int, float], None] | None = None,
                 placement: TracePlacement | None = None) -> None:
        """``progress(done, total, now)`` is called whenever a job finishes; ``placement``:
        where the trace's jobs ran, required by ``config.placement == "trace"``."""
        config.check()
        if config.placement == "trace" and placement is None:
            raise FabricLabError("--placement trace needs a trace that records where its jobs "
                                 "ran (lingjun:DIR); this one does not")
        self.placement = placement if config.placement == "trace" else None
        self.trace_slots = (self.placement.fabric_slots(config.leaves, config.hosts_per_leaf)
                            if self.placement is not None else {})
        self.trace_placed = 0  # jobs started on the hosts the trace gave them
        self.progress = progress
        self.config = config
        self.jobs = sorted(jobs, key=lambda j: (j.arrival, j.job_id))
        ocs = config.ocs_count if config.uses_ocs else 0
        self.cluster = Cluster(config.leaves, config.spines, config.hosts_per_leaf, ocs,
                               spine_ports_per_ocs=config.spine_ports,
                               placement="joint" if self.placement else config.placement,
                               rewiring=config.rewiring,
                               gpus_per_server=config.gpus_per_server)
        self.net = Network(default_capacity=config.link_bps, sharing=config.sharing)
        self.rng = random.Random(config.seed)
        self.isolated_times = IsolatedTimes()  # a hashed policy's jobs' isolated reference
        self.discipline = QUEUES.get(config.queue)
        self.queue: list[WaitingJob] = []  # arrival order
        self.waiting: dict[str, JobRecord] = {}
        self.running: dict[str, RunningJob] = {}
        self.refused: set[str] = set()  # waiting jobs refused since the last job ended
        self.records: list[JobRecord] = []
        self.dropped_too_large = 0
        self.refused_unshapeable = 0
        self.refused_fragmented = 0  # admission attempts refused as fragmented
        self.refused_fragmented_links = 0  # ... of which hosts fitted but links did not
        self.fragmented_jobs: set[str] = set()
        self.solver_before: dict[str, float] = {}  # solver_counts() when the run began

    def run(self) -> ClusterResult:
        wall = time.perf_counter()
        self.solver_before = solver_counts()
        for spec in self.jobs:
            self.net.at(spec.arrival, lambda spec=spec: self._arrive(spec))
        with paced_collections():  # results alike; a third less CPU at the paper's scale
            self.net.run()
        if self.queue:  # cannot happen with finite jobs unless a job can never be placed
            raise FabricLabError(f"{len(self.queue)} jobs were never placed")
        self.records.sort(key=lambda r: (r.spec.arrival, r.spec.job_id))
        rows = [r.row() for r in self.records]
        return ClusterResult(rows, self._summary(rows, wall))

    # ------------------------------------------------------------------ admission

    def _arrive(self, spec: TraceJob) -> None:
        if spec.gpus > self.config.total_gpus:
            self.dropped_too_large += 1
            return
        self.queue.append(WaitingJob(spec.job_id, spec.gpus, spec.arrival,
                                     spec.isolated_time(self.config.link_bps), spec.grad_bytes))
        self.waiting[spec.job_id] = JobRecord(spec)
        self._admit()

    def _admit(self) -> None:
        """Try the jobs the discipline names until it names none (under fifo: the head, once
        per state, as before disciplines were plug-ins)."""
        while self.queue:
            job = self.discipline.next_job(QueueView(
                self.net.now, self.config.total_gpus, self.cluster.free_hosts(), self.queue,
                self.running.values(), self.refused))
            if job is None:
                return
            record = self.waiting[job.job_id]
            try:
                alloc = self._place(record.spec)
            except AllocationRefused as exc:
                if exc.reason == "unshapeable" or not self.cluster.jobs:
                    # Refused on an empty cluster: no amount of waiting will place it.
                    self._dequeue(job)
                    self.refused_unshapeable += 1
                    continue
                if exc.reason == "fragmented":
                    self.refused_fragmented += 1
                    self.refused_fragmented_links += exc.cause == "links"
                    self.fragmented_jobs.add(record.spec.job_id)
                self.refused.add(job.job_id)
                continue
            self._dequeue(job)
            self.running[job.job_id] = RunningJob(job.gpus, self.net.now + job.expected_run_s)
            self._start(record, alloc)

    def _dequeue(self, job: WaitingJob) -> None:
        if self.queue[0] is job:
            del self.queue[0]
        else:
            self.queue.remove(job)
        del self.waiting[job.job_id]
        self.refused.discard(job.job_id)

    def _place(self, spec: TraceJob) -> Allocation:
        """The job's trace hosts through the policy's ``claim`` where the trace gives them,
        else the policy's allocator; raises :class:`AllocationRefused`."""
        policy = get_policy(self.config.policy)
        if self.placement is None or spec.job_id not in self.placement.gpus_of:
            return policy.allocate(self.cluster, spec.job_id, spec.gpus)
        hosts = trace_hosts(self.cluster.free_slots, self.trace_slots,
                            self.placement.gpus_of[spec.job_id], self.placement.gpus_per_host)
        alloc = policy.claim(self.cluster, spec.job_id, hosts)
        self.trace_placed += 1
        return alloc

    # ------------------------------------------------------------------ running

    def _start(self, record: JobRecord, alloc: Allocation) -> None:
        spec, c = record.spec, self.config
        record.start = self.net.now
        record.leaves = len(alloc.leaves)
        if spec.grad_bytes == 0:  # nothing to send: its run time is its compute alone
            record.isolated = spec.iterations * spec.compute_s
            self.net.at(self.net.now + record.isolated, lambda: self._finish(record))
            return
        collective = spec.collective or c.collective
        plan = job_plan(alloc, spec.grad_bytes, c.link_bps, c.spines, self.rng,
                        collective=collective, delays=c.delays)
        if get_policy(alloc.policy).hashed:
            intra_s, latency_s, rails_s = self.isolated_times(
                alloc, spec.grad_bytes, c.link_bps, c.spines, collective, c.delays)
        else:
            intra_s, latency_s, rails_s = plan.intra_s, plan.latency_s, rails_time(
                plan, c.link_bps)
        record.isolated = spec.iterations * (spec.compute_s + intra_s + latency_s + rails_s)
        record.flows = plan.flows
        _JobRounds(self, record, plan, _split(spec.iterations, min(spec.iterations, c.rounds))
                   ).start_round()

    def _finish(self, record: JobRecord) -> None:
        record.finish = self.net.now
        self.cluster.release(record.spec.job_id)
        del self.running[record.spec.job_id]
        self.refused.clear()  # resources freed: every waiting job may fit again
        self.records.append(record)
        if self.progress is not None:
            self.progress(len(self.records), len(self.jobs), self.net.now)
        self._admit()

    # ------------------------------------------------------------------ metrics

    def _utilisation(self) -> float:
        """Time-average busy GPU fraction between the first and the last arrival (the
        trace's offered window; the drain after the last arrival is left out), or over the
        whole run when all jobs arrive at once."""
        if not self.records:
            return 0.0
        t0 = min(j.arrival for j in self.jobs)
        t1 = max(j.arrival for j in self.jobs)
        if t1 <= t0:
            t1 = max(r.finish for r in self.records)
        if t1 <= t0:
            return 0.0
        busy = sum(
            r.spec.gpus * max(0.0, min(r.finish, t1) - max(r.start, t0)) for r in self.records
        )
        return busy / (self.config.total_gpus * (t1 - t0))

    def _summary(self, rows: list[dict[str, Any]], wall_start: float) -> dict[str, Any]:
        """The run's summary over ``rows`` (the records' rows, in order)."""
        c = self.config
        jcts = sorted(r["jct_s"] for r in rows)
        first = min((j.arrival for j in self.jobs), default=0.0)
        last = max((r["finish_s"] for r in rows), default=first)
        span = last - first
        flows = sum(r.flows for r in self.records)
        collided = sum(len(r.collided) for r in self.records)

        def mean(key: str) -> float:
            return statistics.fmean(r[key] for r in rows) if rows else float("nan")

        return {
            "policy": c.policy,
            "queue": c.queue,
            "leaves": c.leaves,
            "spines": c.spines,
            "hosts_per_leaf": c.hosts_per_leaf,
            "gpus_per_server": c.gpus_per_server,
            "gpus": c.total_gpus,
            "ocs_count": c.ocs_count if c.uses_ocs else 0,
            "spine_ports_per_ocs": c.spine_ports if c.uses_ocs else 0,
            "link_gbit_s": c.link_bps / 1e9,
            "host_link_delay_us": c.host_link_delay_s * 1e6,
            "uplink_delay_us": c.uplink_delay_s * 1e6,
            "rounds": c.rounds,
            "collective": c.collective,
            # How hosts and network were chosen together; moot where any free hosts do.
            "placement": c.placement if (c.placement == "trace" or cluster_policy(
                c.policy).allocates_as != "ecmp") else "",
            "jobs_trace_placed": self.trace_placed,
            "rewiring": c.rewiring if c.uses_ocs else "",
            "seed": c.seed,
            "jobs_in_trace": len(self.jobs),
            "job_set_sha256": job_set_sha256(self.jobs),
            "jobs_completed": len(rows),
            "dropped_too_large": self.dropped_too_large,
            "refused_unshapeable": self.refused_unshapeable,
            "refused_fragmented": self.refused_fragmented,
            "refused_fragmented_jobs": len(self.fragmented_jobs),
            "refused_fragmented_links": self.refused_fragmented_links,
            "avg_jct_s": mean("jct_s"),
            "p50_jct_s": _percentile(jcts, 50),
            "p95_jct_s": _percentile(jcts, 95),
            "p99_jct_s": _percentile(jcts, 99),
            "avg_wait_s": mean("wait_s"),
            "avg_run_s": mean("run_s"),
            "avg_isolated_s": mean("isolated_s"),
            "avg_slowdown": mean("slowdown"),
            "max_slowdown": max((r["slowdown"] for r in rows), default=float("nan")),
            "gpu_utilisation": self._utilisation(),
            "makespan_s": span,
            "flows": flows,
            "collided_flows": collided,
            "collided_flow_fraction": collided / flows if flows else 0.0,
            "rate_recomputes": self.net.recomputes,
            "wall_s": time.perf_counter() - wall_start,
            **self._solver_summary(),
        }

    def _solver_summary(self) -> dict[str, float]:
        """The ``milp`` rewiring's solver work in this run, ``milp_`` + the keys of
        :func:`~sdn_app.allocation.ocs_exact.solver_counts`: MILPs ``solved`` by HiGHS, of
        them ``unproven`` (time cap hit without proof), ``reused`` answers, ``solver_s`` in
        HiGHS, the wiring MILPs and last resorts among them. Empty for other runs."""
        if not (self.config.uses_ocs and self.config.rewiring == "milp"):
            return {}
        now = solver_counts()
        return {f"milp_{key}": now[key] - self.solver_before[key] for key in now}


class _JobRounds:
    """One started job's rounds on the network, event by event: compute, the intra-leaf
    Reduce-Scatter, the rails phase by phase, the intra-leaf All-Gather, until no round is
    left. A class, not closures that call one another: those formed a reference cycle that
    kept every finished job's paths until a full garbage collection."""

    def __init__(self, sim: ClusterSimulation, record: JobRecord, plan: JobPlan,
                 rounds: list[int]) -> None:
        self.sim, self.net, self.record, self.plan, self.rounds = sim, sim.net, record, plan, rounds
        self.spec = record.spec
        self.routes = [self.net.route(rail, plan.rail_weights(j))  # every round takes them
                       for j, rail in enumerate(plan.rails)]
        self.half_intra = plan.intra_s / 2 if plan.rails else plan.intra_s
        self.pending = 0
        self.phases = plan.phase_rails
        self.phase = 0
        self.collisions = RailCollisions(plan.rails, self.routes, record.collided)

    def start_round(self) -> None:
        if not self.rounds:
            self.sim._finish(self.record)
            return
        k = self.rounds[0]
        # Compute, then the intra-leaf Reduce-Scatter (or the whole one-leaf ring), and
        # the propagation delay every step of the iteration pays.
        self.net.at(self.net.now + k * (self.spec.compute_s + self.half_intra
                                        + self.plan.latency_s), self.cross_leaf)

    def cross_leaf(self) -> None:
        if not self.plan.rails:
            self.end_round()
            return
        self.phase = 0
        self.start_phase()

    def start_phase(self) -> None:
        k = self.rounds[0]
        rails = self.phases[self.phase]
        self.pending = len(rails)
        for j in rails:
            self.net.add_bundle(self.routes[j], k * self.plan.rail_bytes[j],
                                owner=(self.spec.job_id, j), tag=j, on_done=self.rail_done)

    def rail_done(self, flow: Flow) -> None:
        self.collisions.note(flow.tag, flow.shared_idx)
        self.pending -= 1
        if self.pending == 0:
            self.phase += 1
            if self.phase < len(self.phases):
                self.start_phase()
                return
            # The intra-leaf All-Gather, then the next round.
            self.net.at(self.net.now + self.rounds[0] * self.half_intra, self.end_round)

    def end_round(self) -> None:
        self.rounds.pop(0)
        self.start_round()


def trace_hosts(free_slots: Callable[[int], list[int]], slots: dict[str, tuple[int, int]],
                used: dict[str, int], gpus_per_host: int) -> list[LeafSlot]:
    """The fabric hosts for a job that used ``used[host]`` GPUs on each trace host: the first
    free slots of each host's block (``slots[host]``: its leaf and first slot), or
    :class:`AllocationRefused` (``no_hosts``) while a block has too few free."""
    hosts: list[LeafSlot] = []
    for host, gpus in sorted(used.items()):
        leaf, first = slots[host]
        free = [s for s in free_slots(leaf) if first <= s < first + gpus_per_host]
        if len(free) < gpus:
            raise AllocationRefused("no_hosts", f"not enough free hosts: trace host {host} has "
                                    f"{len(free)} free GPUs, the job wants {gpus}")
        hosts += [(leaf, s) for s in free[:gpus]]
    return hosts


def simulate_cluster(jobs: Sequence[TraceJob], config: ClusterConfig,
                     progress: Callable[[int, int, float], None] | None = None,
                     placement: TracePlacement | None = None) -> ClusterResult:
    """Run ``jobs`` on the cluster of ``config``; per-job rows and a summary dict.
    ``placement``: where the trace's jobs ran (used with ``config.placement == "trace"``)."""
    return ClusterSimulation(jobs, config, progress, placement).run()
