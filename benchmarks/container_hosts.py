"""Container against namespace hosts; BENCHMARKS.md "Container hosts against namespace hosts".

Container hosts against namespace hosts on the demo's 2-leaf fabric (root).

Two figures, each as median [min, max] over ``--repeat`` rounds, both runtimes measured in
every round (alternating, so drift on a shared machine hits both alike):

- **bring-up**: the fabric's build time (Mininet building hosts, switches and links; with
  containers, creating and starting each container too) per host, and the teardown time;
- **fidelity**: the demo's ECMP contention (four 2-host jobs of 2 MiB All-Reduces across two
  leaves and four spines at 20 Mbit/s) run by the runner with each runtime: the verdict, the
  seconds the link invariant judged, the lowest peak ÷ configured rate of any loaded link,
  and the jobs' mean collective time.

    .venv/bin/python benchmarks/container_hosts.py [--repeat 3]

Needs the worker image (`fabriclab images`); the Docker engine is started if need be and
stopped again if this started it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from rich.console import Console

from testbed.core.experiment import expand
from testbed.core.host_runtime import HostRuntime
from testbed.core.topology import build_plan
from testbed.core.units import format_spread
from testbed.emulator import docker_engine, images
from testbed.emulator.cleanup import STATE_DIR
from testbed.emulator.fabric import Fabric
from testbed.emulator.runner import Runner

FABRIC = {"kind": "leaf_spine", "leaves": 2, "spines": 4, "hosts_per_leaf": 4,
          "host_link_mbit_s": 20, "uplink_mbit_s": 20}
JOBS = [{"name": f"j{i}", "hosts": [f"h{i}", f"h{i + 4}"],
         "workload": {"kind": "allreduce", "sizes": ["2MiB"], "iterations": 3}}
        for i in range(4)]
RUNTIMES = {"namespace": HostRuntime(), "docker": HostRuntime(runtime="docker")}


def bring_up(runtime: HostRuntime, tmp: Path) -> dict[str, float]:
    (exp,) = expand({"name": "bringup", "fabric": FABRIC, "jobs": JOBS})
    plan = build_plan(exp.fabric)
    hosts = dict.fromkeys([h.name for h in plan.hosts], runtime)
    fab = Fabric(plan, tmp / "run", hosts=hosts)
    fab.start()
    left = fab.stop()
    if left:
        raise SystemExit(f"teardown left {left}")
    n = len(plan.hosts)
    t = fab.timings
    return {"build_per_host_s": (t["build_s"] + t.get("docker_s", 0.0)) / n,
            "stop_s": t["stop_s"]}


def contention(name: str, tmp: Path) -> dict[str, float]:
    (exp,) = expand({"name": f"containers-{name}", "fabric": FABRIC, "policy": "ecmp",
                     "hosts": RUNTIMES[name].model_dump(exclude_defaults=True), "jobs": JOBS,
                     "timeout_s": 300})
    run_dir = Runner(exp, tmp / "out", console=Console(quiet=True)).run()
    summary = json.loads((run_dir / "summary.json").read_text())
    fidelity = json.loads((run_dir / "fidelity.json").read_text())
    if summary["status"] != "ok":
        raise SystemExit(f"{name}: run {summary['status']}: {summary.get('error')}")
    loaded = [lk["peak_mbit_s"] / lk["configured_mbit_s"] for lk in fidelity["links"]
              if lk["peak_mbit_s"] > 0.5 * lk["configured_mbit_s"]]
    means = [j["mean_s"] for j in summary["jobs"].values()]
    return {"faithful": float(fidelity["verdict"] == "faithful"),
            "judged_s": fidelity["invariants"]["loaded_s"],
            "min_peak_ratio": min(loaded) if loaded else float("nan"),
            "mean_collective_s": sum(means) / len(means)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    started = docker_engine.start(STATE_DIR / "dockerd.log")
    try:
        tag = images.build(docker_engine.client(timeout_s=600), say=lambda _l: None)[0]
        rows: dict[str, list[dict[str, float]]] = {k: [] for k in RUNTIMES}
        for rep in range(args.repeat):
            for name, runtime in RUNTIMES.items():
                with tempfile.TemporaryDirectory() as tmp:
                    row = bring_up(runtime, Path(tmp)) | contention(name, Path(tmp))
                rows[name].append(row)
                print(f"round {rep + 1} {name}: " + ", ".join(
                    f"{k} {v:.3f}" for k, v in row.items()), flush=True)
    finally:
        docker_engine.stop(started)
    print(f"\nworker image {tag}; {args.repeat} rounds; median [min, max]")
    print(f"{'figure':24} {'namespace':>24} {'docker':>24} {'docker/ns':>10}")
    for key, digits in (("build_per_host_s", 3), ("stop_s", 2), ("faithful", 2),
                        ("judged_s", 1), ("min_peak_ratio", 3), ("mean_collective_s", 3)):
        ns = [r[key] for r in rows["namespace"]]
        dk = [r[key] for r in rows["docker"]]
        ratio = statistics.median(dk) / statistics.median(ns) if min(ns) else float("nan")
        spec = f".{digits}f"
        print(f"{key:24} {format_spread(ns, spec):>24} {format_spread(dk, spec):>24} "
              f"{ratio:>10.2f}")


if __name__ == "__main__":
    main()
