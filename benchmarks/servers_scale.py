"""The largest leaf-spine that runs faithfully, over stand-in servers and over one machine, side
by side (issue #43; BENCHMARKS.md "A fabric over two servers").

Each step is the demo's vClos routing experiment grown: ``leaves`` leaves of ``hosts_per_leaf``
hosts at 10 Mbit/s, as many spines as hosts per leaf, and one 2-host All-Reduce job per host
of the even leaves, paired with the same slot on the next leaf (so every job crosses a spine,
and on two servers a VXLAN tunnel). Each step runs through the README's command, ``fabriclab
run``, once over the servers file and once on this machine, alternating, ``--repeats`` times;
a step is faithful in a setting when every one of its runs' verdicts is (``fidelity.json``).

    fabriclab servers local 2 --out /tmp/servers.yaml
    .venv/bin/python benchmarks/servers_scale.py --servers /tmp/servers.yaml \\
        [--sizes 2x4,2x8,4x8,4x16] [--repeats 2]                          (as root)
    fabriclab servers stop

Ends on SIGTERM or Ctrl-C after the run in progress (fabriclab tears it down), never starting
the next one.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RATE_MBIT_S = 10
STOP = False


def experiment(leaves: int, per_leaf: int) -> dict:
    jobs = []
    for leaf in range(0, leaves - 1, 2):
        for slot in range(per_leaf):
            a, b = leaf * per_leaf + slot, (leaf + 1) * per_leaf + slot
            jobs.append({"name": f"j{len(jobs)}", "hosts": [f"h{a}", f"h{b}"],
                         "workload": {"kind": "allreduce", "sizes": ["1MiB"],
                                      "iterations": 3}})
    return {"name": f"scale-{leaves}x{per_leaf}", "policy": "vclos", "solo_baselines": False,
            "timeout_s": 600,
            "fabric": {"kind": "leaf_spine", "leaves": leaves, "spines": per_leaf,
                       "hosts_per_leaf": per_leaf, "host_link_mbit_s": RATE_MBIT_S,
                       "uplink_mbit_s": RATE_MBIT_S},
            "jobs": jobs}


def run_once(spec: Path, out: Path, servers: Path | None) -> dict:
    args = [str(ROOT / "bin" / "fabriclab"), "run", str(spec), "--out", str(out),
            "--no-report"] + (["--servers", str(servers)] if servers else [])
    t0 = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    took = time.monotonic() - t0
    runs = sorted(p for p in out.iterdir() if p.is_dir())
    if proc.returncode not in (0, 1) or not runs:
        return {"verdict": "error", "reasons": [proc.stderr.strip()[-300:]], "took_s": took}
    fid = json.loads((runs[-1] / "fidelity.json").read_text())
    return {"verdict": fid["verdict"], "took_s": took,
            "reasons": sorted({r.split(":")[0] for r in fid["reasons"]})}


def on_signal(signum: int, frame: object) -> None:
    global STOP
    STOP = True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", type=Path, required=True, help="servers file (stand-ins)")
    ap.add_argument("--sizes", default="2x4,2x8,4x8,4x16",
                    help="leaves x hosts per leaf, comma-separated")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--settings", default="servers,one",
                    help="which to run: over the servers, on one machine, or both")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"{'fabric':8} {'hosts':>5} {'setting':10} {'verdicts':24} {'run s':>14}  reasons")
    largest = {"servers": 0, "one": 0}
    with tempfile.TemporaryDirectory(prefix="servers-scale-") as tmp:
        for size in args.sizes.split(","):
            leaves, per_leaf = (int(x) for x in size.split("x"))
            spec = Path(tmp) / f"{size}.yaml"
            spec.write_text(yaml.safe_dump(experiment(leaves, per_leaf)))
            settings = args.settings.split(",")
            results: dict[str, list[dict]] = {s: [] for s in settings}
            for k in range(args.repeats):
                for setting in settings:
                    if STOP:
                        sys.exit("stopped")
                    out = Path(tmp) / f"{size}-{setting}-{k}"
                    out.mkdir()
                    results[setting].append(run_once(
                        spec, out, args.servers if setting == "servers" else None))
            for setting, rs in results.items():
                verdicts = [r["verdict"] for r in rs]
                took = sorted(r["took_s"] for r in rs)
                reasons = sorted({x for r in rs for x in r["reasons"]})
                if all(v == "faithful" for v in verdicts):
                    largest[setting] = max(largest[setting], leaves * per_leaf)
                print(f"{size:8} {leaves * per_leaf:5} {setting:10} "
                      f"{', '.join(verdicts):24} {took[0]:6.0f}–{took[-1]:<6.0f}  "
                      f"{'; '.join(reasons)}", flush=True)
    print("largest faithful: " + ", ".join(
        f"{largest[s]} hosts {'over the servers' if s == 'servers' else 'on one machine'}"
        for s in args.settings.split(",")))


if __name__ == "__main__":
    main()
