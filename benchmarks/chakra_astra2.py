"""Chakra vs ASTRA-sim 2.x; BENCHMARKS.md "Chakra traces against ASTRA-sim 2.x's analytical …".

Chakra traces on the replay and on ``fabriclab run --backend sim`` against ASTRA-sim 2.x's
analytical backends (congestion-unaware and congestion-aware).

    PYTHONPATH=. .venv/bin/python benchmarks/chakra_astra2.py [--astra2 BIN_DIR] [--record]
        [--no-run]

Cases (every trace written here by fabriclab's encoder, one file per rank, as ASTRA-sim 2.x
reads them; the All-Reduce files are byte for byte what astra-sim's
``examples/workload/microbenchmarks/generator_scripts/all_reduce.py`` writes, and its bundled
``all_reduce/{8,16}npus_1MB`` traces are the 1 MiB ones):

* ``ar{N}-{S}MiB``: one All-Reduce of S MiB on a ring of N NPUs (8 and 16; 1, 16, 64 MiB);
* ``ar4x4-16MiB``: the same on a 4x4 ring-of-rings (Reduce-Scatter, All-Reduce, All-Gather
  phases);
* ``train8``/``train4x4``: a multi-layer data-parallel training trace
  (:func:`workloads.training.chakra_examples.training_trace`:
  six layers, two passes; forward, input- and weight-gradient compute nodes and one
  All-Reduce per layer's weights, with data dependencies; no training trace ships with
  ASTRA-sim 2.x).

Platform: 50 GB/s and 500 ns per link, the system file of astra-sim's ``tests/rt_template``
(4 chunks, ring collectives, LIFO, endpoint delay 10 ns, ``local-mem-bw`` 50), so ``ar8-1MiB``
is that test, whose recorded 117,780 cycles both backends reproduce. The ``*-tcp`` cases are the
platform a ``fabriclab run --backend sim`` job has: the links at TCP's goodput (50 x 1448/1514
GB/s) and no local reduction cost (``local-mem-bw`` 10^6 GB/s: ASTRA-sim 2.x cannot leave it
out); the job (a multidim ring fabric at 50 GB/s, ``--step-latency-us 0.51``: the link's 500 ns
plus the endpoint's 10) is compared with them (apples to apples) and with the plain case.

``--astra2``: the ``bin`` folder of an ASTRA-sim 2.x analytical build; each case runs both
binaries (``--record`` writes their times and command lines to
``benchmarks/data/astra2_chakra_reference.csv``). Without it the recorded times stand in.
``--no-run``: skip the ``fabriclab run`` jobs. Build and provenance: benchmarks/data/README.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from testbed.core.astra_formats import read_network, system_pairs
from testbed.core.astra_units import ASTRA_GBYTE_S_IN_MBIT_S
from testbed.core.formulas import TCP_GOODPUT
from workloads.training.chakra import read_trace, replay_trace
from workloads.training.chakra_examples import all_reduce_trace, training_trace
from workloads.training.platform import replay_system

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "benchmarks" / "data" / "astra2_chakra_reference.csv"
BACKENDS = ("congestion_unaware", "congestion_aware")
BINARY = {"congestion_unaware": "AstraSim_Analytical_Congestion_Unaware",
          "congestion_aware": "AstraSim_Analytical_Congestion_Aware"}
GBYTE_S, LATENCY_NS, ENDPOINT_NS, MEM_GBYTE_S = 50.0, 500.0, 10, 50.0
NO_MEMORY_COST_GBYTE_S = 1e6  # ASTRA-sim 2.x's local reduction rounds to 0 ns at this rate


@dataclass(frozen=True)
class Case:
    name: str
    trace: str  # "ar" or "train"
    npus: tuple[int, ...]
    size_mib: int = 0
    tcp: bool = False  # links at TCP goodput, no local reduction cost

    @property
    def gbyte_s(self) -> float:
        return GBYTE_S * TCP_GOODPUT if self.tcp else GBYTE_S

    @property
    def mem_gbyte_s(self) -> float:
        return NO_MEMORY_COST_GBYTE_S if self.tcp else MEM_GBYTE_S


CASES = tuple(
    [Case(f"ar{n}-{s}MiB", "ar", (n,), s) for n in (8, 16) for s in (1, 16, 64)]
    + [Case("ar4x4-16MiB", "ar", (4, 4), 16), Case("train8", "train", (8,)),
       Case("train4x4", "train", (4, 4)),
       Case("ar8-16MiB-tcp", "ar", (8,), 16, tcp=True), Case("train8-tcp", "train", (8,),
                                                             tcp=True)])
RUN_CASES = {"ar8-16MiB-tcp": "ar8-16MiB", "train8-tcp": "train8"}  # job case -> plain case


def trace_bytes(case: Case, rank: int) -> bytes:
    npus = 1
    for n in case.npus:
        npus *= n
    return all_reduce_trace(npus, case.size_mib, rank) if case.trace == "ar" \
        else training_trace()


def write_inputs(case: Case, folder: Path) -> dict[str, Path]:
    """The case's traces (``trace.{rank}.et``), network, system and remote-memory files."""
    folder.mkdir(parents=True, exist_ok=True)
    npus = 1
    for n in case.npus:
        npus *= n
    for rank in range(npus):
        (folder / f"trace.{rank}.et").write_bytes(trace_bytes(case, rank))
    k = len(case.npus)
    network = folder / "network.yml"
    network.write_text(
        f"topology: [ {', '.join(['Ring'] * k)} ]\n"
        f"npus_count: [ {', '.join(map(str, case.npus))} ]\n"
        f"bandwidth: [ {', '.join([repr(case.gbyte_s)] * k)} ]\n"
        f"latency: [ {', '.join([repr(LATENCY_NS)] * k)} ]\n")
    system = folder / "system.json"
    system.write_text(json.dumps({
        "scheduling-policy": "LIFO", "endpoint-delay": ENDPOINT_NS,
        "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
        "all-reduce-implementation": ["ring"] * k, "all-gather-implementation": ["ring"] * k,
        "reduce-scatter-implementation": ["ring"] * k,
        "all-to-all-implementation": ["ring"] * k,
        "collective-optimization": "localBWAware", "local-mem-bw": case.mem_gbyte_s,
        "boost-mode": 0}, indent=1))
    memory = folder / "memory.json"
    memory.write_text('{"memory-type": "NO_MEMORY_EXPANSION"}\n')
    return {"workload": folder / "trace", "system": system, "network": network,
            "memory": memory}


