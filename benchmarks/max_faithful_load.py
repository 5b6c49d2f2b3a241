"""The largest aggregate shaped load this machine carries faithfully (root).

One leaf switch with 16 hosts; k disjoint host pairs each send one TCP flow at the link rate
(every flow crosses two shaped links). The sweep raises k and the rate and reports, per step,
the worst and mean per-link achieved ÷ configured (wire-equivalent) and the CPU idle. The
answer is the largest aggregate (k x rate) whose every link stays within ±5%.

    sudo .venv/bin/python benchmarks/max_faithful_load.py [--seconds 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from sdn_app.static_routes import static_rules
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.calibrate import candidate_flows, run_rounds
from testbed.emulator.fabric import Fabric

RATES = [50, 100, 200, 400]
PAIRS = [1, 2, 4, 8]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    print(f"{'rate':>5} {'pairs':>5} {'aggregate':>9} {'min ratio':>9} {'mean ratio':>10} "
          f"{'cpu idle':>8}")
    best = 0.0
    for rate in RATES:
        fabric = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 16,
                  "host_link_mbit_s": rate, "uplink_mbit_s": rate}
        plan = build_plan(parse_fabric({"fabric": fabric}))
        flows = {(f.src, f.dst): f for f in candidate_flows(plan, static_rules(plan))}
        with tempfile.TemporaryDirectory() as tmp, Fabric(plan, Path(tmp) / "run") as fab:
            for k in PAIRS:
                chosen = [flows[(f"h{2 * i}", f"h{2 * i + 1}")] for i in range(k)]
                links, idles, _, _ = run_rounds(fab, [chosen], args.seconds, 1.0)
                ratios = [r.ratio for r in links]
                ok = all(abs(x - 1) <= 0.05 for x in ratios)
                if ok:
                    best = max(best, k * rate)
                print(f"{rate:5} {k:5} {k * rate:9} {min(ratios):9.3f} "
                      f"{sum(ratios) / len(ratios):10.3f} {idles[0]:8.0%}"
                      f"{'' if ok else '  outside ±5%'}")
    print(f"largest aggregate within ±5% on every link: {best:g} Mbit/s "
          f"({2 * best:g} link-Mbit/s shaped)")


if __name__ == "__main__":
    main()
