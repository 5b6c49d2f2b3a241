"""Per-link byte counters and CPU idle, sampled in a background thread at >= 10 Hz, and every
link direction's egress qdisc, sampled in a second thread at up to 100 Hz
(:func:`qdisc_rate_hz`).

Each link's bytes are read at one end: the switch end where there is one (switch interfaces
live in the root namespace, so one read of /proc/net/dev covers them all), else the host end
through ``/proc/<host pid>/net/dev``, which shows that host's network namespace. Each
direction's queue is read where it forms, at the egress qdisc of the interface it leaves by
(:mod:`testbed.emulator.qdisc_stats`): its sent bytes and backlog give the link invariants
(:mod:`analysis.invariants`). They are read faster than the counters because a queue of one
TSO segment drains in tens of milliseconds: at 50 Hz, one segment waiting at the start of an
interval keeps a link of up to 26 Mbit/s busy through it, at 100 Hz one of up to 52 Mbit/s.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from testbed.core.atomic import write_json
from testbed.core.samples import CPU_SAMPLE_SCHEMA, LINK_SAMPLE_SCHEMA, QDISC_SAMPLE_SCHEMA
from testbed.core.topology import FabricPlan
from testbed.emulator.qdisc_stats import ROOT_NS, QdiscStats


@dataclass(frozen=True)
class Probe:
    """Where a link's two directions are counted."""

    link: str
    src: str  # the a->b direction is src -> dst
    dst: str
    mbit_s: float  # the link's configured rate
    proc: str  # /proc/<pid>/net/dev to read
    intf: str
    ab_is_tx: bool  # a->b bytes are this interface's tx bytes (else its rx bytes)
    ab_queue: tuple[int | None, str]  # (namespace, interface) where a->b queues: a's egress
    ba_queue: tuple[int | None, str]


def probes_for(plan: FabricPlan, ns_pids: dict[str, int]) -> list[Probe]:
    """Where to count and queue-sample every link; ``ns_pids`` has a PID in the namespace of
    every node not in the root namespace (hosts, and kernel-bridge switches)."""
    def ns(node: str) -> int | None:
        return ns_pids.get(node, ROOT_NS)

    def proc(node: str) -> str:
        return f"/proc/{ns_pids[node]}/net/dev" if node in ns_pids else "/proc/net/dev"

    out = []
    for lk in plan.links:
        queues = (ns(lk.a), lk.a_intf), (ns(lk.b), lk.b_intf)
        if not plan.is_host(lk.b):  # counted at the switch end, a's traffic is its rx
            out.append(Probe(lk.name, lk.a, lk.b, lk.mbit_s, proc(lk.b), lk.b_intf, False,
                             *queues))
        else:
            out.append(Probe(lk.name, lk.a, lk.b, lk.mbit_s, proc(lk.a), lk.a_intf, True,
                             *queues))
    return out


# A read of one namespace's counters takes well under a millisecond; one held longer (its
# thread preempted mid-read, e.g. behind real-time delay lines) cannot say when within that
# time the counters were taken: its midpoint stamp was off by 0.1 s, and a link read 111
# Mbit/s against 100 (BENCHMARKS.md, "Kernel bridges under `experiments/latency.yaml`").
# So such a read is done again at once.
SLOW_READ_S = 0.005
READ_TRIES = 3


def timed_read(read: Callable[[str], dict[str, tuple[int, int]]], path: str,
               clock: Callable[[], float] = time.monotonic, slow_s: float = SLOW_READ_S,
               tries: int = READ_TRIES) -> tuple[dict[str, tuple[int, int]], float]:
    """``read(path)`` and the middle of the time it took; a read that took longer than
    ``slow_s`` is done again, up to ``tries`` in all, and the quickest is kept. A file that
    is gone (a host that went away) reads as nothing."""
    best: tuple[dict[str, tuple[int, int]], float, float] | None = None
    for _ in range(tries):
        before = clock()
        try:
            value = read(path)
        except OSError:
            value = {}
        took = clock() - before
        if best is None or took < best[2]:
            best = (value, before + took / 2, took)
        if took <= slow_s:
            break
    assert best is not None
    return best[0], best[1]


def read_net_dev(path: str) -> dict[str, tuple[int, int]]:
    """{interface: (rx_bytes, tx_bytes)} from a /proc net/dev file."""
    out = {}
    for line in Path(path).read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        fields = rest.split()
        out[name.strip()] = (int(fields[0]), int(fields[8]))
    return out


def read_cpu() -> tuple[float, float]:
    """(idle seconds incl. iowait, total seconds) of all CPUs since boot (psutil)."""
    idle, total, _steal = cpu_seconds()
    return idle, total


