"""The example inputs ``fabriclab examples`` writes, so that every ``simulate-astra`` and
``file:`` line in the docs runs from files fabriclab makes itself:

- ``themis-*.txt``: each built-in Themis artifact workload as ASTRA-sim 1.0 workload text
  (:func:`workloads.training.astra_text.format_workload`; it reads back to the same workload);
- ``chakra/allreduce-8npus-1MiB/trace.{0..7}.et``: astra-sim's All-Reduce microbenchmark, one
  Chakra file per rank (:func:`workloads.training.chakra_examples.all_reduce_trace`);
- ``chakra/training/trace.{0..7}.et``: the multi-layer data-parallel training trace
  (:func:`workloads.training.chakra_examples.training_trace`);
- ``chakra/network.yml`` and ``chakra/system.txt``: the 8-NPU ring both traces replay on
  (50 GB/s, ring All-Reduce, 4 chunks).
"""

from __future__ import annotations

from pathlib import Path

from testbed.core.astra_formats import AstraDim, AstraSystem, network_yaml, system_text
from testbed.core.atomic import write_bytes, write_text
from testbed.core.registry import TRAINING_WORKLOADS
from workloads.training.astra_text import format_workload
from workloads.training.chakra_examples import all_reduce_trace, training_trace

CHAKRA_NPUS = 8
CHAKRA_AR_MIB = 1
CHAKRA_RING = AstraDim("ring", CHAKRA_NPUS, 50.0)
CHAKRA_SYSTEM = AstraSystem(chunks=4, order="fifo", policy="baseline", dim_algorithms=("ring",))


def builtin_texts() -> dict[str, str]:
    """File name -> ASTRA-sim 1.0 text of each built-in Themis artifact workload."""
    return {f"{name}.txt": format_workload(TRAINING_WORKLOADS.get(name).load())
            for name in TRAINING_WORKLOADS.names() if name.startswith("themis-")}


def write_examples(folder: Path) -> list[Path]:
    """Write every example into ``folder`` (made if missing); the paths written."""
    chakra = folder / "chakra"
    ar = chakra / f"allreduce-{CHAKRA_NPUS}npus-{CHAKRA_AR_MIB}MiB"
    training = chakra / "training"
    for d in (ar, training):
        d.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in builtin_texts().items():
        write_text(folder / name, text)
        written.append(folder / name)
    for rank in range(CHAKRA_NPUS):
        write_bytes(ar / f"trace.{rank}.et", all_reduce_trace(CHAKRA_NPUS, CHAKRA_AR_MIB, rank))
        write_bytes(training / f"trace.{rank}.et", training_trace())
        written += [ar / f"trace.{rank}.et", training / f"trace.{rank}.et"]
    write_text(chakra / "network.yml", network_yaml([CHAKRA_RING]))
    write_text(chakra / "system.txt", system_text(CHAKRA_SYSTEM, 1))
    return [*written, chakra / "network.yml", chakra / "system.txt"]
