"""The largest faithful load; BENCHMARKS.md "The largest load this machine shapes faithfully".

The largest aggregate shaped load this machine carries faithfully, per switch kind (root).

One leaf switch; k disjoint host pairs each send one TCP flow at the link rate (every flow
crosses two shaped links), measured as ``capacity_profile.py`` measures a step
(:func:`testbed.emulator.switch_load.measure`). A step is
faithful when, in the median of ``--repeats`` runs, the worst link direction's achieved ÷
configured rate (wire-equivalent) lies within ±5 % and, on Open vSwitch, ovs-vswitchd's most
waiting thread waited for a CPU at most 10 % of the measured window (the switch invariant,
:mod:`analysis.sched_invariant`). The answer, for Open vSwitch's userspace datapath and for
kernel bridges, is the largest faithful aggregate (k x rate).

    .venv/bin/python benchmarks/max_faithful_load.py [--rates 50,100,200,400]
        [--pairs 1,2,4,8,16] [--repeats 5] [--seconds 6] [--switches ovs,kernel]   (as root)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from analysis.sched_invariant import WAIT_SHARE_MAX
from testbed.core.topology import one_switch_plan
from testbed.core.units import format_spread
from testbed.emulator.fabric import Fabric
from testbed.emulator.switch_load import TOLERANCE, measure


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="50,100,200,400", help="link rates in Mbit/s")
    ap.add_argument("--pairs", default="1,2,4,8,16", help="concurrent flows per step")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--switches", default="ovs,kernel")
    args = ap.parse_args()
    pairs = [int(x) for x in args.pairs.split(",")]
    print(f"medians [min, max] of {args.repeats} runs per step")
    print(f"{'switch':6} {'Mbit/s':>6} {'pairs':>5} {'aggregate':>9} {'worst link ratio':>21} "
          f"{'cpu idle (cores)':>21} {'switch wait share':>18}")
    for kind in args.switches.split(","):
        best = 0.0
        for rate in (float(x) for x in args.rates.split(",")):
            plan = one_switch_plan(2 * max(pairs), rate)
            with tempfile.TemporaryDirectory() as tmp, \
                    Fabric(plan, Path(tmp) / "run", switches=kind) as fab:
                for k in pairs:
                    runs = [measure(fab, plan, k, args.seconds) for _ in range(args.repeats)]
                    worst = [r["min"] for r in runs]
                    waits = [r["switch_wait"] for r in runs if r["switch_wait"] is not None]
                    links_ok = abs(statistics.median(worst) - 1) <= TOLERANCE
                    switch_ok = not waits or statistics.median(waits) <= WAIT_SHARE_MAX
                    if links_ok and switch_ok:
                        best = max(best, k * rate)
                    print(f"{kind:6} {rate:6g} {k:5} {k * rate:9g} "
                          f"{format_spread(worst, '.3f'):>21} "
                          f"{format_spread([r['cpu']['idle'] for r in runs], '.2f'):>21} "
                          f"{format_spread(waits, '.2f') if waits else '-':>18}"
                          f"{'' if links_ok else '  outside ±5%'}"
                          f"{'' if switch_ok else '  switch waited'}", flush=True)
        print(f"{kind}: largest aggregate within ±5% on every link, the switch kept waiting "
              f"at most {WAIT_SHARE_MAX:.0%}: {best:g} Mbit/s "
              f"({2 * best:g} link-Mbit/s shaped)", flush=True)


if __name__ == "__main__":
    main()