def cpu_seconds() -> tuple[float, float, float]:
    """(idle incl. iowait, total, steal) seconds of all CPUs since boot (psutil). Steal is the
    time a hypervisor ran something else while this machine's virtual CPUs had work: a run
    loses it with no process of its own to blame."""
    t = psutil.cpu_times()
    total = t.user + t.nice + t.system + t.idle + t.iowait + t.irq + t.softirq + t.steal
    return t.idle + t.iowait, total, t.steal


class BusyProcesses:
    """Once a second, the processes that used the most CPU in that second — kept only for
    seconds when the machine was short of CPU, so a run can say what starved it."""

    def __init__(self, below_idle: float = 0.2, keep: int = 4) -> None:
        self.below_idle = below_idle
        self.keep = keep
        self._last: dict[int, tuple[float, str]] = {}
        self._last_cpu = read_cpu()
        self._last_times = psutil.cpu_times()
        self._last_t = time.monotonic()
        self.starved: list[dict] = []

    def tick(self) -> None:
        now, cpu = time.monotonic(), read_cpu()
        idle = (cpu[0] - self._last_cpu[0]) / max(cpu[1] - self._last_cpu[1], 1e-9)
        seconds = now - self._last_t
        current: dict[int, tuple[float, str]] = {}
        me = os.geteuid()
        for proc in psutil.process_iter(["cpu_times", "name", "cmdline", "uids"]):
            info = proc.info
            mine = info["uids"] is not None and info["uids"].real == me
            # another user's arguments stay out of results meant to be shared: its name only
            cmd = (info["cmdline"] if mine else None) or [info["name"] or "?"]
            times = info["cpu_times"]
            if times is not None:
                current[proc.pid] = (times.user + times.system, " ".join(cmd)[:80])
        times = psutil.cpu_times()
        if idle < self.below_idle and self._last:
            # a process born in this second counts with all its CPU time
            used = sorted(((c - self._last.get(p, (0.0, ""))[0], label)
                           for p, (c, label) in current.items()), reverse=True)[: self.keep]
            split = {k: round((getattr(times, k) - getattr(self._last_times, k)) / seconds, 2)
                     for k in ("user", "system", "softirq", "steal")}
            self.starved.append({"time": now, "idle": round(idle, 3), "cpu": split, "busiest": [
                {"cpu": round(u / seconds, 2), "process": label} for u, label in used if u > 0]})
        self._last, self._last_cpu, self._last_t = current, cpu, now
        self._last_times = times


QDISC_HZ = 100.0
QDISC_READS_PER_S = 1000.0  # namespaces x rate: about 15 % of a core (BENCHMARKS.md)


def qdisc_rate_hz(namespaces: int) -> float:
    """How often to read the qdiscs: :data:`QDISC_HZ`, less on fabrics with so many hosts
    that the reads would cost more than :data:`QDISC_READS_PER_S` namespace reads a second."""
    return min(QDISC_HZ, QDISC_READS_PER_S / max(namespaces, 1))


