"""One step of loading a switch: k disjoint host pairs each send one shaped TCP flow across it,
measured over the flows' steady part.

What a step measures: every loaded link direction's achieved ÷ configured rate
(wire-equivalent, as the calibration counts it), the link invariant
(:mod:`analysis.invariants`) over the window, the most waiting switch thread's wait share (the
switch invariant, :mod:`analysis.sched_invariant`), and the CPU in cores by where it went:
ovs-vswitchd's main thread (the userspace datapath polls and forwards every non-PMD port
there) and its other threads, the iperf3 processes, the kernel's softirq time, this process
(the samplers), the rest, and idle. Reads ``/proc`` only (root for other users' threads).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil

from analysis.invariants import judge
from analysis.sched_invariant import forwarding, worst_share
from testbed.core.errors import FabricLabError
from testbed.core.topology import FabricPlan
from testbed.emulator.calibrate import TCP_WIRE_FACTOR
from testbed.emulator.sampler import LinkSampler, window_rates
from testbed.emulator.schedstat import OVS_PIDFILE, SchedSampler
from testbed.emulator.traffic import IperfFlow, run_flows

WARMUP_S = 1.5
TOLERANCE = 0.05  # a link direction within ±5 % of its rate kept it
CATEGORIES = ("ovs main", "ovs other", "iperf3", "softirq", "samplers", "rest", "idle")


def ovs_threads() -> dict[Path, str]:
    """{/proc/PID/task/TID: category} of ovs-vswitchd's threads (read-only)."""
    pid = int(OVS_PIDFILE.read_text().split()[0])
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        comm = (task / "comm").read_text().strip()
        out[task] = "ovs main" if comm == "ovs-vswitchd" else "ovs other"
    return out


def thread_seconds(task: Path) -> float:
    """CPU seconds (user + system) one thread has used, from its own task/TID/stat."""
    fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def snapshot() -> tuple[float, dict[str, float], Any]:
    """(time, CPU seconds so far per category, the machine's CPU times)."""
    used: dict[str, float] = defaultdict(float)
    for tid, cat in ovs_threads().items():
        used[cat] += thread_seconds(tid)
    me = psutil.Process()
    used["samplers"] += sum(me.cpu_times()[:2])
    for proc in psutil.process_iter(["name", "ppid", "cpu_times"]):  # read-only accounting
        times = proc.info["cpu_times"]
        if times is None:
            continue
        if proc.info["name"] == "iperf3":
            used["iperf3"] += times.user + times.system
        elif proc.info["ppid"] == me.pid:  # the samplers' tc readers
            used["samplers"] += times.user + times.system
    return time.monotonic(), used, psutil.cpu_times()


def cpu_breakdown(a, b) -> dict[str, float]:
    """Cores used per category between two snapshots (``rest``: the machine's busy time no
    category accounts for)."""
    (t0, u0, m0), (t1, u1, m1) = a, b
    span = t1 - t0
    cores = {c: (u1.get(c, 0.0) - u0.get(c, 0.0)) / span for c in CATEGORIES[:5]}
    cores["softirq"] = (m1.softirq - m0.softirq) / span
    total = sum(getattr(m1, f) - getattr(m0, f) for f in m1._fields) / span
    cores["idle"] = (m1.idle - m0.idle) / span
    cores["rest"] = max(0.0, total - cores["idle"] - sum(cores[c] for c in CATEGORIES[:5]))
    return cores


def measure(fab, plan: FabricPlan, k: int, seconds: float) -> dict:
    """One step on a live one-switch fabric (hosts ``h0``..``h2k-1`` on ``leaf0``): k flows,
    ``h2i`` to ``h2i+1``; link ratios (``min``, ``mean``, ``ok``: all within
    :data:`TOLERANCE` and no flow failed), the invariant, the switch's wait share and the CPU
    over the steady window."""
    flows = [IperfFlow(f"h{2 * i}", f"h{2 * i + 1}", plan.node(f"h{2 * i}").ip(),
                       plan.node(f"h{2 * i + 1}").ip()) for i in range(k)]
    loaded = {(f.src, "leaf0") for f in flows} | {("leaf0", f.dst) for f in flows}
    snaps: list = []
    with LinkSampler(plan, fab.namespace_pids()) as sampler, \
            SchedSampler(switch=fab.switches != "kernel") as sched:
        errors: list[Exception] = []

        def flows_or_error() -> None:  # a flow starved from the start has no iperf3 result
            try:
                run_flows(fab, flows, seconds)
            except FabricLabError as exc:
                errors.append(exc)

        runner = threading.Thread(target=flows_or_error)
        runner.start()
        time.sleep(0.5 + WARMUP_S)  # run_flows starts its servers, then the clients
        snaps.append(snapshot())
        time.sleep(seconds - WARMUP_S - 0.5)
        snaps.append(snapshot())
        runner.join()
    t0, t1 = snaps[0][0], snaps[1][0]
    rates = window_rates(sampler.counters(), t0, t1)
    rates = rates[[(s, d) in loaded for s, d in zip(rates["src"], rates["dst"], strict=True)]]
    ratios = (rates["achieved_mbit_s"] * TCP_WIRE_FACTOR / rates["capacity_mbit_s"]).tolist()
    q = sampler.queues()
    violations, loaded_s = judge(q[(q["time"] >= t0) & (q["time"] <= t1)])
    return {"min": min(ratios), "mean": statistics.mean(ratios),
            "switch_wait": worst_share(forwarding(sched.samples()), [(t0, t1)]),
            "ok": all(abs(r - 1) <= TOLERANCE for r in ratios) and not errors,
            "loaded_s": loaded_s, "violations": len(violations),
            "cpu": cpu_breakdown(*snaps)}
