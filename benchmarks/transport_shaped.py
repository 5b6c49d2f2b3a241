"""zerocopy vs rpc on a shaped link; BENCHMARKS.md "zerocopy vs rpc".

zerocopy vs rpc transports on one shaped link: 2 ranks, 1 KiB to 16 MiB (root).

    sudo .venv/bin/python benchmarks/transport_shaped.py [--mbps 200]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.core.units import format_size, parse_size_range
from testbed.emulator.fabric import Fabric
from testbed.emulator.workers import run_on_fabric


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mbps", type=float, default=200.0)
    ap.add_argument("--sizes", default="1KiB:16MiB")
    args = ap.parse_args()
    sizes = parse_size_range(args.sizes)[::2]  # every 4x
    plan = build_plan(parse_fabric({"fabric": {
        "kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
        "host_link_mbit_s": args.mbps, "uplink_mbit_s": args.mbps}}))
    results = {}
    with tempfile.TemporaryDirectory() as tmp, Fabric(plan, Path(tmp) / "f") as fab:
        for transport in ("zerocopy", "rpc"):
            res = run_on_fabric(fab, ["h0", "h1"], out_dir=Path(tmp) / transport,
                                algorithm="ring", sizes=sizes, transport=transport,
                                iterations=3, warmup=1, timeout=60)
            results[transport] = {r.size: r for r in res.rows}
    print(f"2 ranks, one {args.mbps:g} Mbit/s switch; algbw in Mbit/s (busbw = algbw here)")
    print(f"{'size':>8} {'zerocopy us':>12} {'algbw':>8} {'rpc us':>10} {'algbw':>8} "
          f"{'zc ÷ rpc':>8}")
    for s in sizes:
        z, r = results["zerocopy"][s], results["rpc"][s]
        print(f"{format_size(s):>8} {z.time_us:12.0f} {z.algbw * 8e3:8.2f} {r.time_us:10.0f} "
              f"{r.algbw * 8e3:8.2f} {r.time_us / z.time_us:8.2f}")


if __name__ == "__main__":
    main()
