"""PNG figures of a run (matplotlib, Agg backend). Every function returns the file it wrote,
or ``None`` when the run has no data for that figure (nothing is written then).

Time axes are seconds since the run's first recorded instant (:meth:`Run.t0`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
from matplotlib.patches import Patch, Rectangle

from analysis import metrics
from analysis.cluster import ClusterRun, utilisation_timeline
from analysis.invariants import violations
from analysis.load import Run
from analysis.paths import jobs_on_links, read_paths
from testbed.core.algorithms import is_reference_schedule, is_schedule
from testbed.core.units import format_size

DPI = 100
DIM_COLOURS = plt.get_cmap("tab10").colors
CHUNK_COLOURS = plt.get_cmap("tab20").colors
# ten distinguishable colours, one per run; past ten, the line style tells runs apart too
RUN_COLOURS = plt.get_cmap("tab10").colors
RUN_LINESTYLES = ("-", "--", ":", "-.")
plt.rcParams.update({"font.size": 10, "axes.spines.top": False, "axes.spines.right": False,
                     "axes.titlesize": 11, "axes.titleweight": "bold"})


def run_colour(i: int) -> tuple[float, float, float]:
    """The colour of the ``i``-th run of a figure."""
    return RUN_COLOURS[i % len(RUN_COLOURS)]


def run_style(i: int) -> dict[str, object]:
    """Colour and line style of the ``i``-th run's line: no two of the first 40 alike."""
    return {"color": run_colour(i),
            "ls": RUN_LINESTYLES[(i // len(RUN_COLOURS)) % len(RUN_LINESTYLES)]}


def _visible_ticks(axis: matplotlib.axis.Axis) -> int:
    lo, hi = sorted(axis.get_view_interval())
    return sum(1 for t in axis.get_majorticklocs() if lo <= t <= hi)


def drawn(fig: plt.Figure, runs: Sequence[str] = ()) -> dict:
    """What a figure shows, as :func:`_save` records it in the PNG (``fabriclab`` text
    chunk): the runs it compares, and per axes its title, legend labels and how many major
    ticks each axis shows within its limits."""
    fig.canvas.draw()
    axes = []
    for ax in fig.axes:
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        title = ax.get_title() or ax.get_title(loc="left")
        axes.append({"title": title, "labels": ax.get_legend_handles_labels()[1],
                     "xticks": _visible_ticks(ax.xaxis), "yticks": _visible_ticks(ax.yaxis)})
    return {"runs": list(runs), "axes": axes}


def _save(fig: plt.Figure, path: Path, runs: Sequence[str] = ()) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = json.dumps(drawn(fig, runs), ensure_ascii=False)
    fig.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"fabriclab": record})
    plt.close(fig)
    return path


def read_drawn(path: Path) -> dict:
    """The record :func:`_save` wrote into a PNG."""
    from PIL import Image

    with Image.open(path) as img:
        return json.loads(img.text.get("fabriclab", "{}"))


def _edges(t0: float, t1: float, target: int = 150) -> np.ndarray:
    """Bin edges over [t0, t1]: about ``target`` bins, at least 0.1 s (the sample period)."""
    width = max((t1 - t0) / target, 0.1)
    n = max(int(np.ceil((t1 - t0) / width)), 1)
    return t0 + width * np.arange(n + 1)


def _shade_jobs(ax: plt.Axes, run: Run, t0: float) -> int:
    """Light bands where jobs ran, labelled with the job names (stacked when they overlap)."""
    placed: list[tuple[float, float, int]] = []
    for i, j in enumerate(run.jobs):
        s, e = j.get("start"), j.get("end")
        if not isinstance(s, int | float) or not isinstance(e, int | float):
            continue
        level = 0
        while any(lv == level and s < e2 and s2 < e for s2, e2, lv in placed):
            level += 1
        placed.append((s, e, level))
        ax.axvspan(s - t0, e - t0, color="0.5", alpha=0.06 + 0.05 * (i % 2), lw=0)
        ax.text((s + e) / 2 - t0, 1.02 + 0.08 * level, str(j["name"]),
                transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=8,
                color="0.35", clip_on=False)
    return max((lv for _, _, lv in placed), default=-1) + 1


def dimension_timeline(run: Run, path: Path) -> Path | None:
    """Per-dimension utilisation over time: top, the fraction of time each dimension had a
    chunk phase in flight; bottom, bytes moved ÷ capacity from the phase traces (solid) and
    the utilisation of the dimension's links from the byte counters (dashed), with the
    fidelity violations of any link (:mod:`analysis.invariants`) shaded red."""
    ph = run.phases[~run.phases["warmup"].astype(bool)]
    if ph.empty:
        return None
    t0 = run.t0()
    lo, hi = float(ph["start"].min()), float(ph["end"].max())
    pad = 0.03 * (hi - lo)
    edges = _edges(lo - pad, hi + pad)
    tl = metrics.dimension_timeline(run, edges)
    links = metrics.dimension_link_timeline(run, edges)
    x = tl.index.to_numpy() - t0
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(11, 5.2), sharex=True)
    dims = sorted({d for _, d in tl.columns})
    for d in dims:
        c = DIM_COLOURS[d % 10]
        a1.step(x, tl[("active", d)], where="mid", color=c, lw=1.4, label=f"dim {d}")
        a2.step(x, tl[("bytes", d)], where="mid", color=c, lw=1.4, label=f"dim {d} traces")
        if d in links:
            a2.plot(x, links[d], color=c, lw=1.2, ls="--", label=f"dim {d} links")
    levels = _shade_jobs(a1, run, t0)
    for i, v in enumerate(violations(run.qdisc).itertuples()):  # when a link fell short
        a2.axvspan(v.start - t0, v.end - t0, color="#d62728", alpha=0.18, lw=0,
                   label="link short of its rate" if i == 0 else None)
    top = max(1.05, float(np.nanmax(tl.to_numpy())) * 1.05 if tl.size else 1.05)
    if not links.empty:
        top = max(top, float(np.nanmax(links.to_numpy())) * 1.05)
    for ax in (a1, a2):
        ax.set_ylim(0, top if ax is a2 else 1.05)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    a1.set_ylabel("phase active\n(fraction of time)")
    a2.set_ylabel("bytes ÷ capacity")
    a2.set_xlabel("time since run start (s)")
    a1.set_title("Per-dimension utilisation (measured collectives)", pad=6 + 11 * levels)
    return _save(fig, path, [run.label])


