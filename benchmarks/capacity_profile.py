"""Where the CPU goes when k shaped TCP flows cross one emulated switch, and whether the links
still deliver their rate (root).

One leaf switch, 2k hosts; k disjoint pairs each send one iperf3 flow at the link rate (every
flow crosses two shaped links). For each rate and k, ``--repeats`` times, it measures over the
steady part of the flows:

* every loaded link direction's achieved ÷ configured rate (wire-equivalent, as the calibration
  counts it), the worst and the mean, and whether all lie within ±5 %;
* the link invariant (``analysis.invariants``): loaded seconds judged and violations, i.e.
  whether a link that fell short had traffic waiting for it (the shaping fell behind) or not
  (the senders did not offer the load);
* the CPU, in cores: ovs-vswitchd's main thread (the userspace datapath polls and forwards
  every non-PMD port there) and its other threads, the iperf3 processes, the kernel's softirq
  time, this process (the samplers), the rest, and idle.

    .venv/bin/python benchmarks/capacity_profile.py [--rates 50,100,200] [--flows 4,8,16]
        [--repeats 5] [--seconds 6] [--switches ovs,kernel]   (as root)
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import psutil
from ring_shaped import one_switch_plan
from sweep_common import spread

from analysis.invariants import judge
from analysis.sched_invariant import forwarding, worst_share
from testbed.core.errors import FabricLabError
from testbed.core.topology import FabricPlan
from testbed.emulator.calibrate import TCP_WIRE_FACTOR
from testbed.emulator.fabric import Fabric
from testbed.emulator.sampler import LinkSampler, window_rates
from testbed.emulator.schedstat import SchedSampler
from testbed.emulator.traffic import Flow, run_flows

OVS_PIDFILE = Path("/var/run/openvswitch/ovs-vswitchd.pid")
WARMUP_S = 1.5
TOLERANCE = 0.05
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


def snapshot() -> tuple[float, dict[str, float], psutil._common.scputimes]:
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


def measure(fab: Fabric, plan: FabricPlan, k: int, seconds: float) -> dict:
    """One step: k flows; link ratios, invariant and CPU over the steady window."""
    flows = [Flow(f"h{2 * i}", f"h{2 * i + 1}", plan.node(f"h{2 * i}").ip(),
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="50,100,200", help="link rates in Mbit/s")
    ap.add_argument("--flows", default="4,8,16", help="concurrent flows per step")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--switches", default="ovs,kernel",
                    help="switch kinds to compare: ovs (userspace datapath), kernel (bridges)")
    args = ap.parse_args()
    flows = [int(x) for x in args.flows.split(",")]
    print(f"medians [min, max] of {args.repeats}; CPU in cores of {psutil.cpu_count()}")
    print(f"{'switch':6} {'Mbit/s':>6} {'flows':>5} {'aggregate':>9} {'min ratio':>21} "
          f"{'mean ratio':>21} "
          f"{'±5%':>5} {'loaded s':>8} {'viol.':>5}  " + " ".join(f"{c:>9}" for c in CATEGORIES))
    for kind, rate in itertools.product(args.switches.split(","),
                                        (float(x) for x in args.rates.split(","))):
        plan = one_switch_plan(2 * max(flows), rate)
        with tempfile.TemporaryDirectory() as tmp, \
                Fabric(plan, Path(tmp) / "run", switches=kind) as fab:
            for k in flows:
                runs = [measure(fab, plan, k, args.seconds) for _ in range(args.repeats)]
                cpu = {c: statistics.median(r["cpu"][c] for r in runs) for c in CATEGORIES}
                ok = sum(r["ok"] for r in runs)
                print(f"{kind:6} {rate:6g} {k:5} {k * rate:9g} "
                      f"{spread([r['min'] for r in runs], 3):>21} "
                      f"{spread([r['mean'] for r in runs], 3):>21} {ok:>2}/{len(runs):<2} "
                      f"{statistics.median(r['loaded_s'] for r in runs):8.1f} "
                      f"{sum(r['violations'] for r in runs):5}  "
                      + " ".join(f"{cpu[c]:9.2f}" for c in CATEGORIES), flush=True)


if __name__ == "__main__":
    main()
