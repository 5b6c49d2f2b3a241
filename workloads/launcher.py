"""Run a collective job (All-Reduce or all-to-all) as N local worker processes on loopback and
collect the results.

Rank ``r`` listens for dimension ``d`` on ``127.0.0.{d+1}`` (a distinct loopback address per
dimension, like one NIC per dimension) at a free port. Every child runs in its own process
group; on any failure, timeout or Ctrl-C all children are killed before returning, and the
root-cause worker error is raised as one :class:`FabricLabError` sentence.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.core.algorithms import default_dims
from testbed.core.errors import FabricLabError
from testbed.core.experiment import JobSpec
from testbed.core.formulas import ALLREDUCE
from testbed.core.jobs import ResolvedJob, resolve_on
from testbed.core.spec import validate
from testbed.core.traces import bandwidths, collective_kinds, read_table
from workloads.dnn import canonical, summarise_iterations

if TYPE_CHECKING:
    from workloads.worker import Worker

REPO_ROOT = Path(__file__).resolve().parent.parent
# Root cause first: an error blaming a rank that failed itself is an echo, and so is
# usually a peer_lost error; then by kind, then earliest.
_KIND_RANK = {"internal": 0, "error": 1, "rendezvous": 2, "timeout": 3, "peer_lost": 4}


def _cause_key(kind: str, peer: int | None, failed: set[int]) -> tuple[bool, int]:
    """Sort key putting a job's root-cause error first (then sort by time, rank)."""
    return peer in failed, _KIND_RANK.get(kind, 1)


@dataclass(frozen=True)
class SizeResult:
    """One nccl-tests style row: ``time_us`` is the mean over the measured iterations of each
    one's slowest rank (the collective time of :mod:`analysis.metrics`, as the summary and the
    report give it); ``wrong`` counts the measured (rank, iteration) results that were not
    exact."""

    size: int
    count: int
    time_us: float
    algbw: float
    busbw: float
    correct: bool
    in_place: bool = True
    wrong: int = 0