def _gantt_jobs(run: Run) -> list[str]:
    """Jobs to draw: a job under the reference chunk schedule (the baseline) and one under
    another (Themis) when both exist, else up to two with phases."""
    have = set(run.phases["job"].unique())
    algos = {str(j["name"]): j.get("algorithm") for j in run.jobs if j["name"] in have}
    tenants = [n for n in algos if not isinstance(run.job(n).get("solo_of"), str)] or list(algos)
    pick = [next((n for n in tenants if is_reference_schedule(algos[n])), None),
            next((n for n in tenants if is_schedule(algos[n])
                  and not is_reference_schedule(algos[n])), None)]
    pick = [p for p in pick if p]
    return pick if pick else tenants[:2]


def _gantt_axes(ax: plt.Axes, run: Run, job: str, title: str, chunks_seen: set[int]) -> None:
    """One measured collective of ``job`` on rank 0 in ``ax``: a row per dimension, bars
    coloured by chunk and labelled with the operation."""
    ph = run.phases[(run.phases["job"] == job) & (run.phases["rank"] == 0)]
    measured = ph[~ph["warmup"].astype(bool)]
    ph = measured if len(measured) else ph
    coll = ph["coll"].min()
    ph = ph[ph["coll"] == coll]
    co = run.collectives[(run.collectives["job"] == job) & (run.collectives["coll"] == coll)]
    c0 = float(co["start"].min()) if len(co) else float(ph["start"].min())
    total = float(co["time"].max()) if len(co) else float(ph["end"].max()) - c0
    dims = sorted(ph["dim"].unique())
    for r in ph.itertuples():
        x, w = (r.start - c0) * 1e3, (r.end - r.start) * 1e3
        ax.barh(r.dim, w, left=x, height=0.6, color=CHUNK_COLOURS[r.chunk % 20],
                edgecolor="white", lw=0.8)
        if w > 0.06 * total * 1e3:  # label only bars wide enough to hold it
            ax.text(x + w / 2, r.dim, f"{r.op}{r.chunk}", ha="center", va="center",
                    fontsize=7, color="black", clip_on=True)
        chunks_seen.add(int(r.chunk))
    algo = run.job(job).get("algorithm") or ""
    ax.set_title(f"{title}{job} ({algo}): {total * 1e3:.0f} ms", loc="left")
    ax.set_yticks(dims, [f"dim {d}" for d in dims])
    ax.set_ylim(max(dims) + 0.6, min(dims) - 0.6)
    ax.grid(axis="x", alpha=0.3)


