"""`fabriclab run --backend sim`: run an experiment on the flow-level simulator instead of
Mininet, writing a run directory with the emulator's layout (so ``fabriclab report`` and
:mod:`analysis` read it unchanged).

Run directory: ``spec.yaml``, ``env.json`` (``"backend": "sim"``), ``topology.json`` (the
fabric plan), ``jobs.json`` (the emulator's job records; ``start``/``end`` in simulated
seconds), ``jobs/<job>/collectives-rank{r}.parquet`` and ``phases-rank{r}.parquet``
(:mod:`testbed.core.traces` schemas), ``fidelity.json`` (verdict ``simulated``) and
``summary.json`` (:func:`analysis.metrics.summarise`). There are no link or CPU samples: the
analysis treats them as absent.

Semantics
---------
Placement
    Explicit ``hosts`` as given, ``hosts_wanted`` through
    :class:`sdn_app.allocation.cluster.Cluster` with the experiment's policy (``ecmp``/``vclos``
    on leaf-spine, ``ocs-vclos`` on the OCS fabric), as the controller places them: a job's
    ranks are its hosts in allocation order (leaf, slot). A multidim job spans every host,
    rank r on host ``h<r>``.
Routing
    Leaf-spine paths are the policy's (:meth:`sdn_app.policies.base.RoutingPolicy.path`):
    ``ecmp`` hashes every
    connection's 5-tuple (source port drawn from ``random.Random(seed)``, fixed for the
    connection's life; every run of a job, solo or together, opens new connections);
    ``vclos``/``ocs-vclos`` pin host j of each leaf to the job's spine j / circuit j. A
    multidim fabric gives each host an up and a down link per dimension
    (:class:`testbed.sim.collectives.MultidimFabric`), which is what both ``switch`` and
    ``ring`` dimensions offer ring traffic, and a ``fully_connected`` dimension a link per
    ordered pair of peers at ``mbit_s / (n-1)``.
Capacities
    Every link runs at its plan rate x ``GOODPUT`` = 1448/1514: the emulator's links are
    shaped on the wire, and bulk TCP with 1448-byte payloads in 1514-byte frames carries at
    most that fraction of the rate as data (the ceiling calibration measures; see
    ``testbed.emulator.calibrate.TCP_WIRE_FACTOR``). The TCP ramp and CPU limits are not modelled.
    Latency: every flow arrives its path's one-way delay after it is sent, the sum of the
    plan's link delays (as emulated: :mod:`testbed.sim.link_delays`), so a ring or
    halving-doubling pays the delays of the hops each rank's chain of steps crosses (and a
    lock-step collective each step's slowest path's); a lossy path caps a flow at the Mathis
    et al. TCP rate (:mod:`testbed.core.link_model`); and ``step_latency_s`` is added before
    every step, or every slice a rank sends (per-message software cost; default 0,
    ``fabriclab run --backend sim
    --step-latency-us``). With no delay, loss or step latency the simulated times are the
    emulator's best case.
Collectives
    A flat collective (``ring``, ``halving-doubling``, any of the registry): its steps over
    the job's ranks (:meth:`workloads.collectives.Collective.transfers`; a ring's 2(n-1)
    steps of ``n`` flows of S/n bytes), one connection per ordered pair of ranks. Ring and
    halving-doubling run rank by rank, as their workers do (:mod:`testbed.sim.rank_steps`:
    a rank sends a step once its own inputs for it have arrived; a ring's shards travel in
    the workers' slices); an algorithm that does not say how its workers overlap steps
    (:meth:`~workloads.collectives.Collective.sim_slices`) runs in lock step, each step
    ending with its slowest flow; a chunk schedule (``baseline``, ``themis``, any of
    :data:`~testbed.core.registry.SCHEDULES`): the chunked hierarchical All-Reduce (its chunk
    plans with the job's ``chunk_count(count)`` chunks aligned to 4 bytes, as the worker plans
    them; ``fifo``/``scf`` dispatch per dimension as in :mod:`workloads.model`), each phase the
    job's ``dim_algorithm`` in every group of its dimension. On leaf-spine a hierarchical job
    uses ``dims`` (default: the worker's 2-D split) over its hosts' single NICs. Every flow of
    every running job shares links max-min (:class:`testbed.sim.flows.Network`). A job runs
    ``warmup + iterations`` collectives of each size back to back (no barrier cost), or, in a
    replay of an emulated run, each no earlier than it began there (``issued``); jobs run
    together, each from its ``start_offset_s``; with ``solo_baselines`` every job first runs
    alone as ``<name>-solo``, one after the other, each on an idle fabric, before the jobs run
    together.

All-to-all workloads
    The job's all-to-all algorithm (``pairwise``, ``all-pairs``, any of
    :data:`~testbed.core.registry.ALLTOALLS`) as its synchronous steps over the job's ranks
    (:meth:`workloads.alltoall.AllToAll.transfers`: pairwise ``n-1`` steps of ``n`` flows of
    S/n bytes; all-pairs one step of ``n(n-1)`` such flows), one connection per ordered pair,
    each step ending with its slowest flow; the local block costs nothing. Traces record one
    ``A2A`` phase per collective and ``in_place`` false, as the worker does.

DNN workloads
    The worker's iteration (:meth:`workloads.worker.Worker.run_dnn`) with the same profile
    (:mod:`workloads.dnn`): forward compute, then each bucket's backward compute, after which
    the bucket is queued for a communication thread that All-Reduces buckets one at a time in
    order (DDP's overlap); the iteration ends when both backward and the last bucket are done,
    and the next one starts at once (the emulator's untimed fill and barrier take no time).
    Compute is exact (``sleep`` and ``busy`` alike: the CPU is not modelled). The run
    directory gets ``iterations-rank{r}`` and ``buckets-rank{r}`` traces as the worker writes.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import Allocation
from sdn_app.policies import get as get_policy
from sdn_app.policies import policy_for
from sdn_app.policies.base import HOST_LINKS, via_spine
from sdn_app.program import ocs_circuits
from testbed.core.algorithms import is_alltoall
from testbed.core.errors import FabricLabError, SpecError
from testbed.core.experiment import STATIC_POLICY, Experiment
from testbed.core.formulas import ALLTOALL, TCP_GOODPUT
from testbed.core.jobs import JobRun, check_against_fabric, resolve
from testbed.core.ports import SPORTS, seeded_source_ports
from testbed.core.registry import TRANSPORTS
from testbed.core.rundir import RunRecorder, base_environment
from testbed.core.topology import FabricPlan, build_plan
from testbed.core.traces import (
    BUCKET_SCHEMA,
    COLLECTIVE_SCHEMA,
    ITERATION_SCHEMA,
    PHASE_SCHEMA,
    bandwidths,
)
from testbed.sim.collectives import HierarchicalRun, MultidimFabric, run_steps
from testbed.sim.flows import LinkId, Network
from testbed.sim.job_plans import host_path
from testbed.sim.link_delays import impairments_of
from testbed.sim.rank_steps import Connection, run_rank_steps
from workloads.dnn import DnnWorkload
from workloads.hierarchical import trace_sent_bytes
from workloads.launcher import size_results
from workloads.model import job_model_s
from workloads.themis import plan_with
from workloads.training.jobs import iteration_rows, job_workload, replay_job
from workloads.training.replay import ReplayResult

GOODPUT = TCP_GOODPUT  # data bytes per wire byte of bulk TCP


@dataclass
class _Collective:
    """One simulated collective of one job (the same for every rank)."""

    coll: int
    iteration: int
    warmup: bool
    size: int
    start: float  # run-relative seconds
    time: float
    spans: list[tuple[int, int, int, str, int, int, int, float, float]] = field(
        default_factory=list)
    # (chunk, phase index, dim, op, bytes, group, sent bytes, start, end), run-relative seconds
    kind: str | None = None  # a training workload's collective (lower case); None: the job's
    group: int | None = None  # the ranks it ran among, if not the whole job


@dataclass
class _Placed:
    """A placed job: its run (with its resolved job) and its allocation."""

    run: JobRun
    alloc: Allocation | None
    collectives: list[_Collective] = field(default_factory=list)
    iterations: list[dict] = field(default_factory=list)  # DNN: ITERATION_SCHEMA rows, no rank
    buckets: list[dict] = field(default_factory=list)  # DNN: BUCKET_SCHEMA rows, no rank
    opened: dict[int, int] = field(default_factory=dict)  # connections each rank opened


NOT_MODELLED = ("transport", "correctness")  # summary.json says so; the report shows n/a


class SimBackend:
    """The flow-level simulator behind :class:`testbed.core.backend.Backend`."""

    name = "sim"

    def __init__(self, seed: int = 1, step_latency_s: float = 0.0) -> None:
        self.seed, self.step_latency_s = seed, step_latency_s

    def check(self, experiment: Experiment) -> None:
        SimRunner(experiment, Path("/nonexistent"), self.seed,
                  step_latency_s=self.step_latency_s)  # validates and places, writes nothing
        transports = sorted({j.transport for j in experiment.jobs})
        if not all(TRANSPORTS.get(t).wire_speed for t in transports):
            print(f"warning: {experiment.name}: the sim backend does not model transports "
                  f"({', '.join(transports)}): every transport gets the same times, and "
                  "summary.json says so", file=sys.stderr)

    def run(self, experiment: Experiment, out: Path, console: Any = None) -> Path:
        return SimRunner(experiment, out, self.seed, console, self.step_latency_s).run()


class SimRunner:
    """One experiment on the simulator, with the attributes the CLI's summary table reads from
    an emulated run too (``exp``, ``jobs``, ``status``, ``run_dir``)."""

    def __init__(self, exp: Experiment, out_root: Path, seed: int = 1, console=None,
                 step_latency_s: float = 0.0,
                 paths: dict[str, dict[str, list[dict[str, Any]]]] | None = None,
                 issued: dict[str, list[float]] | None = None) -> None:
        if not 0 <= step_latency_s < 10:
            raise FabricLabError(
                f"--step-latency-us gives {step_latency_s} s; it must be in [0, 10) s")
        self.exp = exp
        self.plan: FabricPlan = build_plan(exp.fabric, exp.rate_scale)
        self.impairments = impairments_of(self.plan)  # None: every link a perfect wire
        check_against_fabric(exp, self.plan)
        for i, job in enumerate(exp.jobs):
            if job.workload.kind == "command":
                raise SpecError(f"jobs.{i}.workload: job {job.name} runs a program, which only "
                                "the emulator can do; run it without --backend sim")
        if self.plan.kind == "multidim":
            self.policy = "shortest"
        elif exp.policy == STATIC_POLICY and not (self.plan.kind == "leaf_spine"
                                                  and self.plan.loop_free()):
            raise SpecError("policy: the sim backend needs a routing policy, not static (no "
                            "controller), where hosts have several paths; name one or leave "
                            "policy out")
        elif exp.policy == STATIC_POLICY:  # one path per pair: any policy routes it so
            self.policy = policy_for(self.plan, None)
        else:
            self.policy = policy_for(self.plan, exp.policy)
        self.seed = seed
        self.latency = step_latency_s
        self.rng = random.Random(seed)
        self.out_root = Path(out_root)
        self.console = console
        self.status = "ok"
        self.error: str | None = None
        self.run_dir = self.out_root / f"{time.strftime('%Y%m%d-%H%M%S')}-{exp.name}"
        self.placed = self._place()
        self.jobs = [p.run for p in self.placed]
        self.solos: list[_Placed] = []
        # Every simulated leg ("solo <job>" or "together"): job -> the paths of its connections.
        self.routes: dict[str, dict[str, list[list[LinkId]]]] = {}
        # The spine each host pair's bytes crossed in an emulated run, per leg and job
        # (its paths.json): a connection of such a pair takes that spine, not the policy's.
        self.observed = _spine_of_pairs(paths or {})
        # When each collective of a job began in an emulated run, in the together leg's
        # seconds (the base of start_offset_s): a replay starts each one no earlier
        # (:class:`_JobDriver`), so gaps between a job's collectives are the run's.
        self.issued = issued or {}
        self._leg_now = ""

    # -- placement ------------------------------------------------------------------------------

    def _place(self) -> list[_Placed]:
        plan, out = self.plan, []
        cluster = None
        if plan.kind != "multidim":
            cluster = Cluster.for_fabric(plan.spec)
        for spec in self.exp.jobs:
            run = JobRun(spec.name, spec)
            alloc = None
            if cluster is None:
                hosts = list(spec.hosts) if spec.hosts else [h.name for h in plan.hosts]
                run.allocation = {"policy": self.policy}
            else:
                if spec.hosts:
                    slots = [(plan.node(h).leaf, plan.node(h).slot) for h in spec.hosts]
                    alloc = get_policy(self.policy).claim(cluster, spec.name, slots)
                else:
                    alloc = get_policy(self.policy).allocate(cluster, spec.name,
                                                             spec.hosts_wanted)
                hosts = [plan.host_at(leaf, slot).name for leaf, slot in alloc.hosts]
                run.allocation = {
                    "policy": alloc.policy, "spines": list(alloc.spines),
                    "ocs_ports": [{"ocs": c.ocs, "port_a": c.port_a, "port_b": c.port_b}
                                  for c in ocs_circuits(plan, alloc)]}
            run.resolved = resolve(spec, plan, hosts)
            if spec.workload.kind == "training":
                job_workload(run.resolved)  # a bad workload file: one sentence, before the run
            run.model_s = job_model_s(run.resolved, plan, self.latency)
            out.append(_Placed(run, alloc))
        return out

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> Path:
        recorder = RunRecorder(self.out_root, self.exp, self.plan, base_environment() | {
            "backend": "sim",
            "sim": {"goodput": GOODPUT, "seed": self.seed, "step_latency_s": self.latency}})
        self.run_dir = recorder.run_dir
        clock = 0.0
        if self.exp.solo_baselines:
            for p in self.placed:
                solo = _Placed(p.run.solo(), p.alloc)
                self.solos.append(solo)
                clock = self._leg(f"solo {p.run.name}", [solo], clock, offsets=False)
        self._leg("together", self.placed, clock, offsets=True)
        for p in self.placed + self.solos:
            self._write_traces(p)
            p.run.rows = [asdict(r) for r in size_results(self.run_dir / "jobs" / p.run.name)]
        from analysis.metrics import summarise

        fidelity = {"verdict": "simulated", "reasons": [], "cpu_idle_min": None,
                    "cpu_idle_mean": None, "links": [], "calibration": None,
                    "backend": "sim", "goodput": GOODPUT, "seed": self.seed,
                    "step_latency_s": self.latency}
        # What the simulator does not model is not a result: no data moves, so nothing is
        # checked, and every transport takes the same time (the summary says so).
        recorder.finish(self.jobs + [s.run for s in self.solos], fidelity, summarise,
                        backend="sim", not_modelled=list(NOT_MODELLED))
        return self.run_dir

    def _leg(self, what: str, jobs: list[_Placed], origin: float, offsets: bool) -> float:
        """Simulate ``jobs`` together on an idle fabric from ``origin``; return the end time."""
        net = Network()
        self._leg_now = what
        self.routes[what] = {}
        for p in jobs:
            kind = p.run.spec.workload.kind
            if kind == "training":  # replayed on its own dimensions, not as flows
                driver: _Driver = _TrainingDriver(net, p, _no_flows, origin, plan=self.plan,
                                                  step_latency_s=self.latency)
            else:
                launch = self._launcher(net, p, self.routes[what].setdefault(p.run.name, []))
                driver = (_DnnDriver if kind == "dnn" else _JobDriver)(net, p, launch, origin)
                if offsets and isinstance(driver, _JobDriver):
                    driver.issued = self.issued.get(p.run.name, [])
            net.at(p.run.spec.start_offset_s if offsets else 0.0, driver.begin)
        end = net.run()
        for p in jobs:
            if p.run.status != "ok":
                raise FabricLabError(f"job {p.run.name} did not finish in the simulation")
        return origin + end

    # -- routing --------------------------------------------------------------------------------

    def _capacity(self, link: LinkId) -> float:
        s = self.plan.spec
        mbit_s = s.host_link_mbit_s if link[0] in HOST_LINKS else s.uplink_mbit_s
        return float(mbit_s) * 1e6 * GOODPUT

    def _source_port(self, p: _Placed, rank: int) -> int:
        """The source port of rank ``rank``'s next connection: the job's seeded one, as its
        workers bind it, or a random one (as the kernel's ephemeral ports are)."""
        job = p.run.resolved
        k = p.opened[rank] = p.opened.get(rank, 0) + 1
        if job is None or job.source_port_seed is None:
            return self.rng.randrange(*SPORTS)
        return seeded_source_ports(job.source_port_seed, job.name, rank, k)[-1]

    def _connection(self, net: Network, p: _Placed, a: int, b: int,
                    routes: list[list[LinkId]]) -> list[LinkId]:
        """The path of a new connection from rank ``a`` to rank ``b`` (leaf-spine)."""
        hosts = [self.plan.node(h) for h in p.run.hosts]
        src, dst = (hosts[a].leaf, hosts[a].slot), (hosts[b].leaf, hosts[b].slot)
        sport = self._source_port(p, a) if get_policy(p.alloc.policy).per_flow_paths else 0
        spine = self.observed.get((self._leg_now, p.run.name, hosts[a].name, hosts[b].name))
        path = (via_spine(src, dst, spine) if spine is not None and src[0] != dst[0]
                else host_path(p.alloc, src, dst, self.plan.spec.spines, sport))
        for link in path:
            net.capacities.setdefault(link, self._capacity(link))
        if self.impairments is not None:
            self.impairments.apply(net, path)
        routes.append(path)
        return path

    def _launcher(self, net: Network, p: _Placed, routes: list[list[LinkId]]
                  ) -> Callable[..., None]:
        """``launch(size, done, variables=None)``: start one collective of ``p`` now;
        ``done(spans)`` at its end (spans as :attr:`_Collective.spans`). ``variables`` (a DNN
        bucket's (global index, bytes)) go to a flat job's collective, which may place them."""
        job = p.run.resolved
        assert job is not None, "a job is simulated once placed"
        n, owner = job.world, p.run.name
        if job.flat:
            placed_transfers = None
            rank_by_rank = None  # a collective the workers run rank by rank
            if is_alltoall(job.algorithm):
                algo = job.plugin(job.algorithm)
                transfers, op, sent = algo.transfers, "A2A", algo.sent_bytes
            else:
                collective = rank_by_rank = job.plugin(job.algorithm)
                transfers, op = partial(collective.transfers, "AR"), "AR"
                sent = partial(collective.sent_bytes, "AR")
                placed_transfers = collective.variable_transfers
            conns: dict[tuple[int, int], list[LinkId]] = {}

            def conn(a: int, b: int) -> list[LinkId]:  # one connection per pair
                if (a, b) not in conns:
                    conns[(a, b)] = self._connection(net, p, a, b, routes)
                return conns[(a, b)]

            for step in transfers(n, 1.0):
                for a, b, _ in step:
                    conn(a, b)

            def flat(size: int, done: Callable[[list], None],
                     variables: list[tuple[int, float]] | None = None) -> None:
                t0 = net.now

                def end(_t: float) -> None:
                    done([(0, 0, 0, op, size, n, round(sent(n, size)), t0, net.now)]
                         if n > 1 else [])

                # a bucket moved as a whole (every algorithm but one that places variables)
                whole = size if variables is None else sum(nbytes for _, nbytes in variables)
                slices = None if rank_by_rank is None else rank_by_rank.sim_slices(n, whole)
                if slices is None:
                    plan = (transfers(n, size) if variables is None or placed_transfers is None
                            else placed_transfers(n, variables))
                    steps = [[(conn(a, b), nbytes) for a, b, nbytes in step] for step in plan]
                    run_steps(net, steps, end, owner=owner, latency=self.latency)
                    return
                pairs: dict[tuple[int, int], Connection] = {}

                def connection(a: int, b: int) -> Connection:
                    if (a, b) not in pairs:
                        pairs[(a, b)] = Connection(net, conn(a, b), owner)
                    return pairs[(a, b)]

                phases = [rank_by_rank.transfers("RS", n, whole),
                          rank_by_rank.transfers("AG", n, whole / n)]
                run_rank_steps(net, phases, connection, slices, end, latency_s=self.latency)

            return flat
        collective = job.plugin(job.uniform_dim_algorithm())
        rates_bps = [r * GOODPUT for r in job.dim_host_rates_bps]
        if self.plan.kind == "multidim":
            fabric = MultidimFabric(job.dims, rates_bps, job.dim_kinds)
            for link, cap in fabric.capacities().items():
                net.capacities.setdefault(link, cap)
            if self.impairments is not None:
                self.impairments.apply(net, list(fabric.capacities()))
        else:
            cache: dict[tuple[int, int, int], list[LinkId]] = {}

            def route(dim: int, a: int, b: int) -> list[LinkId]:
                if (dim, a, b) not in cache:
                    cache[(dim, a, b)] = self._connection(net, p, a, b, routes)
                return cache[(dim, a, b)]

            fabric = _MappedFabric(job.dims, rates_bps, route)
        plans_of: dict[int, list] = {}
        chunk_schedule = job.plugin(job.algorithm)

        def hierarchical(size: int, done: Callable[[list], None],
                         variables: list[tuple[int, float]] | None = None) -> None:
            count = size // 4  # variables: only a flat job's collective places them
            if size not in plans_of:  # the worker plans with the job's planning rates
                plans_of[size] = plan_with(chunk_schedule, job.dims, job.dim_rates_bps,
                                           size, job.chunk_count(count), align=4,
                                           semantics=job.semantics)

            def end(runs: list) -> None:  # AG phases record their larger (gathered) side
                spans = []
                for ph, began, ended in runs:
                    group = job.dims[ph.dim]
                    nbytes = round(float(ph.size) * (group if ph.op == "AG" else 1))
                    spans.append((ph.chunk, ph.index, ph.dim, ph.op, nbytes, group,
                                  trace_sent_bytes(collective, ph.op, group, nbytes), began, ended))
                done(spans)

            HierarchicalRun(net, fabric, plans_of[size], job.order, collective, end, owner,
                            self.latency, semantics=job.semantics).start()

        return hierarchical

    # -- output ---------------------------------------------------------------------------------

    def _write_traces(self, p: _Placed) -> None:
        out = self.run_dir / "jobs" / p.run.name
        out.mkdir(parents=True, exist_ok=True)
        job = p.run.resolved
        assert job is not None, "a job is simulated once placed"
        world, job_kind = job.world, job.collective_kind
        # a training replay runs one NPU for all (they move in lock step): rank 0 stands for all
        ranks = 1 if job.workload.kind == "training" else world
        for rank in range(ranks):
            colls, phases = [], []
            for c in p.collectives:
                common = {"run_id": self.run_dir.name, "job_id": p.run.name, "rank": rank,
                          "coll": c.coll, "iteration": c.iteration, "warmup": c.warmup}
                coll_kind, group = c.kind or job_kind, c.group or world
                algbw, busbw = bandwidths(c.size, c.time, group, coll_kind)
                colls.append({**common, "size": c.size, "count": c.size // 4, "world": group,
                              "collective": coll_kind, "algorithm": job.algorithm,
                              "transport": job.transport,
                              "chunks": job.chunk_count(c.size // 4), "start": c.start,
                              "time": c.time, "algbw": algbw, "busbw": busbw, "correct": True,
                              # an all-to-all is out of place
                              "in_place": coll_kind != ALLTOALL})
                for chunk, index, dim, op, nbytes, group, sent, start, end in c.spans:
                    phases.append({**common, "chunk": chunk, "phase": index, "dim": dim,
                                   "op": op, "bytes": nbytes, "start": start, "end": end,
                                   "group": group, "sent_bytes": sent})
            pq.write_table(pa.Table.from_pylist(colls, schema=COLLECTIVE_SCHEMA),
                           out / f"collectives-rank{rank}.parquet")
            pq.write_table(pa.Table.from_pylist(phases, schema=PHASE_SCHEMA),
                           out / f"phases-rank{rank}.parquet")
            for kind, rows, schema in (("iterations", p.iterations, ITERATION_SCHEMA),
                                       ("buckets", p.buckets, BUCKET_SCHEMA)):
                if rows:
                    table = [{**row, "run_id": self.run_dir.name, "job_id": p.run.name,
                              "rank": rank} for row in rows]
                    pq.write_table(pa.Table.from_pylist(table, schema=schema),
                                   out / f"{kind}-rank{rank}.parquet")

def _spine_of_pairs(paths: dict[str, dict[str, list[dict[str, Any]]]]
                    ) -> dict[tuple[str, str, str, str], int]:
    """(leg, job, source host, destination host) → the spine that carried most of the pair's
    bytes, from an emulated run's ``paths.json`` legs."""
    best: dict[tuple[str, str, str, str], tuple[int, int]] = {}
    for leg, jobs in paths.items():
        for job, pairs in jobs.items():
            for p in pairs:
                key = (leg, job, p["src"], p["dst"])
                if key not in best or p["bytes"] > best[key][0]:
                    best[key] = (p["bytes"], p["spine"])
    return {k: spine for k, (_, spine) in best.items()}


def simulate_experiment(exp: Experiment, out_root: Path, seed: int = 1,
                        step_latency_s: float = 0.0) -> Path:
    """Simulate one experiment (one variant) and return its run directory under ``out_root``."""
    return SimRunner(exp, out_root, seed=seed, step_latency_s=step_latency_s).run()




# -- drivers ------------------------------------------------------------------------------------


class _MappedFabric(MultidimFabric):
    """Logical dimensions over leaf-spine hosts: ranks ``0..N-1`` on the ``dim_sizes`` grid,
    every ring hop routed by ``route(dim, src rank, dst rank)`` over the shared fabric."""

    def __init__(self, dim_sizes: Sequence[int], dim_bandwidths_bps: Sequence[float],
                 route: Callable[[int, int, int], list[LinkId]]) -> None:
        super().__init__(dim_sizes, dim_bandwidths_bps)
        self._route = route

    def path(self, dim: int, src: int, dst: int) -> list[LinkId]:
        return self._route(dim, src, dst)


class _Driver:
    """Runs one job on ``net``: ``begin()`` marks it running and calls ``_next()`` until the
    job calls ``_ended()``. ``launch(size, done)`` starts one collective of the job."""

    def __init__(self, net: Network, placed: _Placed,
                 launch: Callable[..., None], origin: float) -> None:
        self.net, self.placed, self.launch, self.origin = net, placed, launch, origin

    def begin(self) -> None:
        run = self.placed.run
        run.status, run.start = "running", self.origin + self.net.now
        self._next()

    def _next(self) -> None:
        raise NotImplementedError

    def _ended(self) -> None:
        run = self.placed.run
        run.status, run.end = "ok", self.origin + self.net.now


class _JobDriver(_Driver):
    """Runs a job's collectives back to back, recording each one; a collective with an issue
    time (``issued``, a replay of an emulated run) starts no earlier than it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        w = self.placed.run.spec.workload
        self.work = [(size, it - w.warmup) for size in w.sizes
                     for it in range(w.warmup + w.iterations)]
        self.next = 0
        self.issued: list[float] = []

    def _next(self) -> None:
        if self.next == len(self.work):
            self._ended()
            return
        if self.next < len(self.issued) and self.issued[self.next] > self.net.now:
            self.net.at(self.issued[self.next], self._next)
            return
        size, iteration = self.work[self.next]
        t0 = self.net.now

        def done(spans: list) -> None:
            o = self.origin
            self.placed.collectives.append(_Collective(
                self.next, iteration, iteration < 0, size, o + t0, self.net.now - t0,
                [(*head, o + s, o + e) for *head, s, e in spans]))
            self.next += 1
            self.net.defer(self._next)  # no recursion when a collective takes no time

        self.launch(size, done)


def _no_flows(size: int, done: Callable[[list], None]) -> None:
    raise AssertionError("a training job's collectives are replayed, not launched as flows")


class _TrainingDriver(_Driver):
    """Runs a training job's passes: the replay of its workload on its own logical dimensions
    (see "Training workloads" above), its rows placed at the time the job starts."""

    def __init__(self, *args: Any, plan: FabricPlan, step_latency_s: float) -> None:
        super().__init__(*args)
        self.plan, self.step_latency_s = plan, step_latency_s

    def _next(self) -> None:
        run = self.placed.run
        job = run.resolved
        assert job is not None, "a job is simulated once placed"
        workload = job_workload(job)
        result = replay_job(job, GOODPUT, self.step_latency_s, workload)
        t0 = self.origin + self.net.now
        self.placed.iterations.extend(iteration_rows(result, job, workload, t0))
        for i, r in enumerate(result.collectives):
            if r.finished_ns is None:
                continue
            sizes = [d.size for d in result.dims] if isinstance(result, ReplayResult) \
                else job.dims  # a Chakra trace's dimensions are the job's own
            group = math.prod(sizes[d] for d in r.dims)
            ends = result.pass_end_ns if isinstance(result, ReplayResult) else []
            pass_of = sum(1 for e in ends if e <= r.issued_ns)
            self.placed.collectives.append(_Collective(
                i, pass_of - job.workload.warmup, pass_of < job.workload.warmup,
                r.size_bytes, t0 + float(r.issued_ns) * 1e-9,
                float(r.finished_ns - r.issued_ns) * 1e-9, kind=r.kind.lower(), group=group))
        self.net.at(self.net.now + float(result.finish_ns) * 1e-9, self._ended)


class _DnnDriver(_Driver):
    """Runs a DNN job's training iterations (see "DNN workloads" above)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        w = self.placed.run.spec.workload
        self.profile = DnnWorkload.model_validate(w.model_dump()).profile()
        # per bucket, its variables' (global index, bytes): the same every iteration
        self.variables = [[(v, (hi - lo) * 4.0) for v, lo, hi in b.variable_bounds(b.bytes // 4)]
                          for b in self.profile.buckets]
        self.warmup, self.total = w.warmup, w.warmup + w.iterations
        self.it = 0
        self.coll = 0

    def _next(self) -> None:
        if self.it == self.total:
            self._ended()
            return
        prof, t0 = self.profile, self.net.now
        ready, clock = [], t0 + prof.forward_s
        for bucket in prof.buckets:
            clock += bucket.backward_s
            ready.append(clock)
        state = {"queue": [], "busy": False, "done": 0, "comm": 0.0}
        iteration, warm = self.it - self.warmup, self.it < self.warmup

        def queued(i: int) -> None:
            state["queue"].append(i)
            serve()

        def serve() -> None:
            if state["busy"] or not state["queue"]:
                return
            i = state["queue"].pop(0)
            state["busy"] = True
            began, coll = self.net.now, self.coll
            self.coll += 1
            size = prof.buckets[i].bytes

            def done(spans: list) -> None:
                o, now = self.origin, self.net.now
                self.placed.collectives.append(_Collective(
                    coll, iteration, warm, size, o + began, now - began,
                    [(*head, o + s, o + e) for *head, s, e in spans]))
                self.placed.buckets.append({
                    "iteration": iteration, "warmup": warm, "bucket": i, "coll": coll,
                    "bytes": size, "backward": prof.buckets[i].backward_s,
                    "ready": o + ready[i], "start": o + began, "end": o + now, "correct": True})
                state["busy"], state["done"] = False, state["done"] + 1
                state["comm"] += now - began
                if state["done"] == len(prof.buckets):
                    self.net.at(max(now, ready[-1]), finish)
                else:
                    self.net.defer(serve)

            self.launch(size, done, self.variables[i])

        def finish() -> None:
            o, end = self.origin, self.net.now
            seconds = end - t0
            self.placed.iterations.append({
                "iteration": iteration, "warmup": warm, "model": prof.name,
                "algorithm": self.placed.run.spec.algorithm,
                "transport": self.placed.run.spec.transport, "world": len(self.placed.run.hosts),
                "buckets": len(prof.buckets), "bytes": prof.total_bytes, "start": o + t0,
                "end": o + end, "time": seconds, "compute": prof.compute_s,
                "nominal_compute": prof.compute_s, "backward_end": o + ready[-1],
                "comm": state["comm"], "exposed_comm": max(0.0, seconds - prof.compute_s),
                "compute_share": prof.compute_s / seconds if seconds > 0 else 0.0,
                "correct": True})
            self.it += 1
            self.net.defer(self._next)

        for i, t in enumerate(ready):
            self.net.at(t, lambda i=i: queued(i))