class LinkSampler:
    """Samples every link's counters and the CPU; ``stop()`` returns tidy tables."""

    def __init__(self, plan: FabricPlan, ns_pids: dict[str, int], hz: float = 10.0,
                 qdisc_hz: float | None = None,
                 record: Callable[[int], object] | None = None) -> None:
        """``record`` is called with the PID of every process the sampler starts (the
        run's :meth:`~testbed.emulator.cleanup.RunState.add_process`). Stop the sampler
        before the fabric: its qdisc readers sit in the hosts' namespaces."""
        self.probes = probes_for(plan, ns_pids)
        self.period = 1.0 / hz
        self.qdiscs = QdiscStats(list(ns_pids.values()), record)
        self.qdisc_hz = qdisc_hz or qdisc_rate_hz(len(self.qdiscs.namespaces))
        self.qdisc_period = 1.0 / self.qdisc_hz
        self._rows: list[tuple[float, str, str, str, float, int]] = []
        self._qrows: list[tuple] = []
        self._cpu: list[tuple[float, float, float]] = []
        self.busy = BusyProcesses()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="link-sampler", daemon=True)
        self._qthread = threading.Thread(target=self._qdisc_loop, name="qdisc-sampler",
                                         daemon=True)

    def __enter__(self) -> LinkSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.qdiscs.start()
        self._thread.start()
        self._qthread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in (self._thread, self._qthread):
            if thread.is_alive():
                thread.join()
        self.qdiscs.stop()

    def sample(self) -> None:
        """One round of counters. Each namespace's file is stamped with the time it was read
        (:func:`timed_read`): on a loaded machine a round over a hundred namespaces takes long
        enough that one time for all of them made a 20 Mbit/s link read 27 Mbit/s over a
        second."""
        t = time.monotonic()
        files = {p.proc for p in self.probes}
        counters, read_at = {}, {}
        for f in files:
            counters[f], read_at[f] = timed_read(read_net_dev, f)
        for p in self.probes:
            rx, tx = counters[p.proc].get(p.intf, (0, 0))
            ab, ba = (tx, rx) if p.ab_is_tx else (rx, tx)
            self._rows.append((read_at[p.proc], p.link, p.src, p.dst, p.mbit_s, ab))
            self._rows.append((read_at[p.proc], p.link, p.dst, p.src, p.mbit_s, ba))
        self._cpu.append((t, *cpu_seconds()))

    def sample_qdiscs(self) -> None:
        t = time.monotonic()
        queues = self.qdiscs.read()
        for p in self.probes:
            for src, dst, where in ((p.src, p.dst, p.ab_queue), (p.dst, p.src, p.ba_queue)):
                q = queues.get(where)
                if q is not None:
                    self._qrows.append((t, p.link, src, dst, p.mbit_s, q.sent_bytes,
                                        q.backlog_bytes, q.drops))

    def _qdisc_loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self.sample_qdiscs()
            next_t = max(next_t + self.qdisc_period, time.monotonic())
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def _loop(self) -> None:
        next_t = last_busy = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            if next_t - last_busy >= 1.0:
                self.busy.tick()
                last_busy = next_t
            next_t += self.period
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def mark(self) -> int:
        """A position in the samples; ``counters(since=mark)`` returns only what came after."""
        return len(self._rows)

    def counters(self, since: int = 0) -> pd.DataFrame:
        """One row per sample and link direction: time, link, src, dst, capacity_mbit_s
        (configured), bytes (cumulative): :data:`LINK_SAMPLE_SCHEMA`."""
        rows = self._rows[since:]  # a snapshot: the sampler thread keeps appending
        return pd.DataFrame(rows, columns=LINK_SAMPLE_SCHEMA.names)

    def queues(self) -> pd.DataFrame:
        """One row per qdisc sample and link direction (its egress qdisc's cumulative sent
        bytes and drops, and its backlog then): :data:`QDISC_SAMPLE_SCHEMA`."""
        return pd.DataFrame(self._qrows[:], columns=QDISC_SAMPLE_SCHEMA.names)

    def cpu(self) -> pd.DataFrame:
        """One row per sample interval: time (end of interval), idle and steal fractions."""
        df = pd.DataFrame(self._cpu[:], columns=["time", "idle", "total", "steal"])
        d = df.diff().iloc[1:]
        return pd.DataFrame({"time": df["time"].iloc[1:], "idle": d["idle"] / d["total"],
                             "steal": d["steal"] / d["total"]})

    def save(self, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_parquet(self.counters(), out_dir / "link_samples.parquet", LINK_SAMPLE_SCHEMA)
        write_parquet(self.queues(), out_dir / "qdisc_samples.parquet", QDISC_SAMPLE_SCHEMA)
        write_parquet(self.cpu(), out_dir / "cpu_samples.parquet", CPU_SAMPLE_SCHEMA)
        write_json(out_dir / "cpu_starved.json", self.busy.starved)


def write_parquet(df: pd.DataFrame, path: Path, schema: pa.Schema) -> None:
    """Write ``df`` as ``schema`` (its column units included) atomically: a crash never
    leaves a truncated file under the final name."""
    tmp = path.with_name(path.name + ".partial")
    pq.write_table(pa.Table.from_pandas(df, schema=schema, preserve_index=False), tmp)
    tmp.replace(path)


def window_rates(counters: pd.DataFrame, t0: float, t1: float) -> pd.DataFrame:
    """Mean rate (Mbit/s) of every link direction between the first and last sample in
    [t0, t1]: columns link, src, dst, capacity_mbit_s (configured), achieved_mbit_s."""
    w = counters[(counters["time"] >= t0) & (counters["time"] <= t1)]
    g = w.sort_values("time").groupby(["link", "src", "dst", "capacity_mbit_s"], sort=False)
    first, last = g.first(), g.last()
    seconds = last["time"] - first["time"]
    achieved = (last["bytes"] - first["bytes"]) * 8 / 1e6 / seconds.where(seconds > 0)
    return achieved.rename("achieved_mbit_s").reset_index()


def cpu_mean(cpu: pd.DataFrame, t0: float, t1: float, column: str = "idle") -> float:
    """The mean of a CPU sample column (``idle``, or ``steal``) over (t0, t1]; NaN without
    samples there, or without the column (a run from before it)."""
    w = cpu[(cpu["time"] > t0) & (cpu["time"] <= t1)]
    return float(w[column].mean()) if len(w) and column in w else float("nan")