def _chunk_legend(fig: plt.Figure, chunks_seen: set[int]) -> None:
    if len(chunks_seen) <= 12:
        handles = [Patch(color=CHUNK_COLOURS[c % 20], label=f"chunk {c}")
                   for c in sorted(chunks_seen)]
        fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 8), fontsize=8,
                   bbox_to_anchor=(0.5, -0.12), frameon=False)


def _has_chunks(run: Run, jobs: Sequence[str]) -> bool:
    return bool(jobs) and run.phases[run.phases["job"].isin(jobs)]["phase"].max() > 0


def gantt(run: Run, path: Path) -> Path | None:
    """Chunk phases of one measured collective on rank 0, one row per dimension, bars coloured
    by chunk and labelled with the operation; baseline and Themis side by side, same scale.
    None when the jobs only ran flat rings (a single AR phase per collective)."""
    jobs = _gantt_jobs(run)
    if not _has_chunks(run, jobs):
        return None  # flat rings only: one AR per collective, no chunk schedule to show
    width = 10 if len(jobs) == 1 else 5.6 * len(jobs)
    fig, axes = plt.subplots(1, len(jobs), figsize=(width, 2.8), sharex=True, squeeze=False)
    chunks_seen: set[int] = set()
    for ax, job in zip(axes[0], jobs, strict=True):
        _gantt_axes(ax, run, job, "", chunks_seen)
        ax.set_xlabel("ms since the collective started (rank 0)")
    _chunk_legend(fig, chunks_seen)
    return _save(fig, path, [run.label])


def gantt_stack(items: Sequence[tuple[str, Run, str]], path: Path) -> Path | None:
    """A headline's chunk schedules stacked on one time axis: one row of panels per
    ``(run label, run, job)``, e.g. baseline above Themis. None without chunk phases."""
    items = [it for it in items if _has_chunks(it[1], [it[2]])]
    if len(items) < 2:
        return None
    fig, axes = plt.subplots(len(items), 1, figsize=(10, 0.7 + 1.9 * len(items)), sharex=True,
                             squeeze=False)
    chunks_seen: set[int] = set()
    for ax, (label, run, job) in zip(axes[:, 0], items, strict=True):
        _gantt_axes(ax, run, job, f"{label} · " if label != job else "", chunks_seen)
    axes[-1, 0].set_xlabel("ms since the collective started (rank 0)")
    _chunk_legend(fig, chunks_seen)
    return _save(fig, path, list(dict.fromkeys(label for label, _, _ in items)))


def busbw_over_size(series: Sequence[tuple[str, Mapping[int, float]]],
                    link_mbit_s: float | None, path: Path) -> Path | None:
    """Bus bandwidth against message size, one line per run of a headline on one axis (sizes
    on a log axis, bandwidth from 0), the host link's rate drawn; None without sizes."""
    series = [(label, pts) for label, pts in series if pts]
    if not series:
        return None
    top = max([v for _, pts in series for v in pts.values()] + [(link_mbit_s or 0) / 1e3])
    scale, unit = _rate_scale(top)
    fig, ax = plt.subplots(figsize=(8, 3.4))
    sizes = sorted({size for _, pts in series for size in pts})
    for i, (label, pts) in enumerate(series):
        xs = sorted(pts)
        ax.plot(xs, [pts[x] * scale for x in xs], marker="o", **run_style(i), label=label,
                lw=1.8, ms=5)
    if link_mbit_s:
        ax.axhline(link_mbit_s / 1e3 * scale, color="0.35", ls="--", lw=1,
                   label=f"host link {link_mbit_s:g} Mbit/s")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [format_size(x) for x in sizes])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    if len(sizes) == 1:
        ax.set_xlim(sizes[0] / 2, sizes[0] * 2)
    ax.set_ylim(0, top * scale * 1.15 or 1)
    ax.set_xlabel("message size")
    ax.set_ylabel(f"busbw ({unit})")
    ax.set_title("Bus bandwidth against message size")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return _save(fig, path, [label for label, _ in series])


