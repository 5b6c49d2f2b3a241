"""Flat All-Reduce busbw; BENCHMARKS.md "Ring and halving-doubling All-Reduce of 8 ranks on one …".

All-Reduce of 8 ranks on one shaped switch, against the link rate and iperf3 (root), for
each flat collective (ring, halving-doubling) and transport.

busbw (nccl-tests: algbw·2(n−1)/n) is what each link carries per second, so on a
bandwidth-optimal collective it should approach the goodput a single TCP flow gets on the
same link. The figure that matters is busbw ÷ iperf3 goodput (target ≥ 0.95); busbw ÷ link
rate includes TCP/IP headers. Every cell is run ``--repeats`` times (median, min, max), with
the TCP retransmission timeouts the hosts' kernels counted meanwhile: a timeout stalls a flow
for at least 200 ms, so they explain a slow run.

    .venv/bin/python benchmarks/ring_shaped.py [--mbps 50] [--size 8MiB] [--repeats 3]
        [--algorithms ring,halving-doubling]   (as root)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from testbed.core.topology import one_switch_plan
from testbed.core.units import parse_size
from testbed.emulator.fabric import Fabric
from testbed.emulator.tcp_counters import timeouts
from testbed.emulator.traffic import IperfFlow, run_flows
from testbed.emulator.workers import run_on_fabric


def tcp_timeouts(fab: Fabric, hosts: list[str]) -> int:
    """Retransmission timeouts counted so far by every host's TCP
    (:func:`testbed.emulator.tcp_counters.timeouts`; 0 where they cannot be read)."""
    return timeouts(fab.host_pids(), hosts) or 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mbps", type=float, default=50.0)
    ap.add_argument("--size", default="8MiB")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--algorithms", default="ring",
                    help="comma-separated flat collectives (default ring)")
    args = ap.parse_args()
    plan = one_switch_plan(args.ranks, args.mbps)
    hosts = [h.name for h in plan.hosts]
    with tempfile.TemporaryDirectory() as tmp, Fabric(plan, Path(tmp) / "fabric") as fab:
        h0, h1 = plan.hosts[0], plan.hosts[1]
        iperf = run_flows(fab, [IperfFlow(h0.name, h1.name, h0.ip(), h1.ip())], 8).goodput_bps[0]
        print(f"iperf3 goodput on one {args.mbps:g} Mbit/s link: {iperf / 1e6:.2f} Mbit/s "
              f"({iperf / (args.mbps * 1e6):.3f} of the rate)")
        print(f"{'algorithm':17} {'transport':10} {'size':>6} {'time s (median)':>15} "
              f"{'busbw Mbit/s':>12} {'÷ rate':>6} {'÷ iperf3 median [min, max]':>27} "
              f"{'RTOs':>5} correct")
        for algorithm in args.algorithms.split(","):
            for transport in ("zerocopy", "rpc"):
                times, busbws, correct = [], [], True
                before = tcp_timeouts(fab, hosts)
                for k in range(args.repeats):
                    res = run_on_fabric(fab, hosts, out_dir=Path(tmp) / algorithm / transport
                                        / str(k), algorithm=algorithm,
                                        sizes=[parse_size(args.size)], transport=transport,
                                        iterations=args.iters, warmup=1, timeout=60)
                    (row,) = res.rows
                    times.append(row.time_us / 1e6)
                    busbws.append(row.busbw * 8e9)  # GB/s -> bit/s
                    correct &= row.correct
                rtos = tcp_timeouts(fab, hosts) - before
                busbw = statistics.median(busbws)
                ratio = (f"{busbw / iperf:.3f} [{min(busbws) / iperf:.3f}, "
                         f"{max(busbws) / iperf:.3f}]")
                print(f"{algorithm:17} {transport:10} {args.size:>6} "
                      f"{statistics.median(times):15.2f} {busbw / 1e6:12.2f} "
                      f"{busbw / (args.mbps * 1e6):6.3f} {ratio:>27} {rtos:5d} {correct}")


if __name__ == "__main__":
    main()