def replay_case(files: dict[str, Path]) -> tuple[float, float]:
    """(finish ns, wall s) of the replay of rank 0's trace."""
    dims = read_network(files["network"])
    system = replay_system(system_pairs(files["system"].read_text(), "system.json"),
                           len(dims), "system.json")
    path = files["workload"].with_name("trace.0.et")
    start = time.perf_counter()
    result = replay_trace(read_trace(path.read_bytes(), str(path)), dims, system, str(path))
    return float(result.finish_ns), time.perf_counter() - start


def astra2_command(binary: str, files: dict[str, Path]) -> list[str]:
    return [binary, f"--workload-configuration={files['workload']}",
            f"--system-configuration={files['system']}",
            f"--remote-memory-configuration={files['memory']}",
            f"--network-configuration={files['network']}"]


def run_astra2(bin_dir: Path, backend: str, files: dict[str, Path]
               ) -> tuple[int | None, float]:
    """(sys[0]'s finish cycles = ns, wall s) of one ASTRA-sim 2.x run; None when the backend
    refuses the network (the congestion-aware one runs 1-D topologies only)."""
    start = time.perf_counter()
    out = subprocess.run(astra2_command(str(bin_dir / BINARY[backend]), files),
                         capture_output=True, text=True, timeout=600, check=False,
                         cwd=files["network"].parent)  # it writes log/ where it runs
    wall = time.perf_counter() - start
    m = re.search(r"sys\[0\] finished, (\d+) cycles", out.stdout + out.stderr)
    if "only support 1-dim topology" in out.stdout + out.stderr:
        return None, wall
    if out.returncode or m is None:
        sys.exit(f"{BINARY[backend]} gave no finish time (exit {out.returncode})")
    return int(m.group(1)), wall


