"""What the controller programs, how fast; BENCHMARKS.md "The SDN controller".

The controller on a 4-leaf/4-spine fabric with 4 hosts per leaf (root).

1. time to program the fabric (switches connect, are wiped, programmed, barrier-confirmed);
2. flows and groups the base program and each kind of job install (counted on the switches);
3. ECMP's collision rate over many random flow sets against 1 - u!/((u-f)! u^f).

    sudo .venv/bin/python benchmarks/controller_program.py [--trials 40]
"""

from __future__ import annotations

import argparse
import math
import random
import subprocess
import tempfile
import time
from pathlib import Path

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.fabric import Fabric
from testbed.emulator.traffic import IperfFlow, run_flows

LS = {"kind": "leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 4,
      "host_link_mbit_s": 20, "uplink_mbit_s": 20}
OCS = {"kind": "ocs_leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 4,
       "host_link_mbit_s": 20, "uplink_mbit_s": 20, "ocs_count": 4}


def ofctl_count(plan, what: str) -> int:
    n = 0
    for sw in plan.switches:
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", what, sw.name],
                             capture_output=True, text=True).stdout
        n += sum(1 for line in out.splitlines() if "actions=" in line or "group_id=" in line)
    return n


def tx_bytes(intf: str) -> int:
    return int(Path(f"/sys/class/net/{intf}/statistics/tx_bytes").read_text())


def expected_collision(u: int, f: int) -> float:
    return 1 - math.factorial(u) / (math.factorial(u - f) * u**f)


def program_and_count(tmp: Path) -> None:
    print("bring-up s: switches connect to the controller, are wiped, programmed and confirm a "
          "barrier; hosts configured")
    print("policy     fabric        bring-up s  base flows  groups  job (hosts)        +flows")
    for fabric, policy, jobs in ((LS, "ecmp", [("j8", 8)]), (LS, "vclos", [("j8", 8),
                                                                              ("j4x2", 2)]),
                                 (OCS, "ocs-vclos", [("j8", 8), ("j4", 4)])):
        plan = build_plan(parse_fabric({"fabric": fabric}))
        with Fabric(plan, tmp / policy, policy=policy) as fab:
            base_flows, groups = ofctl_count(plan, "dump-flows"), ofctl_count(plan, "dump-groups")
            print(f"{policy:10} {fabric['kind']:14} {fab.timings['start_s']:9.2f} "
                  f"{base_flows:11} {groups:7}")
            for job_id, k in jobs:
                before = ofctl_count(plan, "dump-flows")
                t0 = time.monotonic()
                job = fab.controller.create_job(job_id, hosts_wanted=k)
                took = time.monotonic() - t0
                added = ofctl_count(plan, "dump-flows") - before
                shape = f"{len(job['leaves'])} leaves"
                print(f"{'':55} {job_id} ({k}, {shape}) {added:6}  ({took * 1000:.0f} ms)")


def collisions(tmp: Path, trials: int, seconds: float) -> None:
    plan = build_plan(parse_fabric({"fabric": LS}))
    H, u = 4, 4
    rng = random.Random(1)
    uplinks = [f"leaf0-eth{1 + H + s}" for s in range(u)]
    print(f"\nECMP collisions on leaf0's {u} uplinks, {trials} random flow sets per f")
    print("flows f  measured  expected  (1 - u!/((u-f)! u^f))")
    with Fabric(plan, tmp / "ecmp-collisions", policy="ecmp") as fab:
        for f in (2, 3, 4):
            hit = 0
            for _ in range(trials):
                srcs = rng.sample(range(4), f)
                dsts = rng.sample(range(4, 8), f)
                flows = [IperfFlow(f"h{s}", f"h{d}", plan.node(f"h{s}").ip(),
                                   plan.node(f"h{d}").ip())
                         for s, d in zip(srcs, dsts, strict=True)]
                before = [tx_bytes(i) for i in uplinks]
                run_flows(fab, flows, seconds)
                moved = [tx_bytes(i) - b for i, b in zip(uplinks, before, strict=True)]
                busy = sum(m > 0.3 * max(moved) for m in moved)
                hit += busy < f
            print(f"{f:7} {hit / trials:9.2f} {expected_collision(u, f):9.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        program_and_count(Path(tmp))
        collisions(Path(tmp), args.trials, args.seconds)


if __name__ == "__main__":
    main()
