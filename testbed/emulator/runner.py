"""Run one experiment end to end: fabric and controller up, jobs placed through the controller,
workers started in their hosts, every link and the CPU sampled, everything collected into one
run directory, everything torn down — also on Ctrl-C or a failing worker, which mark the run
incomplete or failed and keep what was captured. The run directory's layout is described in
:mod:`testbed.core.rundir`.
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from analysis.invariant import judge_run
from sdn_app.policies import controller_policy
from testbed.core.atomic import write_json
from testbed.core.errors import FabricLabError
from testbed.core.experiment import Experiment
from testbed.core.jobs import JobRun, ResolvedJob, check_against_fabric, resolve
from testbed.core.load_limit import load_warning, offered_load_link_mbit_s
from testbed.core.placement import place
from testbed.core.rundir import RunRecorder, base_environment
from testbed.core.samples import SCHED_SAMPLE_SCHEMA
from testbed.core.servers import ServersSpec, server_rundirs
from testbed.core.topology import build_plan
from testbed.core.traces import collective_windows
from testbed.emulator import (
    drop_counters,
    fair_queue,
    impairments,
    path_reader,
    runlock,
    step_latency,
    switch_kinds,
    tcp_counters,
)
from testbed.emulator.calibrate import calibrate
from testbed.emulator.commands import run_command_on_fabric
from testbed.emulator.fabric import Fabric
from testbed.emulator.failpoints import failpoint
from testbed.emulator.prediction import predict, probe_s
from testbed.emulator.preflight import (
    datapath,
    forwarding_problem,
    tcp_congestion,
    timing_problem,
    virtualization,
)
from testbed.emulator.sampler import LinkSampler, cpu_mean, write_parquet
from testbed.emulator.schedstat import SchedSampler, switch_sched
from testbed.emulator.workers import check_training, run_job
from workloads.model import job_model_s


def environment() -> dict[str, Any]:
    """env.json of an emulated run: the shared fields plus the controller, the datapath, how
    the switch's forwarding thread is scheduled and the hosts' TCP congestion control."""
    from sdn_app.compat import FRAMEWORK

    return base_environment() | {"controller": FRAMEWORK, "datapath": datapath(),
                                 "switch_sched": switch_sched(),
                                 "tcp_congestion": tcp_congestion(),
                                 "virtualization": virtualization()}


class Runner:
    def __init__(self, exp: Experiment, out_root: Path, console: Console | None = None,
                 servers: ServersSpec | None = None) -> None:
        self.exp = exp
        self.plan = build_plan(exp.fabric, exp.rate_scale)
        # the stand-in servers the fabric is spread over (issue #43), placed (or refused) now
        self.servers = servers
        self.placement = None if servers is None else place(self.plan, servers)
        check_against_fabric(exp, self.plan)
        check_training(exp, self.plan)
        self.policy = controller_policy(self.plan, exp.policy)  # None: no controller
        self.switches = switch_kinds.resolve(exp.switches, self.plan, self.policy)
        self.out_root = Path(out_root)
        # Where the run will go; the run directory itself is made (unique) when it starts.
        self.run_dir = self.out_root / f"{time.strftime('%Y%m%d-%H%M%S')}-{exp.name}"
        self.console = console or Console()
        self.jobs = [JobRun(j.name, j) for j in exp.jobs]
        self.host_runtimes = exp.host_runtimes([h.name for h in self.plan.hosts])
        self.recorder: RunRecorder | None = None
        self.leftovers: list[str] = []
        self.controller_restarts = 0
        self._threads: list[threading.Thread] = []
        # the spines' path counters after the last leg, and each leg's paths (paths.json)
        self._counted: dict[tuple[int, str, str], int] | None = None
        self.paths: dict[str, Any] = {"source": None, "legs": {}}
        self.prediction_s = 0.0
        self.counters_read_s = 0.0  # reading the path and drop counters, every leg
        self.drops: dict[str, Any] = {"legs": {}}  # drops.json: each leg's losses
        # impairments.json: each impaired link's mechanism and counters, the delay probes
        self.impairment: dict[str, Any] = {"links": []}
        self.probes: list[dict[str, Any]] = []
        # the workers' latency per step, when the experiment measures it (fidelity.json)
        self.step_latency: dict[str, Any] | None = None
        # run.json's "servers": where each node ran, each server's clock offset
        self.server_facts: dict[str, Any] = {} if self.placement is None else {
            "servers": self.servers.to_json() if self.servers else None,
            "placement": self.placement.to_json(),
            "host_server": {h.name: self.placement.server_of[h.name] for h in self.plan.hosts},
            "clock_offsets": {}}

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> Path:
        with runlock.exclusive_run(f"fabriclab run {self.exp.name}"):
            return self._run()

    @property
    def status(self) -> str:
        return self.recorder.status if self.recorder else "ok"

    @property
    def error(self) -> str | None:
        return self.recorder.error if self.recorder else None

    def _run(self) -> Path:
        self.recorder = recorder = RunRecorder(self.out_root, self.exp, self.plan,
                                               environment())
        self.run_dir = recorder.run_dir
        calibration = None
        sampler: LinkSampler | None = None
        self.sched = SchedSampler(switch=self.switches != "kernel", server_rundirs=(
            None if self.servers is None else
            server_rundirs(self.servers)))
        fab: Fabric | None = None
        solos: list[JobRun] = []
        try:
            if self.exp.calibrate:
                self.console.print(f"[bold]{self.exp.name}[/]: calibrating the fabric")
                calibration = calibrate(self.plan, self.run_dir / "calibration", seconds=3.0,
                                        switches=self.switches)
                if warning := load_warning(self.exp.name,
                                           offered_load_link_mbit_s(self.exp, self.plan),
                                           calibration.faithful_load_link_mbit_s):
                    self.console.print(f"[yellow]warning:[/] {warning}", highlight=False)
            policy = self.policy
            self.console.print(f"[bold]{self.exp.name}[/]: bringing up {self.plan.kind} "
                               f"({len(self.plan.hosts)} hosts) with policy {policy or 'static'}"
                               + (" on kernel bridges" if self.switches == "kernel" else ""))
            if self.switches != "kernel" and (problem := forwarding_problem()):
                self.console.print(f"[yellow]warning:[/] {problem}", highlight=False)
            fab = Fabric(self.plan, self.run_dir, policy=policy, ocs_delay=self.exp.ocs_delay_s,
                         switches=self.switches, hosts=self.host_runtimes,
                         servers=self.servers)
            with fab:
                self._clocks("start")
                self._place(fab)
                if self.plan.spec.link_queue == "fair":
                    self._fair_salt(fab)
                if any(lk.impaired for lk in self.plan.links):
                    self.console.print(f"[bold]{self.exp.name}[/]: pinging host pairs to "
                                       "check the links' delays and loss")
                    self.probes = impairments.probe_paths(self.plan, fab.popen)
                sampler = LinkSampler(self.plan, fab.namespace_pids(), hz=self.exp.sample_hz,
                                      record=fab.state.add_process if fab.state else None)
                sampler.start()
                self.sched.start()
                try:
                    # with the samplers already reading, as they will while the jobs run:
                    # their CPU is part of what a step costs on a small machine
                    if self.exp.measure_step_latency:
                        self.step_latency = self._measure_step_latency(fab)
                    if self.exp.solo_baselines:
                        for job in self.jobs:
                            solo = job.solo()
                            solos.append(solo)
                            self._leg(fab, [solo], f"solo run of {job.name}",
                                      f"solo {job.name}")
                    self._leg(fab, self.jobs, "all jobs together", "together")
                finally:
                    self.sched.stop()
                    sampler.stop()  # before the teardown: its readers are in the hosts'
                    # namespaces, and a namespace someone is in outlives its pin
                    self.impairment = fab.impairment_record()
                    self._clocks("end")
        except KeyboardInterrupt:
            recorder.fail("incomplete", "interrupted")
            self.console.print("[yellow]interrupted: tearing down, keeping what was captured")
        except FabricLabError as exc:
            recorder.fail("failed", str(exc))
        finally:
            if fab is not None:
                self.leftovers, self.controller_restarts = fab.leftovers, len(fab.restarts)
            for t in self._threads:  # workers were ended by the teardown: let jobs record it
                t.join(timeout=30)
            if self.status == "incomplete":
                for j in self.jobs + solos:
                    if j.status != "ok":
                        j.status, j.error = "incomplete", "interrupted"
            if sampler is not None:
                sampler.stop()
                sampler.save(self.run_dir)
                self.sched.stop()
                write_parquet(self.sched.samples(), self.run_dir / "sched_samples.parquet",
                              SCHED_SAMPLE_SCHEMA)
            self._write_results(solos, calibration)
            if self.leftovers:
                self.console.print(f"[red]teardown left {', '.join(self.leftovers)}: run "
                                   "`fabriclab clean` (once Open vSwitch runs)")
        return self.run_dir

    def _clocks(self, when: str) -> None:
        """Each server's clock offset at the run's ``when`` (start or end), as measured
        (:mod:`testbed.emulator.server_clocks`)."""
        if self.servers is None:
            return
        from testbed.emulator import server_clocks

        offsets = server_clocks.measure(self.servers)
        self.server_facts["clock_offsets"][when] = offsets
        worst = max((abs(o["offset_s"]) for o in offsets.values() if "offset_s" in o),
                    default=None)
        if worst is not None:
            self.console.print(f"  server clocks at the {when}: largest offset "
                               f"{worst * 1e3:.2f} ms")

    def _place(self, fab: Fabric) -> None:
        """Allocate every job through the controller (or take its listed hosts)."""
        taken: set[str] = set()
        for job in self.jobs:
            s = job.spec
            if fab.controller is not None:
                job.allocation = fab.controller.create_job(
                    job.name, hosts=s.hosts, hosts_wanted=s.hosts_wanted)
                hosts = job.allocation["host_names"]
                failpoint("placement")
            else:
                free = [h.name for h in self.plan.hosts if h.name not in taken]
                hosts = list(s.hosts) if s.hosts else free[: s.hosts_wanted]
                if len(hosts) < (s.hosts_wanted or 0):
                    raise FabricLabError(f"job {job.name}: not enough free hosts")
                # kernel bridges stand in for the policy's rules: the job still ran under it
                job.allocation = {"policy": self.policy}
            job.resolved = resolve(s, self.plan, hosts)
            job.model_s = job_model_s(job.resolved, self.plan)
            taken.update(hosts)
            self.console.print(f"  job {job.name}: {', '.join(job.hosts)}"
                               + (f" (via spine {', '.join(map(str, job.allocation['spines']))})"
                                  if job.allocation.get("spines") else ""))

    def _fair_salt(self, fab: Fabric) -> None:
        """The fair queues' hash salted so that no two flows the run knows, which may cross
        one link at once, share a bucket (:func:`fair_queue.run_salt`); recorded as
        ``fair_queue.json``, and what it could not part said."""
        salt, record = fair_queue.run_salt(self.plan, [j.resolved for j in self.jobs])
        fab.set_fair_salt(salt)
        write_json(self.run_dir / fair_queue.FAIR_QUEUE_FILE, record)
        if record["shared"]:
            self.console.print(f"[yellow]warning:[/] {len(record['shared'])} pair(s) of flows "
                               "may meet in one fair-queue bucket (no salt of "
                               f"{fair_queue.SALT_TRIES} parts them): {fair_queue.FAIR_QUEUE_FILE}",
                               highlight=False)
        if record["unknown_jobs"]:
            self.console.print("  fair queues: the flows of jobs "
                               f"{', '.join(record['unknown_jobs'])} are not known before they "
                               f"run; two of them share a bucket by chance (1 in "
                               f"{fair_queue.BUCKETS} per pair on a link)", highlight=False)

    def _measure_step_latency(self, fab: Fabric) -> dict[str, Any] | None:
        """Each All-Reduce job's latency per step, from a tiny All-Reduce on its hosts
        before the jobs (:mod:`testbed.emulator.step_latency`); the jobs' model adds the
        median over jobs from then on, and so does the prediction."""
        self.console.print(f"[bold]{self.exp.name}[/]: measuring the workers' latency per "
                           "step (a tiny All-Reduce on each job's hosts)")

        def run(probe: ResolvedJob) -> float:
            res = run_job(fab, probe, out_dir=self.run_dir / "step-latency" / probe.name,
                          wall_timeout=self.exp.timeout_s, run_id=self.run_dir.name)
            return max(r.time_us for r in res.rows) / 1e6

        def simulate(job: JobRun, probe: ResolvedJob, latency_s: float) -> float:
            out = self.run_dir / "step-latency" / f"{probe.name}-sim" / f"{latency_s * 1e6:.0f}us"
            return probe_s(self.exp, job, probe, latency_s, out)

        found = step_latency.measure(self.plan, self.jobs, run, simulate)
        if found is None:
            self.console.print("  no All-Reduce job the model or the simulator covers: "
                               "nothing to measure")
            return None
        for job in self.jobs:
            if job.resolved is not None:
                job.model_s = job_model_s(job.resolved, self.plan, found["step_latency_s"])
        self.console.print(f"  {found['step_latency_s'] * 1e3:.2f} ms per step, added to the "
                           "model and the prediction")
        return found

    def _leg(self, fab: Fabric, jobs: list[JobRun], what: str, key: str) -> None:
        """Run one leg (a solo baseline or all jobs together) and record, from the spines'
        path counters, which spine each pair of every job's hosts crossed in it (``key``:
        the leg's name in ``paths.json``, as the simulator names its legs), and what the
        switch ports, the datapath and the hosts' TCP counted as lost (``drops.json``)."""
        t0 = time.monotonic()
        if fab.controller is not None and self._counted is None:
            self._counted = path_reader.read(self.plan, fab.ovs_rundir_of)
        pids, ports = fab.host_pids(), fab.switch_ports()
        hosts = [h.name for h in self.plan.hosts]
        rundirs = fab.ovs_rundir_list()
        before = drop_counters.reading(ports, pids, hosts, rundirs)
        members = {j.name: list(j.hosts) for j in jobs}
        self.counters_read_s += time.monotonic() - t0
        try:
            self._run_jobs(fab, jobs, what)
        finally:
            t0 = time.monotonic()
            self.drops["legs"][key] = drop_counters.leg_drops(
                before, drop_counters.reading(ports, pids, hosts, rundirs)) | {"jobs": members}
            if fab.controller is not None and self._counted is not None:
                after = path_reader.read(self.plan, fab.ovs_rundir_of)
                legs = path_reader.leg_paths(self._counted, after, members)
                if legs is not None:
                    self.paths["source"] = "spine counters"
                    self.paths["legs"][key] = legs
                self._counted = after
            self.counters_read_s += time.monotonic() - t0

    def _run_jobs(self, fab: Fabric, jobs: list[JobRun], what: str) -> None:
        threads = [threading.Thread(target=self._run_job, args=(fab, j), daemon=True)
                   for j in jobs]
        self._threads += threads
        t0 = last_check = time.monotonic()
        midway = False
        with Live(self._progress(jobs, what, t0, {}), console=self.console,
                  refresh_per_second=2, transient=True) as live:
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                done = {j.name: self._done(j) for j in jobs}
                live.update(self._progress(jobs, what, t0, done))
                if time.monotonic() - last_check >= 1.0:  # OVS alive, controller restarted
                    last_check = time.monotonic()
                    if problem := fab.health():
                        raise FabricLabError(problem)
                if not midway and all(done.values()):
                    midway = True
                    failpoint("collective")
                time.sleep(0.5)
            # once more at the end: a controller that died in the last second is restarted and
            # counted too, and a job broken then is reported
            if problem := fab.health():
                raise FabricLabError(problem)
        for j in jobs:
            self.console.print(f"  {j.name}: {j.status}"
                               + (f" ({j.end - j.start:.1f} s)" if j.end and j.start else "")
                               + (f": {j.error}" if j.error else ""))
        failed = [j for j in jobs if j.status != "ok"]
        if failed:
            raise FabricLabError(f"job {failed[0].name} failed: {failed[0].error}")

    def _run_job(self, fab: Fabric, job: JobRun) -> None:
        s = job.spec
        time.sleep(s.start_offset_s if job.solo_of is None else 0.0)
        job.status, job.start = "running", time.monotonic()
        try:
            w = s.workload
            if w.kind == "command":
                job.command = run_command_on_fabric(
                    fab, job.hosts, w.argv, job_dir=self.run_dir / "jobs" / job.name,
                    env=w.env, master_port=w.master_port, wall_timeout=self.exp.timeout_s,
                    run_id=self.run_dir.name, job_id=job.name).as_dict()
                job.status = "ok"
                return
            assert job.resolved is not None, "a job runs once placed"
            pids = fab.host_pids()
            before = tcp_counters.timeouts(pids, job.hosts)
            res = run_job(fab, job.resolved, out_dir=self.run_dir / "jobs" / job.name,
                          wall_timeout=self.exp.timeout_s, run_id=self.run_dir.name,
                          on_spawn=lambda rank, pid: self.sched.watch(
                              pid, job.name, f"{job.hosts[rank]} rank{rank}"))
            after = tcp_counters.timeouts(pids, job.hosts)
            job.tcp_timeouts = None if None in (before, after) else after - before
            job.rows = res.as_dicts()
            job.status = "ok"
        except FabricLabError as exc:
            job.status, job.error = "failed", str(exc)
        except Exception as exc:  # a bug must still end the job cleanly
            job.status, job.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            job.end = time.monotonic()

    def _progress(self, jobs: list[JobRun], what: str, t0: float,
                  done: dict[str, int]) -> Table:
        table = Table(title=f"{self.exp.name}: {what} — {time.monotonic() - t0:.0f} s")
        for col in ("job", "hosts", "status", "collectives done"):
            table.add_column(col)
        for j in jobs:
            table.add_row(j.name, str(len(j.hosts)), j.status, str(done.get(j.name, 0)))
        return table

    def _done(self, job: JobRun) -> int:
        """Collectives rank 0 has finished (from its periodic partial trace), or iterations
        rank 0 of a command job has reported on its stdout."""
        d = self.run_dir / "jobs" / job.name
        if job.spec.workload.kind == "command":
            from workloads.iteration_log import parse

            try:
                return len(parse((d / "stdout-rank0.log").read_text(errors="replace")))
            except OSError:
                return 0
        for f in (d / "collectives-rank0.parquet", d / "collectives-rank0.partial.parquet"):
            try:
                import pyarrow.parquet as pq

                return pq.read_metadata(f).num_rows
            except (OSError, ValueError):
                continue
        return 0

    # -- results -------------------------------------------------------------------------------

    def _write_results(self, solos: list[JobRun], calibration) -> None:
        assert self.recorder is not None
        write_json(self.run_dir / "paths.json", self.paths)
        write_json(self.run_dir / "drops.json", self.drops)
        write_json(self.run_dir / "impairments.json",
                   self.impairment | {"probes": self.probes})
        self.recorder.finish(self.jobs + solos, self._fidelity(calibration, solos),
                             self._summary,
                             backend="emulator", controller_restarts=self.controller_restarts,
                             leftovers=self.leftovers,
                             **({"servers": self.server_facts} if self.server_facts else {}))

    def _fidelity(self, calibration, solos: list[JobRun]) -> dict[str, Any]:
        """fidelity.json: every registered invariant's judgement, reasons and notes
        (:func:`analysis.invariant.judge_run`), with CPU headroom during the measured
        collectives as a diagnosis beside them, the calibration and the run's status."""
        import pandas as pd

        def table(name: str):
            path = self.run_dir / name
            return pd.read_parquet(path) if path.exists() else None

        df, queues, cpu, sched = (table(f"{n}_samples.parquet")
                                  for n in ("link", "qdisc", "cpu", "sched"))
        idle_min = idle_mean = steal_max = None
        per_job = collective_windows(self.run_dir)
        windows = [w for ws in per_job.values() for w in ws]
        if cpu is not None and len(cpu):
            # the CPU while measured collectives ran (not while workers started or wrote their
            # traces), over one second of such samples at a time
            period = 1.0 / self.exp.sample_hz
            during = measuring(cpu["time"], windows, period)
            if not during.any():
                during[:] = True
            per_second = max(1, round(self.exp.sample_hz))
            idle = cpu["idle"][during]
            idle_min = float(idle.rolling(per_second, min_periods=1).mean().min())
            idle_mean = float(idle.mean())
            if "steal" in cpu:
                steal_max = float(cpu["steal"][during].rolling(per_second, min_periods=1)
                                  .mean().max())
        self._predict(solos)  # prediction.json, which the job invariant reads
        # every registered invariant (analysis.invariant.judge_run); jobs.json is written after
        verdict = judge_run(
            self.run_dir,
            {"cpu_idle_min": idle_min, "busiest": self._busiest(windows),
             "busiest_then": lambda a, b: ((self._busiest([(a, b)]) or _idle_then(cpu, a, b))
                                           + _stolen_then(cpu, a, b)),
             "plan": self.plan, "switches": self.switches},
            {"link_samples.parquet": df, "qdisc_samples.parquet": queues,
             "sched_samples.parquet": sched, "windows": per_job,
             "jobs.json": [j.record() for j in self.jobs + solos]})
        record: dict[str, Any] = {"reasons": verdict.reasons, "notes": verdict.notes,
                                  **verdict.fields}
        record.update(sched_cost=self.sched.cost(), step_latency=self.step_latency,
                      paths={"source": self.paths.get("source"),
                             "prediction_s": round(self.prediction_s, 3),
                             "counters_read_s": round(self.counters_read_s, 3)})
        cal = None
        if calibration is not None:
            cal = {"verdict": calibration.verdict, "aggregate_ratio": calibration.aggregate_ratio,
                   "failures": calibration.failures}
            record["reasons"] += [f"calibration: {f}" for f in calibration.failures]
        if self.status != "ok":
            record["reasons"].append(f"run {self.status}: {self.error}")
        virt = virtualization()
        if problem := timing_problem(virt):
            record["reasons"].append(problem)
        record.update(verdict="faithful" if not record["reasons"] else "not faithful",
                      cpu_idle_min=idle_min, cpu_idle_mean=idle_mean,
                      cpu_steal_max=steal_max, calibration=cal,
                      switches=self.switches,
                      datapath=datapath() if self.switches == "ovs" else None,
                      virtualization=virt,
                      containers={h: rt.model_dump(exclude_none=True)
                                  for h, rt in self.host_runtimes.items() if rt.is_container})
        return record

    def _predict(self, solos: list[JobRun]) -> None:
        """The simulator's times for every job on the paths its flows took, recorded as
        ``prediction.json`` (:func:`testbed.emulator.prediction.predict`); nothing when no job
        finished."""
        if not any(j.status == "ok" for j in self.jobs + solos):
            return
        t0 = time.monotonic()
        predict(self.exp, self.jobs + solos, self.paths, self.run_dir,
                (self.step_latency or {}).get("step_latency_s", 0.0))
        self.prediction_s = time.monotonic() - t0

    def _busiest(self, windows: list[tuple[float, float]]) -> str:
        """'; busiest then: ...' from the starved seconds the sampler recorded during
        measured collectives, if any."""
        path = self.run_dir / "cpu_starved.json"
        if not path.exists():
            return ""
        seconds = json.loads(path.read_text())
        overlap = measuring([s["time"] for s in seconds], windows, 1.0)
        totals: dict[str, float] = {}
        for second in (s for s, hit in zip(seconds, overlap, strict=True) if hit):
            for p in second["busiest"]:
                name = p["process"].split(" -m ")[1].split()[0] if " -m " in p["process"] \
                    else p["process"].split()[0].rsplit("/", 1)[-1]
                totals[name] = totals.get(name, 0.0) + p["cpu"]
        if not totals:
            return ""
        top = sorted(totals.items(), key=lambda kv: -kv[1])[:3]
        return "; busiest then: " + ", ".join(f"{n} ({c:.1f} CPU-s)" for n, c in top)

    def _summary(self, run_dir: Path) -> dict[str, Any]:
        """:func:`analysis.metrics.summarise` of the run; if that fails, the basics from the
        job records (never lose a run to a metrics bug)."""
        try:
            from analysis.metrics import summarise
        except ImportError:
            summarise = None
        if summarise is not None:
            try:
                return summarise(run_dir)
            except Exception as exc:
                self.console.print(f"[yellow]metrics failed ({exc}); basic summary written")
        fidelity = json.loads((run_dir / "fidelity.json").read_text())
        return {"run": run_dir.name, "rate_scale": self.plan.rate_scale,
                "status": self.status, "error": self.error,
                "controller_restarts": self.controller_restarts, "leftovers": self.leftovers,
                "jobs": {j.name: {"hosts": j.hosts, "status": j.status, "results": j.rows}
                         for j in self.jobs},
                "fidelity": {"verdict": fidelity["verdict"], "reasons": fidelity["reasons"]}}


