"""What ASTRA-sim 1.0 recorded for the Themis artifact's end-to-end cases, and which of the
paper's systems a run's fabric is, so that a report can set ours beside both.

The finish times are ``benchmarks/data/astra_e2e_reference.csv`` (AnalyticalAstra on the
artifact's inputs, ``benchmarks/astra_e2e.py --record``); a checkout without it gets no
ASTRA-sim column. A fabric is one of the paper's systems (:data:`testbed.core.presets.PRESETS`)
when it has the system's dimension sizes and kinds and its rates in the same proportions:
proportions, not values, so that the unit a file states GB/s in does not decide it.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed.core.presets import PRESETS

REFERENCE = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / \
    "astra_e2e_reference.csv"
#: fabriclab's built-in training workloads (``model``) by the artifact's file names.
ASTRA_WORKLOADS = {"themis-resnet50": "Resnet50_DataParallel_fused",
                   "themis-gnmt": "gnmt_fp16_fused",
                   "themis-dlrm-medium": "medium_DLRM_fused",
                   "themis-dlrm-large": "large_DLRM_fused",
                   "themis-transformer-1t": "transformer_1t_fused_only_t"}
#: the artifact's scheduler names by the schedules of :data:`analysis.training.SCHEDULES`.
ASTRA_SCHEDULERS = {"baseline": "baseline", "themis-fifo": "themis_fifo",
                    "themis-scf": "themis_scf"}
RATE_TOLERANCE = 0.01  # proportions of rates equal within 1%


def system_of(fabric: Any) -> str | None:
    """The preset name of the paper's system ``fabric`` (a spec's ``fabric:`` block) is at
    full size, or None."""
    if not isinstance(fabric, Mapping) or fabric.get("kind") != "multidim":
        return None
    dims = [d for d in fabric.get("dims") or [] if isinstance(d, Mapping)]
    for name, preset in PRESETS.items():
        if len(dims) != len(preset.dims):
            continue
        if any(int(d.get("size") or 0) != p.size or (d.get("kind") or "switch") != p.kind
               for d, p in zip(dims, preset.dims, strict=True)):
            continue
        ratios = [float(d.get("mbit_s") or 0) / p.mbit_s
                  for d, p in zip(dims, preset.dims, strict=True)]
        if ratios[0] > 0 and all(abs(r / ratios[0] - 1) <= RATE_TOLERANCE for r in ratios):
            return name
    return None


def astra_network(system: str) -> str:
    """The artifact's network file name of a preset: ``2d-switch`` -> ``2d_switch``."""
    return system.replace("-", "_")


@functools.cache
def _load(path: Path) -> dict[tuple[str, str, str], float]:
    if not path.is_file():
        return {}
    with path.open(newline="") as f:
        return {(r["network"], r["workload"], r["scheduler"]): float(r["finish_time_ns"]) / 1e9
                for r in csv.DictReader(f)}


def astra_finish_s(system: str | None, model: str | None, schedule: str,
                   path: Path = REFERENCE) -> float | None:
    """ASTRA-sim 1.0's recorded finish time (s) of ``model`` on ``system`` under ``schedule``
    (``baseline``, ``themis-fifo``, ``themis-scf``), or None when it recorded none."""
    scheduler = ASTRA_SCHEDULERS.get(schedule)
    workload = ASTRA_WORKLOADS.get(str(model))
    if system is None or scheduler is None or workload is None:
        return None
    return _load(path).get((astra_network(system), workload, scheduler))
