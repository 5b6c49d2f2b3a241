"""Link invariant alarms, cost; BENCHMARKS.md "The link invariant: false alarms, detection, cost".

Does the link invariant catch a link that falls short, and only then? And what does
sampling the qdiscs cost? (root; a 1-leaf fabric with three hosts)

Each repetition runs an incast (h0 and h1 both send to h2 for ``--seconds``, so a queue stands
at the switch port towards h2) twice on one fabric: untouched, then with that port's HTB rates
halved behind the configuration's back. It prints, as median [min, max] over ``--repeats``:
the loaded seconds judged at the port, violations found untouched (false alarms) and throttled
(the sent ÷ configured ratio found), and the CPU the samplers cost at each qdisc rate
(this process's sampler threads plus the tc readers, per second of run).

    .venv/bin/python benchmarks/link_invariants.py --repeats 5
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from analysis.invariants import loaded_seconds, violations
from testbed.core.topology import one_switch_plan
from testbed.core.units import format_spread
from testbed.emulator.fabric import Fabric
from testbed.emulator.sampler import LinkSampler
from testbed.emulator.shaping import reshape_commands
from testbed.emulator.traffic import IperfFlow, run_flows


def cpu_s(sampler: LinkSampler, me: psutil.Process) -> float:
    total = sum(me.cpu_times()[:2])
    for reader in list(sampler.qdiscs._readers.values()):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += sum(psutil.Process(reader.proc.pid).cpu_times()[:2])
    return total


def incast(fab: Fabric, plan, seconds: float, qdisc_hz: float) -> tuple:
    """(qdisc samples, CPU seconds per second the samplers and this process used)."""
    h0, h1, h2 = (plan.node(f"h{i}") for i in range(3))
    me = psutil.Process()
    with LinkSampler(plan, fab.namespace_pids(), qdisc_hz=qdisc_hz) as sampler:
        time.sleep(0.5)
        c0, t0 = cpu_s(sampler, me), time.monotonic()
        run_flows(fab, [IperfFlow("h0", "h2", h0.ip(), h2.ip()),
                        IperfFlow("h1", "h2", h1.ip(), h2.ip())], seconds)
        c1, t1 = cpu_s(sampler, me), time.monotonic()
    return sampler.queues(), (c1 - c0) / (t1 - t0)


def throttle(plan, port_of: str, mbit_s: float) -> None:
    """Set the HTB classes of leaf0's port towards ``port_of`` to ``mbit_s`` in all."""
    (lk,) = plan.link_between("leaf0", port_of)
    for cmd in reshape_commands(lk.a_intf if lk.a == "leaf0" else lk.b_intf, mbit_s):
        subprocess.run(cmd, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rate-mbit-s", type=float, default=40.0)
    ap.add_argument("--qdisc-hz", default="10,50,100",
                    help="qdisc sampling rates to cost, comma-separated")
    args = ap.parse_args()
    rates = [float(x) for x in args.qdisc_hz.split(",")]
    plan = one_switch_plan(3, args.rate_mbit_s)
    loaded, false_alarms, caught, ratios = [], [], [], []
    cost: dict[float, list[float]] = {hz: [] for hz in rates}
    for rep in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp, Fabric(plan, Path(tmp) / "run") as fab:
            for hz in rates:
                q, c = incast(fab, plan, args.seconds, hz)
                cost[hz].append(c)
                if hz == max(rates):
                    port = q[(q["src"] == "leaf0") & (q["dst"] == "h2")]
                    loaded.append(loaded_seconds(port))
                    false_alarms.append(len(violations(q)))
            throttle(plan, "h2", args.rate_mbit_s / 2)
            q, _ = incast(fab, plan, args.seconds, max(rates))
            v = violations(q)
            at_port = v[(v["src"] == "leaf0") & (v["dst"] == "h2")]
            caught.append(float(len(at_port) > 0 and len(v) == len(at_port)))
            ratios += list(at_port["ratio"])
        print(f"repetition {rep + 1}/{args.repeats} done", flush=True)
    print(f"\nincast of 2 flows into one {args.rate_mbit_s:g} Mbit/s port, {args.seconds:g} s, "
          f"{args.repeats} repetitions: median [min, max]")
    print(f"  loaded seconds judged at the port ({max(rates):g} Hz): "
          f"{format_spread(loaded, '.2f')}")
    print(f"  violations, untouched (false alarms): {format_spread(false_alarms, '.0f')}")
    print(f"  throttled to half: caught at the port and nowhere else in "
          f"{sum(caught):.0f}/{len(caught)}; sent / configured found: "
          f"{format_spread(ratios, '.2f')}")
    for hz in rates:
        print(f"  sampler CPU at {hz:g} Hz qdisc sampling: {format_spread(cost[hz], '.2f')} "
              "of a core")


if __name__ == "__main__":
    main()