@dataclass(frozen=True)
class LaunchResult:
    out_dir: Path | None  # where the traces are; None when they were not kept
    rows: list[SizeResult]
    dnn: dict | None = None  # DNN mode: workloads.dnn.summarise_iterations

    def as_dicts(self) -> list[dict]:
        return [asdict(r) for r in self.rows]


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(ip: str, n: int) -> list[int]:
    """``n`` distinct TCP ports on ``ip`` that are free now.

    They are picked outside the kernel's ephemeral range, so the workers' own outgoing
    connections cannot take one of them before its owner listens.
    """
    lo, hi = _ephemeral_range()
    candidates = [p for p in range(10000, 65536) if not lo <= p <= hi]
    random.shuffle(candidates)
    ports = []
    for port in candidates:
        with socket.socket() as s:
            try:
                s.bind((ip, port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == n:
            return ports
    raise FabricLabError(f"found only {len(ports)} free TCP ports on {ip}, {n} are needed")


# WorkerConfig fields that are this worker's runtime, not the job's (testbed.core.jobs).
RUNTIME_OPTIONS = frozenset({"max_active", "out_of_place", "timeout", "collective_timeout",
                             "stall"})


def workload_of(*, sizes: list[int] | None = None, dnn: dict | None = None,
                kind: str = ALLREDUCE, iterations: int = 5, warmup: int = 1,
                training: dict | None = None) -> dict:
    """A job's workload (a spec workload mapping) from the launchers' keyword options:
    ``sizes`` (of ``kind``: ``allreduce``, or ``alltoall`` with per-rank buffers), a
    ``dnn`` mapping (model aliases allowed) whose own ``iterations``/``warmup`` win, or a
    ``training`` mapping (:class:`~testbed.core.experiment.TrainingWorkload` without its
    kind, e.g. ``{"file": "w.txt", "passes": 3}``)."""
    if sum(x is not None for x in (sizes, dnn, training)) != 1:
        raise FabricLabError("give one of sizes, a dnn workload or a training workload to run")
    if training is not None:
        return {**training, "kind": "training"}
    if dnn is not None:
        try:
            model = canonical(str(dnn.get("model")))
        except ValueError as exc:
            raise FabricLabError(f"dnn.model: {exc}") from None
        return {"iterations": iterations, "warmup": warmup, **dnn, "kind": "dnn",
                "model": model}
    return {"kind": kind, "sizes": list(sizes or []), "iterations": iterations,
            "warmup": warmup}


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``options`` as (the job's: knobs and workload options, the worker's runtime)."""
    runtime = {k: v for k, v in options.items() if k in RUNTIME_OPTIONS}
    return {k: v for k, v in options.items() if k not in RUNTIME_OPTIONS}, runtime


def loopback_job(*, ranks: int, dims: list[int] | None = None, job_id: str = "job0",
                 dim_bandwidths: list[float] | None = None, sizes: list[int] | None = None,
                 dnn: dict | None = None, kind: str = ALLREDUCE, iterations: int = 5,
                 warmup: int = 1, training: dict | None = None, **knobs: Any) -> ResolvedJob:
    """The :class:`ResolvedJob` of a job of ``ranks`` local workers (``rank<r>`` its hosts),
    made as every job is (:func:`testbed.core.jobs.resolve_on`): ``knobs`` are
    :class:`~testbed.core.experiment.CollectiveOptions` fields (its defaults where left out);
    ``dims`` default to :func:`~testbed.core.algorithms.default_dims`; every dimension is a
    switch, at ``dim_bandwidths`` bit/s per host (default: the same rate in each)."""
    if dims and math.prod(dims) != ranks:
        raise FabricLabError(f"dims {'x'.join(map(str, dims))} do not multiply to {ranks} ranks")
    spec = validate(JobSpec, {
        **knobs, "name": job_id, "hosts_wanted": ranks, "dims": dims,
        "workload": workload_of(sizes=sizes, dnn=dnn, kind=kind, iterations=iterations,
                                warmup=warmup, training=training)}, f"job {job_id}")
    dims = list(dims) if dims else default_dims(ranks, spec.algorithm)
    return resolve_on(spec, [f"rank{r}" for r in range(ranks)], dims, ["switch"] * len(dims),
                      list(dim_bandwidths) if dim_bandwidths else [1.0] * len(dims))


def worker_configs(addresses: list[list[dict]], *, job: ResolvedJob, out_dir: Path | str,
                   run_id: str, **runtime: Any) -> list[dict]:
    """Worker configs (as dicts), one per rank of ``job``, the one builder for loopback and
    fabric jobs: ``addresses[rank][dim]`` is ``{"ip", "port"}`` where the rank listens in
    each dimension; ``runtime`` are the workers' own options (:data:`RUNTIME_OPTIONS`)."""
    record = job.model_dump(mode="json")
    return [{"run_id": run_id, "rank": r, "job": record, "addresses": addresses,
             "out_dir": str(out_dir), **runtime} for r in range(len(addresses))]


def local_configs(*, ranks: int, dims: list[int], out_dir: Path | str, run_id: str = "local",
                  **options: Any) -> list[dict]:
    """Worker configs for ``ranks`` ranks on loopback: dimension d on 127.0.0.<d+1>, one free
    port per rank; ``options`` are :func:`loopback_job`'s and the workers' runtime ones."""
    job_options, runtime = split_options(options)
    job = loopback_job(ranks=ranks, dims=dims, **job_options)
    return worker_configs(loopback_addresses(ranks, len(dims)), job=job, out_dir=out_dir,
                          run_id=run_id, **runtime)


def loopback_addresses(ranks: int, ndims: int) -> list[list[dict]]:
    """Where each of ``ranks`` local ranks listens: dimension d on 127.0.0.<d+1>, a free port
    per rank."""
    ports = [free_ports(f"127.0.0.{d + 1}", ranks) for d in range(ndims)]
    return [[{"ip": f"127.0.0.{d + 1}", "port": ports[d][r]} for d in range(ndims)]
            for r in range(ranks)]


def kill_all(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)


def _root_cause(out_dir: Path, procs: dict[int, subprocess.Popen]) -> str:
    errors = []
    for f in out_dir.glob("error-rank*.json"):
        with contextlib.suppress(OSError, ValueError):
            errors.append(json.loads(f.read_text()))
    if errors:
        failed = {e["rank"] for e in errors}
        errors.sort(key=lambda e: (*_cause_key(e["kind"], e.get("peer"), failed),
                                   e["time"], e["rank"]))
        return errors[0]["message"]
    for rank, p in sorted(procs.items()):
        if p.returncode not in (None, 0):
            tail = (out_dir / f"stderr-rank{rank}.txt").read_text(errors="replace").strip()
            last = tail.splitlines()[-1] if tail else f"exit status {p.returncode}"
            return f"rank {rank} failed: {last}"
    return "a worker failed without saying why"


def run_local(
    *,
    ranks: int,
    dims: list[int] | None = None,
    max_active: int = 1,
    timeout: float = 30.0,
    collective_timeout: float = 600.0,
    out_dir: Path | str | None = None,
    run_id: str | None = None,
    skip_ranks: tuple[int, ...] = (),
    stall_ranks: tuple[int, ...] = (),
    wall_timeout: float | None = None,
    out_of_place: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    **job: Any,
) -> LaunchResult:
    """Run the job on ``ranks`` local worker processes; return per-size results (with
    ``out_of_place`` an out-of-place row before the in-place row of every size).

    ``job`` are :func:`loopback_job`'s options: the job's
    :class:`~testbed.core.experiment.CollectiveOptions` knobs (``algorithm``, ``chunks``,
    ``transport``, ``semantics``, ``source_port_seed`` ..., the spec's defaults where left
    out), its workload (``sizes``, ``kind``, ``iterations``, ``warmup``, ``dnn``,
    ``training``), ``job_id`` and ``dim_bandwidths``.

    ``dnn`` (a :class:`~workloads.dnn.DnnWorkload` as a dict, e.g. ``{"model": "resnet50",
    "scale": 1e-3, "compute_scale": 0.01}``) runs training-iteration emulation instead of
    ``sizes``, for ``iterations`` + ``warmup`` iterations unless the dict sets its own; the
    result's ``rows`` are then per bucket size and its ``dnn`` summarises the iterations.

    ``kind: alltoall`` runs all-to-alls of ``sizes`` bytes per rank (``algorithm`` one of
    :data:`~testbed.core.registry.ALLTOALLS`), one out-of-place row per size.

    ``on_progress(collectives, size)`` is told, every second or so, how many collectives
    (warm-up ones included) rank 0 has finished and the size of its last (from its partial
    trace, flushed every two seconds).

    ``skip_ranks`` are never started and ``stall_ranks`` connect but never take part (both
    for testing failure handling). ``wall_timeout`` bounds the whole job.
    Without ``out_dir`` the configs, logs and traces go in a temporary directory that is
    removed when the job ends, however it ends (the result's ``out_dir`` is then None).
    Raises FabricLabError with the root-cause worker message on failure.
    """
    resolved = loopback_job(ranks=ranks, dims=dims, **job)
    with contextlib.ExitStack() as stack:
        if out_dir:
            out = Path(out_dir)
            out.mkdir(parents=True, exist_ok=True)
        else:
            out = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="fabriclab-allreduce-", ignore_cleanup_errors=True)))
        configs = worker_configs(
            loopback_addresses(ranks, len(resolved.dims)), job=resolved, out_dir=out,
            run_id=run_id or uuid.uuid4().hex[:12], max_active=max_active, timeout=timeout,
            collective_timeout=collective_timeout, out_of_place=out_of_place)
        launch_workers(
            {r: {**configs[r], "stall": r in stall_ranks}
             for r in range(ranks) if r not in skip_ranks},
            out, lambda _rank, args, **kw: subprocess.Popen(args, start_new_session=True, **kw),
            wall_timeout, None if on_progress is None else partial(_report, out, on_progress),
        )
        iterations = resolved.workload.kind in ("dnn", "training")
        summary = summarise_iterations(read_table(out, "iterations")) if iterations else None
        return LaunchResult(out if out_dir else None, size_results(out), summary)


