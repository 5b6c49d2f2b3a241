"""The six systems of the Themis paper (Rashidi et al., ISCA 2022) as presets, with the paper's
figures as data.

A preset is a multidim fabric at the paper's real rates (GB/s per NPU per dimension) and the
collective each dimension runs there (ASTRA-sim's: halving-doubling on a switch, ring on a
ring, direct on a fully connected dimension), 64 chunks. It is chosen by name in
``fabriclab model``/``plan`` (``--preset``), in the simulator
(:func:`testbed.sim.collectives.themis_allreduce` with :meth:`Preset.model_args`) and, scaled
down, in any experiment or fabric file (``preset: NAME`` in place of ``fabric:``; see
:meth:`Preset.emulated`).

Scaling down for the emulator (2 cores): the largest dimension is halved (the last of equal
ones first) until at most :data:`EMULATED_HOSTS` hosts remain, no dimension below 2; every
rate keeps its real value and ``rate_scale`` is set so the fastest dimension's host
bandwidth is emulated at :data:`EMULATED_TOP_MBIT_S` (``testbed.core.scaling``): the ratios
between dimensions, which is what Themis balances, stay the paper's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from testbed.core.astra_units import ASTRA_GBYTE_S_IN_BIT_S
from testbed.core.errors import SpecError
from testbed.core.spec import DimsShape

PAPER_CHUNKS = 64  # the paper's preferred-dataset-splits
# What 2 cores emulate (README: ~1 Gbit/s forwarded in total; 16-host fabrics run faithfully).
EMULATED_HOSTS = 16
EMULATED_TOP_MBIT_S = 100.0
# The collective ASTRA-sim runs on each kind of dimension in the paper's systems.
DIM_ALGORITHM_OF_KIND = {"switch": "halving-doubling", "ring": "ring",
                         "fully_connected": "direct"}
# ASTRA-sim's topology names for fabriclab's dimension kinds.
ASTRA_TOPOLOGY = {"switch": "Switch", "ring": "Ring", "fully_connected": "FullyConnected"}


@dataclass(frozen=True)
class PresetDim:
    size: int
    kind: str  # switch | ring | fully_connected
    gbyte_s: float  # per NPU, as the paper's table gives it (ASTRA-sim's GB/s: 2**30 bytes/s)

    @property
    def mbit_s(self) -> float:
        return self.bit_s / 1e6  # one rounding: 100 GB/s is 858993.4592 Mbit/s

    @property
    def bit_s(self) -> float:
        return self.gbyte_s * ASTRA_GBYTE_S_IN_BIT_S


@dataclass(frozen=True)
class PaperFigure:
    """One figure the paper reports, to set beside ours (``key`` names our counterpart)."""

    key: str
    label: str
    value: float
    unit: str  # "x" (a ratio) or "%" (a utilisation, in percent)
    source: str


PAPER_SOURCE = "Rashidi et al., Themis, ISCA 2022 (averages over its six systems)"
PAPER_FIGURES: tuple[PaperFigure, ...] = (
    PaperFigure("mean_gain_scf", "Themis+SCF utilisation gain over baseline, mean", 1.72,
                "x", PAPER_SOURCE),
    PaperFigure("max_gain_scf", "Themis+SCF utilisation gain over baseline, max", 2.70,
                "x", PAPER_SOURCE),
    PaperFigure("mean_util_baseline", "mean bandwidth utilisation, baseline", 56.31, "%",
                PAPER_SOURCE),
    PaperFigure("mean_util_themis_fifo", "mean bandwidth utilisation, Themis+FIFO", 87.67, "%",
                PAPER_SOURCE),
    PaperFigure("mean_util_themis_scf", "mean bandwidth utilisation, Themis+SCF", 95.14, "%",
                PAPER_SOURCE),
)
# The arXiv v1 (2110.04478) gave other averages for the same gain; the ISCA figures above rule.
ARXIV_V1_FIGURES = {"mean_gain_scf": 1.88, "max_gain_scf": 2.92}


@dataclass(frozen=True)
class E2eGain:
    """The paper's end-to-end training gain of Themis+SCF over the baseline for one of its
    workloads (the artifact's, by their built-in names), in the camera-ready and in the arXiv
    abstract (None: not given there)."""

    workload: str
    camera_ready: float
    arxiv: float | None
    note: str = ""


E2E_GAINS: dict[str, E2eGain] = {g.workload: g for g in (
    E2eGain("themis-resnet50", 1.49, None,
            "the paper's figure is ResNet-152; the artifact ships ResNet-50"),
    E2eGain("themis-gnmt", 1.30, 1.41),
    E2eGain("themis-dlrm-medium", 1.30, 1.42, "the paper gives one DLRM figure"),
    E2eGain("themis-dlrm-large", 1.30, 1.42, "the paper gives one DLRM figure"),
    E2eGain("themis-transformer-1t", 1.25, 1.35),
)}


@dataclass(frozen=True)
class Preset(DimsShape):
    name: str
    title: str
    dims: tuple[PresetDim, ...]
    chunks: int = PAPER_CHUNKS
    paper: tuple[PaperFigure, ...] = PAPER_FIGURES

    @property
    def bandwidths_bps(self) -> tuple[float, ...]:
        return tuple(d.bit_s for d in self.dims)

    @property
    def dim_algorithms(self) -> tuple[str, ...]:
        return tuple(DIM_ALGORITHM_OF_KIND[k] for k in self.kinds)

    @property
    def shape(self) -> str:
        return "x".join(map(str, self.sizes))

    def model_args(self) -> dict[str, Any]:
        """Keyword arguments of :func:`workloads.model.predict` and
        :func:`testbed.sim.collectives.themis_allreduce` (besides size and policy)."""
        return {"dim_sizes": self.sizes, "dim_bandwidths_bps": self.bandwidths_bps,
                "chunks": self.chunks, "dim_algorithm": list(self.dim_algorithms),
                "dim_kinds": list(self.kinds)}

    def fabric(self) -> dict[str, Any]:
        """The ``fabric:`` block at full size and the paper's real rates (Mbit/s)."""
        return {"kind": "multidim",
                "dims": [{"size": d.size, "mbit_s": d.mbit_s, "kind": d.kind} for d in self.dims]}

    def emulated(self, hosts: int = EMULATED_HOSTS,
                 top_mbit_s: float = EMULATED_TOP_MBIT_S) -> tuple[dict[str, Any], float]:
        """``(fabric block, rate_scale)`` scaled down to what 2 cores emulate (module doc)."""
        sizes = scaled_sizes(self.sizes, hosts)
        dims = [{"size": n, "mbit_s": d.mbit_s, "kind": d.kind}
                for n, d in zip(sizes, self.dims, strict=True)]
        return ({"kind": "multidim", "dims": dims},
                emulation_scale(max(d.mbit_s for d in self.dims), top_mbit_s))


def scaled_sizes(sizes: tuple[int, ...] | list[int], hosts: int = EMULATED_HOSTS) -> list[int]:
    """``sizes`` with the largest dimension halved (the last of equal ones first) until at
    most ``hosts`` hosts remain or every dimension is down to 2."""
    out = list(sizes)
    while math.prod(out) > hosts and max(out) > 2:
        d = max(i for i, n in enumerate(out) if n == max(out))
        out[d] //= 2
    return out


def emulation_scale(top_real_mbit_s: float, top_mbit_s: float = EMULATED_TOP_MBIT_S) -> float:
    """The ``rate_scale`` that emulates ``top_real_mbit_s`` at ``top_mbit_s`` (never above 1),
    to 12 digits: ASTRA-sim's rates are multiples of 8589.934592 Mbit/s, and a shorter scale
    would leave the scaled rates off their exact ratios (250:200:100:50 GB/s as 100:80:40:20
    Mbit/s), which moves the Themis greedy's ties between equally loaded dimensions."""
    return min(1.0, float(f"{top_mbit_s / top_real_mbit_s:.12g}"))


def _p(name: str, title: str, *dims: tuple[int, str, float]) -> Preset:
    return Preset(name, title, tuple(PresetDim(*d) for d in dims))


PRESETS: dict[str, Preset] = {p.name: p for p in (
    _p("2d-switch", "2D switch", (16, "switch", 150), (64, "switch", 100)),
    _p("3d-switch-homo", "3D switch, homogeneous", (16, "switch", 100), (8, "switch", 100),
       (8, "switch", 100)),
    _p("3d-switch-hetero", "3D switch, heterogeneous", (16, "switch", 200), (8, "switch", 100),
       (8, "switch", 50)),
    _p("3d-fc-ring-switch", "3D FC-Ring-Switch", (8, "fully_connected", 175), (16, "ring", 100),
       (8, "switch", 50)),
    _p("4d-ring-switch-switch-switch", "4D Ring-Switch-Switch-Switch", (4, "ring", 250),
       (4, "switch", 200), (8, "switch", 100), (8, "switch", 50)),
    _p("4d-ring-fc-ring-switch", "4D Ring-FC-Ring-Switch", (4, "ring", 375),
       (8, "fully_connected", 175), (4, "ring", 150), (8, "switch", 100)),
)}


def get(name: str, source: str = "--preset") -> Preset:
    """The preset called ``name``, or one sentence listing the names."""
    if name not in PRESETS:
        raise SpecError(f"{source}: {name!r} is not a preset; choose one of "
                        f"{', '.join(PRESETS)}")
    return PRESETS[name]


def expand_preset(data: Any, source: str = "spec", keep_name: bool = False) -> Any:
    """A spec mapping with ``preset: NAME`` replaced by that preset's scaled-down ``fabric``
    and its ``rate_scale`` (a preset fixes both, so giving either beside it is a mistake);
    with ``keep_name`` the ``preset`` key stays (an experiment records it, for its report's
    paper-against-ours table)."""
    if not isinstance(data, dict) or data.get("preset") is None:
        return data  # no preset (or `preset: null`, as a dumped experiment says it)
    name = data["preset"]
    if not isinstance(name, str):
        raise SpecError(f"{source}: preset must be a name, one of {', '.join(PRESETS)}")
    clash = [k for k in ("fabric", "rate_scale") if k in data]
    if clash:
        raise SpecError(f"{source}: preset {name} sets the fabric and its rate_scale, so "
                        f"{clash[0]} cannot be given beside it")
    fabric, scale = get(name, f"{source}: preset").emulated()
    out = {k: v for k, v in data.items() if k != "preset" or keep_name}
    out.update(fabric=fabric, rate_scale=scale)
    return out
