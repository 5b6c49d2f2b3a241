"""CPU and link rates, k flows on a switch; BENCHMARKS.md "Where the CPU goes, and kernel bridges".

Where the CPU goes when k shaped TCP flows cross one emulated switch, and whether the links
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
import statistics
import tempfile
from pathlib import Path

import psutil

from testbed.core.topology import one_switch_plan
from testbed.core.units import format_spread
from testbed.emulator.fabric import Fabric
from testbed.emulator.switch_load import CATEGORIES, measure


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
                      f"{format_spread([r['min'] for r in runs], '.3f'):>21} "
                      f"{format_spread([r['mean'] for r in runs], '.3f'):>21} "
                      f"{ok:>2}/{len(runs):<2} "
                      f"{statistics.median(r['loaded_s'] for r in runs):8.1f} "
                      f"{sum(r['violations'] for r in runs):5}  "
                      + " ".join(f"{cpu[c]:9.2f}" for c in CATEGORIES), flush=True)


if __name__ == "__main__":
    main()