def _report(out: Path, on_progress: Callable[[int, int], None]) -> None:
    """Tell ``on_progress`` what rank 0's partial trace holds (nothing before its first)."""
    import pyarrow.parquet as pq

    try:
        sizes = pq.read_table(out / "collectives-rank0.partial.parquet", columns=["size"])
    except (OSError, ValueError):  # not written yet, or replaced while read
        return
    if sizes.num_rows:
        on_progress(sizes.num_rows, int(sizes["size"][-1].as_py()))


def launch_workers(configs: dict[int, dict], out: Path, spawn: Callable[..., subprocess.Popen],
                   wall_timeout: float | None,
                   poll: Callable[[], None] | None = None) -> None:
    """Write each rank's config, start ``python -m workloads.worker`` for it through
    ``spawn(rank, args, **popen_kwargs)`` (a local process, or one inside a fabric host),
    wait for all (calling ``poll()`` about once a second meanwhile), and kill every worker on
    failure, timeout, Ctrl-C or SIGTERM."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    procs: dict[int, subprocess.Popen] = {}
    previous = None
    if threading.current_thread() is threading.main_thread():  # SIGTERM cleans up like Ctrl-C
        previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        for r, cfg in configs.items():
            path = out / f"config-rank{r}.json"
            path.write_text(json.dumps(cfg))
            with open(out / f"stderr-rank{r}.txt", "wb") as err:
                procs[r] = spawn(r, [sys.executable, "-m", "workloads.worker", str(path)],
                                 cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        wait_all(procs, out, wall_timeout, poll)
    finally:
        kill_all(list(procs.values()))
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def wait_all(procs: dict[int, subprocess.Popen], out: Path, wall_timeout: float | None,
             poll: Callable[[], None] | None = None) -> None:
    """Wait for every worker, calling ``poll()`` about once a second; on the first failure
    give the others a moment, then raise."""
    end = None if wall_timeout is None else time.monotonic() + wall_timeout
    polled = time.monotonic()
    while True:
        if poll is not None and time.monotonic() - polled >= 1.0:
            poll()
            polled = time.monotonic()
        codes = {r: p.poll() for r, p in procs.items()}
        if any(c not in (None, 0) for c in codes.values()):
            grace = time.monotonic() + 1.0  # let the other ranks report their side
            while time.monotonic() < grace and any(p.poll() is None for p in procs.values()):
                time.sleep(0.05)
            raise FabricLabError(_root_cause(out, procs))
        if all(c == 0 for c in codes.values()):
            return
        if end is not None and time.monotonic() > end:
            raise FabricLabError(f"the job did not finish within {wall_timeout:g} s")
        time.sleep(0.05)


def size_results(out: Path) -> list[SizeResult]:
    """One row per size and placement (out of place first), from the measured iterations;
    a trace without ``in_place`` (older, or simulated) is in place."""
    table = read_table(out, "collectives").to_pandas()
    table = table[~table["warmup"]]
    table = table.assign(in_place=table["in_place"].ne(False), kind=collective_kinds(table))
    rows = []
    for (size, in_place), g in table.groupby(["size", "in_place"], sort=True):
        # each collective's slowest rank, then their mean: a rank that waited in one iteration
        # and another in the next both count, as in the summary's collective_s (the slowest
        # rank's mean read 0.4-0.7 ms less of a 1 KiB halving-doubling's 5 ms on 8 hosts)
        t = float(g.groupby("coll")["time"].max().mean())
        world = int(g["world"].iloc[0])
        # GB/s, as nccl-tests prints (all_reduce_perf's or alltoall_perf's busbw)
        algbw, busbw = bandwidths(int(size), t, world, str(g["kind"].iloc[0]))
        rows.append(SizeResult(
            size=int(size), count=int(g["count"].iloc[0]), time_us=t * 1e6, algbw=algbw,
            busbw=busbw, correct=bool(g["correct"].all()), in_place=bool(in_place),
            wrong=int((~g["correct"].astype(bool)).sum()),
        ))
    return rows


def run_in_threads(configs: list[dict], fn: Callable[[Worker], Any],
                   timeout: float = 60.0) -> list:
    """Run every rank as a thread of this process (tests, benchmarks): connect a
    :class:`~workloads.worker.Worker` per config, then return ``[fn(worker) for each rank]``.

    A failing rank drops only its own connections, as a failed worker process does, so
    every other rank fails on its own terms: an echo blaming the failed rank, or its own
    timeout. The root-cause error is re-raised, chosen as :func:`run_local` chooses it.
    """
    from workloads.worker import Worker, WorkerConfig

    workers = [Worker(WorkerConfig.model_validate(c)) for c in configs]
    results: list = [None] * len(workers)
    errors: list[tuple[int, BaseException]] = []

    try:
        for w in workers:  # everyone listens before anyone connects
            w.listen()
    except BaseException:
        for w in workers:
            w.close()
        raise

    def body(i: int) -> None:
        try:
            workers[i].connect()
            results[i] = fn(workers[i])
        except BaseException as exc:
            errors.append((workers[i].cfg.rank, exc))
            # Not the other ranks' transports: that would cut short a peer's wait for a
            # stalled rank and hide the root cause behind an "aborted" or "closed" echo.
            workers[i].transport.abort()

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(len(workers))]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    for w in workers:
        w.close()
    if any(t.is_alive() for t in threads):
        raise FabricLabError(f"the in-process ranks did not finish within {timeout:g} s")
    if errors:
        failed = {rank for rank, _ in errors}
        # errors is in failure order: the stable sort keeps the earliest first on ties.
        errors.sort(key=lambda e: _cause_key(getattr(e[1], "kind", "internal"),
                                             getattr(e[1], "peer", None), failed))
        raise errors[0][1]
    return results
