"""Replay vs ASTRA-sim 1.0; BENCHMARKS.md "Training iterations: `simulate-astra` against …".

ASTRA-sim 1.0 (AnalyticalAstra) against ``fabriclab simulate-astra`` on the Themis
artifact's real workloads, the six systems and three schedulers.

    PYTHONPATH=. .venv/bin/python benchmarks/astra_e2e.py --inputs ARTIFACT/themis/inputs \
        [--astra PATH/AnalyticalAstra] [--repeat 3] [--record FILE.csv]

``--suite heldout --inputs ASTRA_SIM/inputs``: instead, ASTRA-sim's own bundled samples (the
astra-sim checkout's ``inputs/``): six workloads (per-layer ResNet-50, DLRM, both Transformer
types, All-Reduce and All-to-All microbenchmarks) on the ``sample_Torus3D`` and
``sample_Ring_FullyConnected_Switch`` networks, with ``sample_torus_sys.txt`` plus an
``intra-dimension-scheduling`` / ``inter-dimension-scheduling`` pair (FIFO baseline, FIFO Themis,
SCF Themis) written to a temporary folder. The other bundled networks and systems
AnalyticalAstra itself cannot run (Torus2D with this system, a ring of one link) or use
implementations the replay refuses (``doubleBinaryTree``, ``oneDirect``).

``--suite collectives --inputs ARTIFACT/themis/inputs``: single collectives (a ``MICRO``
workload, written to a temporary folder) of each kind (All-Reduce, Reduce-Scatter, All-Gather,
All-to-All) and two sizes (4 MiB, 96 MiB) on three artifact systems (2d_switch,
3d_fc_ring_switch, 4d_ring_fc_ring_switch) under the three schedulers.

``--inputs``: the ``themis/inputs`` folder of jared-ni/astrasim-archgym-public at 786291289945
(its files are not copied here). ``--astra`` (or ``$ASTRA_ANALYTICAL``): AnalyticalAstra built
from astra-sim ``ASTRA-sim-1.0`` 07d5d19 with astra-network-analytical d27635b; each case runs
it and the replay alternately, ``--repeat`` times. Without it the finish times and wall times
recorded in ``benchmarks/data/astra_e2e_reference.csv`` stand in. ``--record`` writes what
AnalyticalAstra gave (with the command line) to that file.

Printed per case: both finish times (ns), their ratio, both wall times (median over repeats;
the replay's in-process parse + replay, AnalyticalAstra's whole process). Then per workload
the mean Themis end-to-end gain (baseline time / Themis time, over the six systems) of both
beside the paper's.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from testbed.core.astra_formats import read_network, system_pairs
from workloads.training.astra_text import parse_workload
from workloads.training.platform import replay_system
from workloads.training.replay import replay

WORKLOADS = ("Resnet50_DataParallel_fused", "gnmt_fp16_fused", "medium_DLRM_fused",
             "large_DLRM_fused", "transformer_1t_fused_only_t")
NETWORKS = ("2d_switch", "3d_switch_homo", "3d_switch_hetero", "3d_fc_ring_switch",
            "4d_ring_fc_ring_switch", "4d_ring_switch_switch_switch")
SCHEDULERS = ("baseline", "themis_fifo", "themis_scf")
# the paper's end-to-end Themis gains: camera-ready (ISCA 2022) and the arXiv abstract
PAPER = {"Resnet50_DataParallel_fused": ("1.49 (ResNet-152)", "-"),
         "gnmt_fp16_fused": ("1.30", "1.41"), "medium_DLRM_fused": ("1.30", "1.42"),
         "large_DLRM_fused": ("1.30", "1.42"), "transformer_1t_fused_only_t": ("1.25", "1.35")}
REFERENCE = Path(__file__).parent / "data" / "astra_e2e_reference.csv"
HELDOUT_REFERENCE = Path(__file__).parent / "data" / "astra_heldout_reference.csv"
HELDOUT_WORKLOADS = ("Resnet50_DataParallel", "DLRM_HybridParallel",
                     "Transformer_HybridParallel", "Transformer_HybridParallel_Fwd_In_Bckwd",
                     "microAllReduce", "microAllToAll")
HELDOUT_NETWORKS = ("sample_Torus3D", "sample_Ring_FullyConnected_Switch")
COLLECTIVE_KINDS = ("ALLREDUCE", "REDUCESCATTER", "ALLGATHER", "ALLTOALL")
COLLECTIVE_SIZES = (4194304, 100663296)
COLLECTIVE_NETWORKS = ("2d_switch", "3d_fc_ring_switch", "4d_ring_fc_ring_switch")
COLLECTIVES_REFERENCE = Path(__file__).parent / "data" / "astra_collectives_reference.csv"
HELDOUT_SYSTEMS = {"baseline": ("FIFO", "baseline"), "themis_fifo": ("FIFO", "themis"),
                   "themis_scf": ("SCF", "themis")}
FINISH = re.compile(r"all passes finished at time: (\d+)")


def paths(inputs: Path, workload: str, network: str, scheduler: str) -> tuple[Path, Path, Path]:
    return (inputs / "workload" / "realworld_workloads" / f"{workload}.txt",
            inputs / "system" / f"{network}_{scheduler}.txt",
            inputs / "network" / "analytical" / f"{network}.json")


def collective_paths(inputs: Path, folder: Path, workload: str, network: str, scheduler: str
                     ) -> tuple[Path, Path, Path]:
    kind, size = workload.split("_")
    w = folder / f"{workload}.txt"
    if not w.exists():
        w.write_text(f"MICRO\n1\nl0 -1 5 NONE 0 5 NONE 0 5 {kind} {size} 5\n")
    return (w, inputs / "system" / f"{network}_{scheduler}.txt",
            inputs / "network" / "analytical" / f"{network}.json")


def heldout_paths(inputs: Path, systems: Path, workload: str, network: str, scheduler: str
                  ) -> tuple[Path, Path, Path]:
    system = systems / f"torus_{scheduler}.txt"
    if not system.exists():
        intra, inter = HELDOUT_SYSTEMS[scheduler]
        base = (inputs / "system" / "sample_torus_sys.txt").read_text()
        system.write_text(f"{base.rstrip()}\nintra-dimension-scheduling: {intra}\n"
                          f"inter-dimension-scheduling: {inter}\n")
    return (inputs / "workload" / f"{workload}.txt", system,
            inputs / "network" / "analytical" / f"{network}.json")


def ours(w: Path, s: Path, n: Path) -> tuple[float, float]:
    """(finish ns, wall s) of the replay, files read and parsed inside the timing."""
    start = time.perf_counter()
    dims = read_network(n)
    system = replay_system(system_pairs(s.read_text(), str(s)), len(dims), str(s))
    result = replay(parse_workload(w.read_text(), str(w)), dims, system)
    return float(result.finish_ns), time.perf_counter() - start


def command(binary: str, w: Path, s: Path, n: Path, out: str) -> list[str]:
    return [binary, f"--workload-configuration={w}", f"--system-configuration={s}",
            f"--network-configuration={n}", f"--path={out}/", "--run-name=fabriclab"]


def _artifact(path: Path) -> Path:
    """``path`` as recorded: from the artifact's ``themis/`` or astra-sim's ``inputs/`` folder
    on, a file the script wrote under ``WRITTEN/``."""
    parts = path.parts
    for top in ("themis", "inputs"):
        if top in parts:
            return Path(*parts[parts.index(top):])
    return Path("WRITTEN", path.name)


def astra(binary: str, w: Path, s: Path, n: Path) -> tuple[float, float]:
    """(finish ns, wall s) of one AnalyticalAstra run."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        proc = subprocess.run(command(binary, w, s, n, out), capture_output=True, text=True,
                              check=False, cwd=out)
        wall = time.perf_counter() - start
    found = FINISH.findall(proc.stdout)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"AnalyticalAstra failed on {w.name} / {s.name}: "
                         f"{proc.stderr.strip()[-300:]}")
    return float(found[-1]), wall