def slowdown_bars(series: Sequence[tuple[str, Mapping[str, float]]], path: Path) -> Path | None:
    """Slowdown against running alone per job, one bar per run of a headline; None when no
    run has a slowdown."""
    series = [(label, vals) for label, vals in series if vals]
    if not series:
        return None
    jobs = sorted({j for _, vals in series for j in vals})
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(jobs) + 3), 3.2))
    width = 0.8 / len(series)
    x = np.arange(len(jobs))
    for i, (label, vals) in enumerate(series):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, [vals.get(j, np.nan) for j in jobs],
               width, label=label, color=run_colour(i))
    ax.axhline(1, color="0.35", ls="--", lw=1)
    ax.set_xticks(x, jobs)
    top = max(v for _, vals in series for v in vals.values())
    ax.set_ylim(0, max(top, 1.0) * 1.15)
    ax.set_ylabel("slowdown (× its solo time)")
    ax.set_title("Slowdown per job against running alone (1 = unharmed)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return _save(fig, path, [label for label, _ in series])


def link_heatmap(run: Run, path: Path) -> Path | None:
    """Utilisation of every directed leaf↔spine link (rows; via the OCS on OCS fabrics) in
    time bins (columns): two jobs hashed onto one spine show as one hot row and idle rows.
    Each row is labelled with the jobs whose flows crossed it when all ran together, as the
    spines counted them (``paths.json``; an older or simulated run has no labels)."""
    s = metrics.leaf_spine_samples(run.links, run.topology)
    window = run.window()
    if s.empty or window is None:
        return None
    t0 = run.t0()
    edges = _edges(window[0], window[1], target=120)
    grid = metrics.link_util_bins(s, edges)
    if not grid.size or not np.nanmax(grid.to_numpy()) > 0:
        return None  # no traffic crossed a leaf-spine link (one leaf): nothing to see
    up = [k for k in grid.index if k.startswith("leaf")]
    grid = grid.loc[sorted(up) + sorted(k for k in grid.index if k not in up)]
    vmax = max(1.0, float(np.nanmax(grid.to_numpy())) if grid.size else 1.0)
    fig, ax = plt.subplots(figsize=(11, 1.4 + 0.28 * len(grid)))
    im = ax.imshow(grid.to_numpy(), aspect="auto", cmap="magma", vmin=0, vmax=vmax,
                   interpolation="nearest",
                   extent=(edges[0] - t0, edges[-1] - t0, len(grid) - 0.5, -0.5))
    # each row names the jobs whose flows the spines counted on it (paths.json), if recorded
    crossed = jobs_on_links(read_paths(run.path), run.topology)
    ax.set_yticks(range(len(grid)), [f"{k}  [{', '.join(crossed[k])}]" if k in crossed else k
                                     for k in grid.index], fontsize=8)
    rows = {key: i for i, key in enumerate(grid.index)}
    shown = 0
    for v in violations(run.qdisc).itertuples():  # short of the rate while loaded: boxed
        row = rows.get(f"{v.src}→{v.dst}")
        if row is not None:
            ax.add_patch(Rectangle((v.start - t0, row - 0.45), v.span_s, 0.9, fill=False,
                                   edgecolor="#00e5ff", lw=1.6))
            shown += 1
    ax.set_xlabel("time since run start (s)")
    ax.set_title("Leaf↔spine link utilisation (directed)"
                 + (f"; boxed: {shown} fidelity violation(s)" if shown else ""))
    fig.colorbar(im, ax=ax, label="utilisation", pad=0.01)
    return _save(fig, path, [run.label])


def _cdf(ax: plt.Axes, values: Sequence[float], label: str, index: int,
         markers: bool = True) -> None:
    """The CDF of ``values``, drawn as the ``index``-th run (:func:`run_style`)."""
    x = np.sort(np.asarray(values, dtype=float))
    y = np.arange(1, x.size + 1) / x.size
    ax.step(np.r_[x[0], x], np.r_[0, y], where="post", **run_style(index), lw=1.8, label=label)
    if markers:
        ax.plot(x, y, "o", color=run_colour(index), ms=4)


def jct_cdfs(runs: Sequence[Run], path: Path) -> Path | None:
    """CDFs over the tenant jobs of JCT (left) and slowdown vs solo (right), one line per run;
    None when no run has two tenant jobs to draw a distribution of."""
    panels: dict[str, list[tuple[str, list[float]]]] = {"jct_s": [], "slowdown": []}
    for run in runs:
        jm = metrics.run_jobs(run)
        if jm.empty:
            continue
        jm = jm[[not isinstance(v, str) for v in jm["solo_of"]]]
        for key in panels:
            vals = [float(v) for v in jm[key] if metrics._num(v) is not None]
            if vals:
                panels[key].append((run.label, vals))
    # a CDF of one job is a step, not a distribution: draw a panel when a run has two or more
    present = [k for k, v in panels.items() if any(len(vals) >= 2 for _, vals in v)]
    if not present:
        return None
    fig, axes = plt.subplots(1, len(present), figsize=(5.5 * len(present), 3.4), squeeze=False)
    titles = {"jct_s": ("Job completion time", "JCT (s)"),
              "slowdown": ("Slowdown vs solo baseline", "slowdown (×)")}
    for ax, key in zip(axes[0], present, strict=True):
        for i, (label, vals) in enumerate(panels[key]):
            _cdf(ax, vals, label, i)
        if key == "slowdown":
            ax.axvline(1, color="0.6", lw=1, ls=":")
        _cdf_axes(ax, *titles[key])
    return _save(fig, path, [label for label, _ in panels[present[0]]])


def _cdf_axes(ax: plt.Axes, title: str, xlabel: str) -> None:
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _rate_scale(max_gbit_s: float) -> tuple[float, str]:
    """(factor from Gbit/s, unit) for plotting rates up to ``max_gbit_s``."""
    return (1.0, "Gbit/s") if max_gbit_s >= 1 else (1e3, "Mbit/s")


def size_sweep(runs: Sequence[Run], path: Path) -> Path | None:
    """Time (left) and bus bandwidth (right) against message size, log-log, one line per
    tenant job that ran at least two sizes; None when none did."""
    lines = []
    for run in runs:
        jm = metrics.run_jobs(run)
        if jm.empty:
            continue
        for name, row in jm.iterrows():
            sizes = row["sizes"] or {}
            if isinstance(row["solo_of"], str) or len(sizes) < 2:
                continue
            label = f"{run.label} · {name}" if len(runs) > 1 else str(name)
            pts = sorted((int(s), v["collective_s"], v["busbw_gbit_s"]) for s, v in sizes.items())
            lines.append((label, pts))
    if not lines:
        return None
    top = max((p[2] or 0.0) for _, pts in lines for p in pts)
    scale, unit = _rate_scale(top)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for i, (label, pts) in enumerate(lines):
        size = [p[0] for p in pts]
        axes[0].plot(size, [p[1] for p in pts], marker="o", **run_style(i), label=label)
        axes[1].plot(size, [(p[2] or np.nan) * scale for p in pts], marker="o", **run_style(i),
                     label=label)
    sizes = sorted({p[0] for _, pts in lines for p in pts})
    for ax, ylabel, title in ((axes[0], "time per collective (s)", "Time vs message size"),
                              (axes[1], f"busbw ({unit})", "Bus bandwidth vs message size")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [format_size(x) for x in sizes])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        times = [p[1] for _, pts in lines for p in pts if p[1]]
        if ax is axes[0] and times and max(times) >= 10 * min(times):
            ax.set_yscale("log")  # over decades; within one, a log axis may show no tick
        elif ax is axes[0]:
            ax.set_ylim(0, max(times, default=1) * 1.15)
        else:  # bandwidth is flat across sizes once a link is saturated: linear, from 0
            ax.set_ylim(0, top * scale * 1.15 or 1)
        ax.set_xlabel("message size")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return _save(fig, path, [r.label for r in runs])


# ------------------------------------------------------- simulate-cluster runs


def cluster_cdfs(runs: Sequence[ClusterRun], path: Path) -> Path | None:
    """CDFs over completed jobs of JCT, waiting time and slowdown, one line per cluster run."""
    runs = [r for r in runs if not r.jobs.empty]
    if not runs:
        return None
    panels = [("jct_s", "Job completion time", "JCT (s)", "symlog"),
              ("wait_s", "Waiting time", "wait (s)", "symlog"),
              ("slowdown", "Slowdown vs isolated run", "slowdown (×)", "linear")]
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.6))
    for ax, (key, title, xlabel, scale) in zip(axes, panels, strict=True):
        for i, run in enumerate(runs):
            _cdf(ax, run.jobs[key].astype(float), run.label, i,
                 markers=len(run.jobs) <= 50)
        if scale == "symlog":
            ax.set_xscale("symlog", linthresh=1.0)
        _cdf_axes(ax, title, xlabel)
    return _save(fig, path, [r.label for r in runs])


def cluster_utilisation(runs: Sequence[ClusterRun], path: Path) -> Path | None:
    """Busy GPU fraction over time (hours since the first arrival), one line per run."""
    runs = [r for r in runs if not r.jobs.empty and r.total_gpus]
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(12, 3.4))
    for i, run in enumerate(runs):
        tl = utilisation_timeline(run.jobs.to_dict("records"), run.total_gpus)
        t0 = float(run.jobs["arrival_s"].min())
        ax.step((tl["time_s"] - t0) / 3600, tl["utilisation"], where="post",
                **run_style(i), lw=1.2, label=run.label)
    ax.set_title("GPU utilisation over time")
    ax.set_xlabel("hours since the first arrival")
    ax.set_ylabel("busy GPUs")
    ax.set_ylim(0, 1.05)
    ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path, [r.label for r in runs])
