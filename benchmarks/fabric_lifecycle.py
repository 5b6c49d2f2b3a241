"""Fabric build, start and stop times; BENCHMARKS.md "Fabric bring-up and teardown".

Bring-up and teardown time of the two reference fabrics (root).

    .venv/bin/python benchmarks/fabric_lifecycle.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from testbed.core.spec import load_fabric
from testbed.core.topology import build_plan
from testbed.emulator.fabric import Fabric

FABRICS = ["experiments/fabrics/multidim-4x4x4.yaml", "experiments/fabrics/leaf-spine-4x4.yaml"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'fabric':26} {'hosts':>5} {'sw':>3} {'links':>5} {'build s (min-max)':>19} "
          f"{'start s (min-max)':>19} {'stop s (min-max)':>19} {'left':>4}")
    for path in FABRICS:
        plan = build_plan(load_fabric(path))
        runs = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                fab = Fabric(plan, Path(tmp) / "run")
                fab.start()
                left = fab.stop()
                runs.append((fab.timings, left))
            time.sleep(1)
        cells = []
        for key in ("build_s", "start_s", "stop_s"):
            values = [t[key] for t, _ in runs]
            cells.append(f"{statistics.median(values):6.2f} ({min(values):.2f}-{max(values):.2f})")
        leftovers = sum(len(left) for _, left in runs)
        print(f"{Path(path).stem:26} {len(plan.hosts):5} {len(plan.switches):3} "
              f"{len(plan.links):5} {cells[0]:>19} {cells[1]:>19} {cells[2]:>19} {leftovers:4}")
    print(f"(median of {args.repeat} runs; 'left' counts anything teardown did not remove)")


if __name__ == "__main__":
    main()
