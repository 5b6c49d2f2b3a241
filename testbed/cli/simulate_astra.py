"""`fabriclab simulate-astra`: a drop-in for ASTRA-sim 1.0's ``AnalyticalAstra``.

Reads the same three files (workload text, system text, analytical network JSON; a 2.0 network
YAML, a 2.0 system JSON and a Chakra execution trace are read too), replays the workload
(:mod:`workloads.training.replay`, :mod:`workloads.training.chakra`) and prints
ASTRA-sim's ``all passes finished at time: T`` line (T in ns) before its own summary;
``--json`` prints the per-pass and per-layer breakdown as JSON instead of the summary.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from testbed.core.astra_formats import read_network, read_text, system_pairs
from testbed.core.errors import FabricLabError
from workloads.training.astra_text import parse_workload
from workloads.training.chakra import read_trace, replay_trace
from workloads.training.platform import replay_system
from workloads.training.replay import ReplayResult, replay


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate-astra")
    p.add_argument("--workload-configuration", type=Path, required=True, metavar="W",
                   help="ASTRA-sim 1.0 workload text, or a Chakra trace (FILE.et, or the "
                   "prefix ASTRA-sim 2.x takes: rank 0's PREFIX.0.et is replayed)")
    p.add_argument("--system-configuration", type=Path, required=True, metavar="S",
                   help="ASTRA-sim 1.0 system text")
    p.add_argument("--network-configuration", type=Path, required=True, metavar="N",
                   help="ASTRA-sim 1.0 analytical network JSON (or 2.0 network YAML)")
    p.add_argument("--num-passes", type=int, default=1, help="training passes, as "
                   "AnalyticalAstra's option")
    p.add_argument("--path", default=None, help="accepted for AnalyticalAstra command lines; "
                   "nothing is written")
    p.add_argument("--run-name", default=None, help="accepted for AnalyticalAstra command "
                   "lines; only shown in --json")
    p.add_argument("--json", action="store_true", help="print the per-pass and per-layer "
                   "breakdown as JSON after the finish line")
    p.set_defaults(func=run)


def _ns(x) -> float:
    return round(float(x), 3)


def breakdown(result: ReplayResult, run_name: str | None, wall_s: float) -> dict:
    """The replay as plain data (ns)."""
    return {
        "run_name": run_name,
        "finish_time_ns": _ns(result.finish_ns),
        "wall_s": round(wall_s, 4),
        "compute_ns": _ns(result.compute_ns),
        "exposed_communication_ns": _ns(result.exposed_total_ns),
        "exposed_after_last_pass_ns": _ns(result.drain_ns),
        "passes": [{"pass": i, "end_ns": _ns(t)} for i, t in enumerate(result.pass_end_ns)],
        "dimensions": [{"size": d.size, "kind": d.kind, "gbyte_s": d.gbyte_s,
                        "physical": d.physical, "busy_ns": _ns(b)}
                       for d, b in zip(result.dims, result.dim_busy_ns, strict=True)],
        "layers": [{"name": s.name,
                    "compute_ns": {k: _ns(v) for k, v in s.compute_ns.items()},
                    "waiting_for_communication_ns": {k: _ns(v) for k, v in s.waiting_ns.items()}}
                   for s in result.layers],
        "collectives": [{"layer": c.layer, "stage": c.stage, "kind": c.kind,
                         "size_bytes": c.size_bytes, "dims": list(c.dims), "chunks": c.chunks,
                         "issued_ns": _ns(c.issued_ns),
                         "finished_ns": None if c.finished_ns is None else _ns(c.finished_ns),
                         "done_ns": None if c.done_ns is None else _ns(c.done_ns)}
                        for c in result.collectives],
    }


def chakra_trace(path: Path) -> Path | None:
    """The Chakra trace to replay: ``path`` itself when it ends in ``.et``, or rank 0's file
    ``path.0.et`` when ``path`` is the prefix ASTRA-sim 2.x takes; None for a workload text."""
    if path.suffix == ".et":
        return path
    rank0 = path.with_name(path.name + ".0.et")
    return rank0 if not path.exists() and rank0.exists() else None


def run_trace(path: Path, dims, system, args: argparse.Namespace) -> int:
    """Replay rank 0's Chakra trace (ASTRA-sim's NPUs are symmetric)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FabricLabError(f"cannot read {path}: {exc.strerror}") from None
    nodes = read_trace(data, str(path))
    start = time.perf_counter()
    result = replay_trace(nodes, dims, system, str(path))
    wall = time.perf_counter() - start
    print(f"all passes finished at time: {round(result.finish_ns)}")
    summary = {"trace": str(path), "finish_time_ns": _ns(result.finish_ns),
               "wall_s": round(wall, 4), "nodes": len(nodes),
               "compute_ns": _ns(result.compute_ns),
               "collectives": [{"name": c.layer, "kind": c.kind, "size_bytes": c.size_bytes,
                                "dims": list(c.dims), "issued_ns": _ns(c.issued_ns),
                                "done_ns": None if c.done_ns is None else _ns(c.done_ns)}
                               for c in result.collectives]}
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"Chakra trace, {len(nodes)} nodes, {len(result.collectives)} collectives, "
              f"compute {float(result.compute_ns) / 1e6:.3f} ms, finish "
              f"{float(result.finish_ns) / 1e6:.3f} ms (replayed in {wall:.2f} s)")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.num_passes < 1:
        raise FabricLabError(f"--num-passes is {args.num_passes} but must be at least 1")
    dims = read_network(args.network_configuration)
    system = replay_system(system_pairs(read_text(args.system_configuration),
                                        str(args.system_configuration)),
                           len(dims), str(args.system_configuration))
    trace = chakra_trace(args.workload_configuration)
    if trace is not None:
        return run_trace(trace, dims, system, args)
    workload = parse_workload(read_text(args.workload_configuration),
                              str(args.workload_configuration))
    start = time.perf_counter()
    result = replay(workload, dims, system, args.num_passes)
    wall = time.perf_counter() - start
    print(f"all passes finished at time: {round(result.finish_ns)}")
    if args.json:
        print(json.dumps(breakdown(result, args.run_name, wall), indent=1))
        return 0
    total = float(result.finish_ns)
    compute = float(result.compute_ns)
    # the layers' waits and the drain after the last pass's compute: a single data-parallel
    # pass waits for its All-Reduces only there
    exposed, drain = float(result.exposed_total_ns), float(result.drain_ns)
    print(f"{workload.kind} workload, {len(workload.layers)} layers, {args.num_passes} "
          f"pass(es), {len(result.collectives)} collectives on "
          f"{'x'.join(str(d.size) for d in result.dims)} logical dimensions")
    print(f"compute {compute / 1e6:.3f} ms, exposed communication {exposed / 1e6:.3f} ms "
          f"({drain / 1e6:.3f} ms of it after the last pass's compute), finish "
          f"{total / 1e6:.3f} ms (replayed in {wall:.2f} s)")
    for d, busy in zip(result.dims, result.dim_busy_ns, strict=True):
        print(f"  dim {d.size:>4} {d.kind:<15} busy {float(busy) / 1e6:10.3f} ms "
              f"({100 * float(busy) / total:5.1f}% of the run)")
    return 0