def load_reference(path: Path) -> dict[tuple[str, str, str], tuple[float, float]]:
    if not path.exists():
        return {}
    with path.open() as f:
        return {(r["workload"], r["network"], r["scheduler"]):
                (float(r["finish_time_ns"]), float(r["astra_wall_ms"]) / 1e3)
                for r in csv.DictReader(f)}


def record(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["workload", "network", "scheduler", "finish_time_ns",
                      "astra_wall_ms", "command"])
        for r in rows:
            out.writerow([r["workload"], r["network"], r["scheduler"], int(r["astra_ns"]),
                          round(r["astra_wall_s"] * 1e3), r["command"]])
    print(f"written {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=Path, required=True,
                        help="the artifact's themis/inputs (heldout: astra-sim's inputs)")
    parser.add_argument("--suite", choices=("artifact", "heldout", "collectives"),
                        default="artifact")
    parser.add_argument("--astra", default=os.environ.get("ASTRA_ANALYTICAL"),
                        help="AnalyticalAstra binary (default $ASTRA_ANALYTICAL)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--networks", default=",".join(NETWORKS))
    parser.add_argument("--record", type=Path, default=None,
                        help="write AnalyticalAstra's figures (and command lines) here")
    args = parser.parse_args()
    heldout = args.suite != "artifact"
    reference = load_reference({"artifact": REFERENCE, "heldout": HELDOUT_REFERENCE,
                                "collectives": COLLECTIVES_REFERENCE}[args.suite])
    if args.suite == "heldout":
        args.workloads = ",".join(HELDOUT_WORKLOADS)
        args.networks = ",".join(HELDOUT_NETWORKS)
    elif args.suite == "collectives":
        args.workloads = ",".join(f"{k}_{s}" for k in COLLECTIVE_KINDS for s in COLLECTIVE_SIZES)
        args.networks = ",".join(COLLECTIVE_NETWORKS)
    systems = Path(tempfile.mkdtemp(prefix="fabriclab-astra-"))
    rows = []
    print(f"{'workload':28} {'system':36} {'ASTRA-sim ns':>13} {'fabriclab ns':>13} "
          f"{'ratio':>7} {'astra s':>8} {'ours s':>7}")
    for workload in args.workloads.split(","):
        for network in args.networks.split(","):
            for scheduler in SCHEDULERS:
                make = {"artifact": lambda *a: paths(args.inputs, *a),
                        "heldout": lambda *a: heldout_paths(args.inputs, systems, *a),
                        "collectives": lambda *a: collective_paths(args.inputs, systems, *a)}
                w, s, n = make[args.suite](workload, network, scheduler)
                ref_t, ref_wall, our_t, our_wall = [], [], [], []
                for _ in range(args.repeat):
                    if args.astra:
                        t, wall = astra(args.astra, w, s, n)
                        ref_t.append(t)
                        ref_wall.append(wall)
                    t, wall = ours(w, s, n)
                    our_t.append(t)
                    our_wall.append(wall)
                if not args.astra:
                    if (workload, network, scheduler) not in reference:
                        print(f"{workload:28} {network + '_' + scheduler:36} no recorded "
                              "reference")
                        continue
                    t, wall = reference[(workload, network, scheduler)]
                    ref_t, ref_wall = [t], [wall]
                row = {"workload": workload, "network": network, "scheduler": scheduler,
                       "astra_ns": ref_t[0], "ours_ns": our_t[0],
                       "astra_wall_s": statistics.median(ref_wall),
                       "astra_wall_min_s": min(ref_wall), "astra_wall_max_s": max(ref_wall),
                       "ours_wall_s": statistics.median(our_wall),
                       "ours_wall_min_s": min(our_wall), "ours_wall_max_s": max(our_wall),
                       "command": " ".join(["AnalyticalAstra", *command(
                           "", *(_artifact(p) for p in (w, s, n)), "OUTDIR")[1:]])}
                rows.append(row)
                print(f"{workload:28} {network + '_' + scheduler:36} {row['astra_ns']:13.0f} "
                      f"{row['ours_ns']:13.0f} {row['ours_ns'] / row['astra_ns']:7.4f} "
                      f"{row['astra_wall_s']:8.2f} {row['ours_wall_s']:7.3f}", flush=True)
    ratios = [r["ours_ns"] / r["astra_ns"] for r in rows]
    print(f"\n{len(rows)} cases: ours/ASTRA-sim median {statistics.median(ratios):.4f} "
          f"[{min(ratios):.4f}, {max(ratios):.4f}]; within 5%: "
          f"{sum(abs(x - 1) <= 0.05 for x in ratios)}/{len(ratios)}")
    if args.record and args.astra:
        record(args.record, rows)
    if heldout:
        return
    print(f"\n{'workload':28} {'gain':>6} {'ASTRA-sim':>10} {'fabriclab':>10} "
          f"{'paper (camera-ready)':>21} {'paper (arXiv)':>14}")
    by = {(r["workload"], r["network"], r["scheduler"]): r for r in rows}
    for workload in args.workloads.split(","):
        for scheduler in ("themis_fifo", "themis_scf"):
            gains = {"astra_ns": [], "ours_ns": []}
            for network in args.networks.split(","):
                if (workload, network, "baseline") not in by or (
                        workload, network, scheduler) not in by:
                    continue
                base, them = by[(workload, network, "baseline")], by[(workload, network,
                                                                       scheduler)]
                for key in gains:
                    gains[key].append(base[key] / them[key])
            print(f"{workload:28} {scheduler[7:]:>6} {statistics.mean(gains['astra_ns']):10.3f} "
                  f"{statistics.mean(gains['ours_ns']):10.3f} {PAPER[workload][0]:>21} "
                  f"{PAPER[workload][1]:>14}")


if __name__ == "__main__":
    main()