def run_job(case: Case, files: dict[str, Path], folder: Path) -> float:
    """The iteration time (ns) ``fabriclab run --backend sim`` gives a training job replaying
    the case's trace on a multidim ring fabric at 50 GB/s."""
    spec = folder / "experiment.json"
    dims = [{"size": n, "mbit_s": GBYTE_S * ASTRA_GBYTE_S_IN_MBIT_S, "kind": "ring"}
            for n in case.npus]
    hosts = 1
    for n in case.npus:
        hosts *= n
    spec.write_text(json.dumps({
        "name": case.name, "fabric": {"kind": "multidim", "dims": dims},
        "jobs": [{"name": "train", "hosts_wanted": hosts, "algorithm": "baseline",
                  "order": "fifo", "chunks": 4, "dim_algorithm": "ring",
                  "workload": {"kind": "training",
                               "file": str(files["workload"].with_name("trace.0.et"))}}]}))
    out = folder / "runs"
    cmd = [sys.executable, "-m", "testbed.cli", "run", str(spec), "--backend", "sim",
           "--out", str(out), "--no-report",
           "--step-latency-us", str((LATENCY_NS + ENDPOINT_NS) / 1000)]
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    (run,) = out.iterdir()
    (row,) = pq.read_table(run / "jobs/train/iterations-rank0.parquet").to_pylist()
    return row["time"] * 1e9


def recorded() -> dict[tuple[str, str], int]:
    with REFERENCE.open() as f:
        return {(r["case"], r["backend"]): int(r["finish_ns"]) for r in csv.DictReader(f)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--astra2", type=Path, default=None,
                        help="bin/ of an ASTRA-sim 2.x analytical build")
    parser.add_argument("--record", action="store_true",
                        help=f"write ASTRA-sim 2.x's times to {REFERENCE.relative_to(ROOT)}")
    parser.add_argument("--no-run", action="store_true", help="skip the fabriclab run jobs")
    args = parser.parse_args()
    if args.record and args.astra2 is None:
        parser.error("--record needs --astra2")
    reference = {} if args.astra2 else recorded()
    rows = []
    ours: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'case':16} {'2.x unaware':>12} {'2.x aware':>12} {'replay':>12} "
              f"{'ratio':>7} {'replay ms':>9}")
        for case in CASES:
            folder = Path(tmp) / case.name
            files = write_inputs(case, folder)
            got, wall = replay_case(files)
            ours[case.name] = got
            for backend in BACKENDS:
                if args.astra2:
                    t, _ = run_astra2(args.astra2, backend, files)
                    if t is None:
                        continue
                    reference[case.name, backend] = t
                    cmd = astra2_command(BINARY[backend], files)
                    rows.append({"case": case.name, "backend": backend, "finish_ns": t,
                                 "npus": "x".join(map(str, case.npus)),
                                 "bandwidth_gbyte_s": repr(case.gbyte_s),
                                 "latency_ns": LATENCY_NS,
                                 "local_mem_gbyte_s": repr(case.mem_gbyte_s),
                                 "command": " ".join(cmd).replace(tmp, "TMP")})
            ref = reference[case.name, "congestion_unaware"]
            aware = reference.get((case.name, "congestion_aware"))
            print(f"{case.name:16} {ref:12d} {aware if aware else '(1-D only)':>12} "
                  f"{got:12.0f} {got / ref:7.4f} {wall * 1e3:9.1f}")
            if case.name in RUN_CASES and not args.no_run:
                job = run_job(case, files, folder)
                plain = RUN_CASES[case.name]
                print(f"  fabriclab run --backend sim: {job:.0f} ns; ÷ this case's 2.x "
                      f"{job / ref:.4f} (apples to apples); ÷ {plain}'s 2.x "
                      f"{job / reference[plain, 'congestion_unaware']:.4f}")
    if args.record:
        with REFERENCE.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        print(f"wrote {REFERENCE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
