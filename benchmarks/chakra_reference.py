"""Chakra traces on the replay against ASTRA-sim 2.x's one published figure.

    PYTHONPATH=. .venv/bin/python benchmarks/chakra_reference.py [--examples ASTRA_SIM_2/examples]

The reference: astra-sim (main, 2.x) ``tests/rt_template``: an 8-NPU, 1 MiB All-Reduce trace
on a ring of 8 (50 GB/s, 500 ns per link), 4 chunks, ring collectives, endpoint delay 10;
``refs/stdout.txt`` records ``sys[i] finished, 117780 cycles`` from its *congestion-aware*
analytical backend. This script writes the same trace (our encoder), network and system and
replays them. ASTRA-sim 2.x is not built here, so nothing else is compared; ``--examples``
also replays its bundled microbenchmarks (``workload/microbenchmarks/*/*npus_1MB``, rank 0)
on rings of their size at the same settings and prints our times alone.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from testbed.cli.astra import read_network
from testbed.core.astra_formats import system_pairs
from workloads.training.chakra import encode, read_trace, replay_trace, schema
from workloads.training.platform import replay_system

REFERENCE_CYCLES = 117_780  # astra-sim 2.x tests/rt_template/refs/stdout.txt
NETWORK = "topology: [ Ring ]\nnpus_count: [ {n} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
SYSTEM = """{"scheduling-policy": "LIFO", "endpoint-delay": 10,
 "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
 "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
 "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["ring"],
 "collective-optimization": "localBWAware", "local-mem-bw": 50, "boost-mode": 0}"""


def all_reduce_trace(size_bytes: int) -> bytes:
    c = schema()
    node = c["Node"](id=1, name="All-Reduce", type=7)
    node.attr.add(name="is_cpu_op", bool_val=False)
    node.attr.add(name="comm_type", int64_val=0)
    node.attr.add(name="comm_size", int64_val=size_bytes)
    return encode([c["GlobalMetadata"](version="0.0.4"), node])


def run(trace: bytes, npus: int, folder: Path, name: str) -> tuple[float, float]:
    net = folder / f"ring{npus}.yml"
    net.write_text(NETWORK.format(n=npus))
    dims = read_network(net)
    system = replay_system(system_pairs(SYSTEM, "system.json"), len(dims), "system.json")
    start = time.perf_counter()
    result = replay_trace(read_trace(trace, name), dims, system, name)
    return float(result.finish_ns), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=Path, default=None,
                        help="astra-sim 2.x's examples/ folder (its bundled .et traces)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ours, wall = run(all_reduce_trace(1 << 20), 8, folder, "rt_template")
        print(f"rt_template (8 NPUs, 1 MiB All-Reduce): ASTRA-sim 2.x {REFERENCE_CYCLES} ns, "
              f"fabriclab {ours:.0f} ns, ratio {ours / REFERENCE_CYCLES:.3f} "
              f"(replayed in {wall * 1e3:.1f} ms)")
        if args.examples is None:
            return
        for path in sorted(args.examples.glob("workload/microbenchmarks/*/*npus_1MB/*.0.et")):
            npus = int(path.parent.name.split("npus")[0])
            t, wall = run(path.read_bytes(), npus, folder, str(path))
            print(f"{path.parent.parent.name:15} {npus:3} NPUs: fabriclab {t:10.0f} ns "
                  f"(replayed in {wall * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
