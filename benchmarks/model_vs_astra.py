"""The single-collective model against ASTRA-sim 1.0; BENCHMARKS.md "The model's SCF: ...".

``fabriclab model`` (:func:`workloads.model.predict`, semantics ``astra-sim-1.0``) against
AnalyticalAstra on single All-Reduces (a ``MICRO`` workload of one collective, 64 chunks), under
the three schedulers (baseline, Themis FIFO, Themis SCF).

    PYTHONPATH=. .venv/bin/python benchmarks/model_vs_astra.py [--suite development|fresh|all]
        [--astra PATH/AnalyticalAstra] [--inputs ARTIFACT/themis/inputs] [--record]

Suites:

* ``development``: the cases the model's SCF rule was debugged on or checked against while
  it was chosen (2026-11-28 and 29): the 4x4 switch system at 40/20 GB/s (16 and 256 MiB) and
  the artifact's six systems at 4 and 96 MiB (``--inputs``: the ``themis/inputs`` folder of
  jared-ni/astrasim-archgym-public at 786291289945).
* ``fresh``: systems written here that no fix was looked at on, every link 1 ns and an
  endpoint delay of 1 ns as in the artifact: 4 and 64 MiB.

The model is printed twice: bandwidth only (α = 0), and with ASTRA-sim's own α per step
(``dim_delays_s``: hops × link latency + endpoint delay, what the replay charges). ``--astra``
(or ``$ASTRA_ANALYTICAL``): AnalyticalAstra built from astra-sim ``ASTRA-sim-1.0`` 07d5d19 with
astra-network-analytical d27635b; without it the times recorded in
``benchmarks/data/astra_model_reference.csv`` stand in (``--record`` rewrites that file).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import tempfile
from pathlib import Path

from astra_e2e import astra, command

from testbed.core import astra_formats as af
from testbed.core.astra_units import ASTRA_GBYTE_S_IN_BIT_S
from testbed.core.presets import DIM_ALGORITHM_OF_KIND
from workloads.model import predict
from workloads.training.platform import HOPS

REFERENCE = Path(__file__).parent / "data" / "astra_model_reference.csv"
SCHEDULERS = {"baseline": ("baseline", "fifo"), "themis_fifo": ("themis", "fifo"),
              "themis_scf": ("themis", "scf")}
CHUNKS = 64
ENDPOINT_DELAY_NS = 1
ARTIFACT = ("2d_switch", "3d_switch_homo", "3d_switch_hetero", "3d_fc_ring_switch",
            "4d_ring_switch_switch_switch", "4d_ring_fc_ring_switch")


def dims(spec: str) -> tuple[af.AstraDim, ...]:
    """``"switch:4:40,ring:8:100"`` -> dimensions with 1 ns links."""
    out = []
    for part in spec.split(","):
        kind, size, gbyte_s = part.split(":")
        out.append(af.AstraDim(kind, int(size), float(gbyte_s), 1.0))
    return tuple(out)


FRESH = {
    "f1_8x4_70_35": dims("switch:8:70,switch:4:35"),
    "f2_4x8_30_90": dims("switch:4:30,switch:8:90"),
    "f3_2x4x8_120_60_40": dims("switch:2:120,switch:4:60,switch:8:40"),
    "f4_ring8x8_100_50": dims("ring:8:100,switch:8:50"),
    "f5_ring4_fc4_4_150_75_50": dims("ring:4:150,fully_connected:4:75,switch:4:50"),
    "f6_fc8x16_175_50": dims("fully_connected:8:175,switch:16:50"),
    "f7_2x2x4x8_200_100_100_50": dims("switch:2:200,switch:2:100,switch:4:100,switch:8:50"),
    "f8_16x4_40_40": dims("switch:16:40,switch:4:40"),
}
DEVELOPMENT_CUSTOM = {"dev_4x4_40_20": dims("switch:4:40,switch:4:20")}


def cases(suite: str, inputs: Path | None) -> list[tuple[str, str, int, tuple[af.AstraDim, ...]]]:
    """(suite, network, size in bytes, dimensions) per case."""
    out = []
    if suite in ("development", "all"):
        out += [("development", name, size, d) for name, d in DEVELOPMENT_CUSTOM.items()
                for size in (16 << 20, 256 << 20)]
        if inputs is not None:
            out += [("development", name, size,
                     af.read_network(inputs / "network" / "analytical" / f"{name}.json"))
                    for name in ARTIFACT for size in (4 << 20, 96 << 20)]
    if suite in ("fresh", "all"):
        out += [("fresh", name, size, d) for name, d in FRESH.items()
                for size in (4 << 20, 64 << 20)]
    return out


def model_ns(network: tuple[af.AstraDim, ...], size: int, scheduler: str,
             with_alpha: bool) -> float:
    policy, order = SCHEDULERS[scheduler]
    alpha_s = [(HOPS[d.kind] * d.latency_ns + ENDPOINT_DELAY_NS) * 1e-9 if with_alpha else 0.0
               for d in network]
    return predict([d.size for d in network], [d.gbyte_s * ASTRA_GBYTE_S_IN_BIT_S
                                               for d in network],
                   size, CHUNKS, policy=policy, order=order,
                   dim_algorithm=[DIM_ALGORITHM_OF_KIND[d.kind] for d in network],
                   dim_kinds=[d.kind for d in network], dim_delays_s=alpha_s).time_s * 1e9


def write_case(folder: Path, name: str, network: tuple[af.AstraDim, ...], size: int,
               scheduler: str) -> tuple[Path, Path, Path]:
    """The workload, system and network files AnalyticalAstra reads for one case."""
    w, s, n = (folder / f"ar_{size}.txt", folder / f"{name}_{scheduler}.txt",
               folder / f"{name}.json")
    w.write_text(f"MICRO\n1\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE {size} 5\n")
    policy, order = SCHEDULERS[scheduler]
    algorithms = tuple(DIM_ALGORITHM_OF_KIND[d.kind] for d in network)
    text = af.system_text(af.AstraSystem(CHUNKS, order, policy, algorithms), len(network))
    s.write_text(f"{text}endpoint-delay: {ENDPOINT_DELAY_NS}\nboost-mode: 1\n")
    n.write_text(af.network_json(network))
    return w, s, n


def load_reference() -> dict[tuple[str, int, str], int]:
    if not REFERENCE.exists():
        return {}
    with REFERENCE.open() as f:
        return {(r["network"], int(r["size_bytes"]), r["scheduler"]): int(r["finish_time_ns"])
                for r in csv.DictReader(f)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=("development", "fresh", "all"), default="all")
    parser.add_argument("--inputs", type=Path,
                        help="the artifact's themis/inputs (the development suite's systems)")
    parser.add_argument("--astra", default=os.environ.get("ASTRA_ANALYTICAL"),
                        help="AnalyticalAstra to run (default: the recorded times)")
    parser.add_argument("--record", action="store_true",
                        help=f"write what AnalyticalAstra gave to {REFERENCE.name}")
    args = parser.parse_args()
    recorded = load_reference()
    if args.record and not args.astra:
        raise SystemExit("--record needs --astra (or $ASTRA_ANALYTICAL)")
    rows, ratios = [], {}
    print(f"{'suite':12} {'network':28} {'MiB':>4} {'scheduler':12} {'ASTRA-sim ns':>13} "
          f"{'model':>13} {'ratio':>7} {'model+α':>13} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for suite, name, size, network in cases(args.suite, args.inputs):
            for scheduler in SCHEDULERS:
                if args.astra:
                    w, s, n = write_case(Path(tmp), name, network, size, scheduler)
                    ref_ns = astra(args.astra, w, s, n)[0]
                    rows.append([name, size, scheduler, int(ref_ns), " ".join(
                        command("AnalyticalAstra", Path("WRITTEN", w.name),
                                Path("WRITTEN", s.name), Path("WRITTEN", n.name), "OUTDIR"))])
                elif (name, size, scheduler) in recorded:
                    ref_ns = recorded[(name, size, scheduler)]
                else:
                    continue
                bw, alpha = (model_ns(network, size, scheduler, a) for a in (False, True))
                ratios.setdefault((suite, scheduler), []).append((bw / ref_ns, alpha / ref_ns))
                print(f"{suite:12} {name:28} {size >> 20:>4} {scheduler:12} {ref_ns:>13,.0f} "
                      f"{bw:>13,.0f} {bw / ref_ns:>7.4f} {alpha:>13,.0f} {alpha / ref_ns:>7.4f}",
                      flush=True)
    print("\nmodel ÷ ASTRA-sim, median [min, max] (bandwidth only | with ASTRA-sim's α):")
    for (suite, scheduler), pairs in ratios.items():
        cols = [[p[i] for p in pairs] for i in (0, 1)]
        print(f"{suite:12} {scheduler:12} " + " | ".join(
            f"{statistics.median(c):.4f} [{min(c):.4f}, {max(c):.4f}], within 5%: "
            f"{sum(abs(x - 1) <= 0.05 for x in c)}/{len(c)}" for c in cols))
    if args.record:
        with REFERENCE.open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["network", "size_bytes", "scheduler", "finish_time_ns", "command"])
            out.writerows(rows)
        print(f"written {REFERENCE}")


if __name__ == "__main__":
    main()