def _cpu_then(cpu, start: float, end: float, column: str) -> float:
    """The CPU samples' mean ``column`` over [start, end], widened to a second at least (NaN
    without samples)."""
    if cpu is None or not len(cpu):
        return math.nan
    return cpu_mean(cpu, start - max(0.0, 1.0 - (end - start)), end, column)


def _idle_then(cpu, start: float, end: float) -> str:
    """'; CPU idle N% then' over [start, end] (a second at least), from the CPU samples."""
    idle = _cpu_then(cpu, start, end, "idle")
    return "" if math.isnan(idle) else f"; CPU idle {idle:.0%} then"


STEAL_NOTED = 0.01  # a stretch's mean steal share at which its reasons say so


def _stolen_then(cpu, start: float, end: float) -> str:
    """'; the hypervisor took N% of the CPU time then (steal)' over [start, end] (a second at
    least), when it took :data:`STEAL_NOTED` or more."""
    steal = _cpu_then(cpu, start, end, "steal")
    return ("" if math.isnan(steal) or steal < STEAL_NOTED
            else f"; the hypervisor took {steal:.0%} of the CPU time then (steal)")


def measuring(times, windows: list[tuple[float, float]], period: float):
    """Boolean mask: the sample interval (t - period, t] overlaps one of ``windows``."""
    import numpy as np

    t = np.asarray(times, dtype=float)
    mask = np.zeros(t.size, dtype=bool)
    for start, end in windows:
        mask |= (t > start) & (t - period < end)
    return mask


