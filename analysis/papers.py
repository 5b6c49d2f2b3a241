"""Paper against ours: what a paper reports for a preset, beside what fabriclab measures.

A registry keyed by preset name (``simulate-cluster --preset NAME``, or any preset a backend
defines): each entry is a list of :class:`PaperFigure`, each able to compute fabriclab's value
from the summaries of the runs made under that preset (one value per seed, so a report gives
the median with its min and max). Pure: summaries in, rows out. Register more with
:func:`register_figures` (e.g. the Themis paper's systems, keyed by their preset names).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from testbed.core.errors import FabricLabError

Summary = Mapping[str, Any]
Measure = Callable[[Sequence[Summary]], list[float]]


@dataclass(frozen=True)
class PaperFigure:
    """One figure a paper reports: ``paper`` in ``unit`` ("%" for a relative change), where
    it comes from, and how fabriclab measures the same thing from its runs (one per seed)."""

    name: str
    paper: float
    unit: str
    source: str
    ours: Measure
    note: str = ""
    per: str = "seed"  # what one value of ``ours`` comes from: a seed, a job size, ...


_FIGURES: dict[str, list[PaperFigure]] = {}


def register_figures(preset: str, figures: Sequence[PaperFigure]) -> None:
    """Add ``figures`` under ``preset`` (appended to any it already has)."""
    if not preset:
        raise FabricLabError("a paper figure needs a preset name to be filed under")
    _FIGURES.setdefault(preset, []).extend(figures)


def figures_for(preset: str) -> list[PaperFigure]:
    """The figures registered under ``preset`` (none: an empty list)."""
    return list(_FIGURES.get(preset, []))


def _by_seed(summaries: Sequence[Summary], policy: str) -> dict[Any, Summary]:
    return {s.get("seed"): s for s in summaries if s.get("policy") == policy}


def relative_change(metric: str, policy: str, baseline: str) -> Measure:
    """Per seed run under both: ``metric`` of ``policy`` against ``baseline``, in %."""
    def measure(summaries: Sequence[Summary]) -> list[float]:
        ours, base = _by_seed(summaries, policy), _by_seed(summaries, baseline)
        out = []
        for seed in sorted(ours.keys() & base.keys(), key=str):
            a, b = ours[seed].get(metric), base[seed].get(metric)
            if isinstance(a, int | float) and isinstance(b, int | float) and b:
                out.append(100.0 * (a / b - 1))
        return out
    return measure


def above_isolated(policy: str) -> Measure:
    """Per run of ``policy``: its average JCT above the average of every job's run time alone
    on an idle cluster (no waiting, no sharing: the optimum), in %."""
    def measure(summaries: Sequence[Summary]) -> list[float]:
        out = []
        for s in _by_seed(summaries, policy).values():
            jct, alone = s.get("avg_jct_s"), s.get("avg_isolated_s")
            if isinstance(jct, int | float) and isinstance(alone, int | float) and alone:
                out.append(100.0 * (jct / alone - 1))
        return out
    return measure


def _fmt(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value:+.1f}%"
    if unit == "x":
        return f"{value:.2f}×"
    return f"{value:.4g} {unit}".strip()


def paper_rows(preset: str, summaries: Sequence[Summary]) -> list[dict[str, str]]:
    """One row per figure of ``preset``: the figure, the paper's value, fabriclab's median
    [min, max] over seeds, the gap (ours − paper, same unit) and the source."""
    rows = []
    for fig in figures_for(preset):
        values = [v for v in fig.ours(summaries) if math.isfinite(v)]
        if values:
            med = statistics.median(values)
            ours = _fmt(med, fig.unit)
            if len(values) > 1:
                ours += f" [{_fmt(min(values), fig.unit)}, {_fmt(max(values), fig.unit)}]"
            ours += f" ({len(values)} {fig.per}{'s' if len(values) > 1 else ''})"
            gap = (f"{med - fig.paper:+.1f} pt" if fig.unit == "%"  # percentage points
                   else f"{med - fig.paper:+.2f}×" if fig.unit == "x"
                   else _fmt(med - fig.paper, fig.unit))
        else:
            ours, gap = "not measured by these runs", "—"
        rows.append({"figure": fig.name, "paper": _fmt(fig.paper, fig.unit), "ours": ours,
                     "gap": gap, "source": fig.source, "note": fig.note})
    return rows


register_figures("vclos-paper", [
    PaperFigure(
        "average job waiting time, OCS-vClos against RapidNetSim's baseline", -66.0, "%",
        "arXiv 2308.05692 via a secondary summary (\"lowers average JWT by about 66%\"); "
        "the baseline is RapidNetSim's static_routing run (static_scheduler_multi_cluster, "
        "labelled \"Source Routing\" in its plots): fabriclab's source-routing",
        relative_change("avg_wait_s", "ocs-vclos", "source-routing")),
    PaperFigure(
        "the largest waiting-time cut any placement can make against that baseline", -66.0, "%",
        "the paper's claim set against the gpu-count bound (docs/vclos-paper.md, \"The bound\")",
        relative_change("avg_wait_s", "gpu-count", "source-routing"),
        "a cut below this is impossible under strict FIFO with run times that do not depend on "
        "placement, as RapidNetSim's (its sharing reset)"),
    PaperFigure(
        "average JCT of OCS-vClos above the optimum", 3.4, "%",
        "arXiv 2308.05692 via a secondary summary (\"within about 3.4% of the optimum\")",
        above_isolated("ocs-vclos"),
        "optimum read as every job's run time alone with no waiting (RapidNetSim's run times "
        "never depend on sharing, so its JCT minus its JRT is all waiting)"),
])


def schedule_gain(order: str) -> Measure:
    """Per job and size that runs of the same preset measured under the ``baseline`` schedule
    and under ``themis`` with ``order``: the baseline's mean time over Themis's (the
    utilisation gain, as the ideal time is the same for both)."""
    def measure(summaries: Sequence[Summary]) -> list[float]:
        def times(algorithm: str, want_order: str | None) -> dict[tuple[str, Any], float]:
            out = {}
            for s in summaries:
                for name, job in (s.get("jobs") or {}).items():
                    if job.get("solo_of") or job.get("algorithm") != algorithm:
                        continue
                    if want_order is not None and job.get("order") != want_order:
                        continue
                    for size, row in (job.get("sizes") or {}).items():
                        t = row.get("collective_s")
                        if isinstance(t, int | float) and t > 0:
                            out[(name, size)] = t
            return out
        base, themis = times("baseline", None), times("themis", order)
        return [base[k] / themis[k] for k in sorted(base.keys() & themis.keys(), key=str)]
    return measure


def _themis_figures() -> None:
    """The Themis paper's averages, filed under each of its six systems' presets: a run of one
    system (scaled down, `preset: NAME`) is set beside the average over all six."""
    from testbed.core.presets import PRESETS

    per_system = "the paper's figure is its mean over six systems and its sizes; ours is one " \
                 "system, scaled down for the emulator, over the run's sizes"
    for name, preset in PRESETS.items():
        paper = {f.key: f for f in preset.paper}
        if "mean_gain_scf" not in paper:
            continue
        fig = paper["mean_gain_scf"]
        register_figures(name, [PaperFigure(fig.label, fig.value, "x", fig.source,
                                            schedule_gain("scf"), per_system,
                                            per="job size")])


_themis_figures()


def paper_sections(summaries: Sequence[Summary]) -> list[dict[str, Any]]:
    """Per preset the runs were made under (with figures registered): its name and rows."""
    presets = sorted({s["preset"] for s in summaries if s.get("preset")})
    out = []
    for preset in presets:
        runs = [s for s in summaries if s.get("preset") == preset]
        if figures_for(preset):
            out.append({"preset": preset, "rows": paper_rows(preset, runs)})
    return out
