"""Render runs into ``report.html`` (self-contained: figures embedded as data URIs) and
``report.md`` (tables, with the PNG figures written beside it).

A report leads with its headlines (:mod:`analysis.compare`): one sentence with its number per
comparison the runs allow (routing policies, chunk schedules, transports on the same fabric
and jobs), each with a table over every message size. Several runs then get a table with one
column per run; every run gets its sections. A run whose fidelity verdict is not ``faithful``
gets a red banner with the reasons at the very top. Sections without data are left out.

A run emulated at a ``rate_scale`` (:mod:`testbed.core.scaling`) says so near the top, with an
example of its rates, and every time and rate the scale converts shows the real-rate figure
beside the emulated one (:func:`dual`); an unscaled run's report is unchanged.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from analysis import compare, figures, latency, metrics
from analysis.astra_reference import system_of
from analysis.cluster import (
    comparison_rows,
    is_cluster_dir,
    jobs_warning,
    load_cluster,
    run_rows,
    trace_warning,
)
from analysis.impairments import run_note
from analysis.invariant import record_summary
from analysis.limits import host_rate_mbit_s, rate_flag
from analysis.load import Run, load_run
from analysis.papers import paper_sections
from analysis.servers import server_note
from analysis.training import e2e_section, emulated_vs_simulated
from testbed.core.atomic import write_text
from testbed.core.errors import FabricLabError
from testbed.core.registry import INVARIANTS, RegistryError
from testbed.core.scaling import UNSCALED, real_key, real_rate
from testbed.core.units import format_size

TEMPLATES = Path(__file__).parent / "templates"
WIDE_RUNS = 8  # a comparison of more runs than this has one row per run, not one column
SECTIONS = {  # id: heading
    "summary": "Summary",
    "sizes": "Every message size",
    "dimensions": "Per-dimension utilisation",
    "gantt": "Chunk schedule (Gantt)",
    "heatmap": "Leaf-spine link heatmap",
    "jct": "Job completion time and slowdown",
    "calibration": "Calibration",
    "fidelity": "Fidelity",
}

# Why a simulated busbw can exceed the host's links (workloads/training/collectives.py).
SIMULATED_ABOVE_RATE = (
    "⚠ A simulated all-to-all's busbw can exceed the host's links, as here: the simulator "
    "replays it as ASTRA-sim 1.0's analytical backend does (direct: each dimension sends its "
    "n−1 messages of S/n bytes at once, each at a full link's rate), so a dimension's phase "
    "takes S/n ÷ the link rate and algbw = S/t reaches n× a link. The figure is that model's, "
    "not a measurement error")


# ---------------------------------------------------------------- formatting

def _n(x: Any) -> float | None:
    return metrics._num(x)


def _word(x: Any) -> str:
    """A label, or — where there is none (None, or pandas' NaN for a missing one)."""
    return str(x) if isinstance(x, str) and x else "—"


def fmt_time(x: Any) -> str:
    v = _n(x)
    if v is None:
        return "—"
    ms = v * 1e3
    return f"{ms:.3g} ms" if abs(ms) < 999.5 else f"{v:.3g} s" if abs(v) < 99.95 else f"{v:.0f} s"


def fmt_pct(x: Any) -> str:
    v = _n(x)
    return "—" if v is None else f"{v * 100:.0f}%"


def fmt_rate(gbit_s: Any) -> str:
    """A rate given in Gbit/s, shown in Mbit/s below 1 Gbit/s (the emulated links' range)."""
    v = _n(gbit_s)
    if v is None:
        return "—"
    return f"{v * 1e3:.1f} Mbit/s" if v < 1 else f"{v:.2f} Gbit/s"


def _flag(busbw_gbit_s: Any, limit_mbit_s: float | None) -> str:
    """:func:`~analysis.limits.rate_flag` in the unit :func:`fmt_rate` shows the busbw in."""
    v = _n(busbw_gbit_s)
    return rate_flag(v, limit_mbit_s, "Mbit/s" if v is not None and v < 1 else "Gbit/s")


def fmt_mbit_s(mbit_s: float) -> str:
    """A link rate given in Mbit/s, with the prefix that suits it: 100 Mbit/s, 100 Gbit/s."""
    for prefix, scale in (("T", 1e6), ("G", 1e3)):
        if mbit_s > scale:  # 1000 Mbit/s, the emulated links' top, stays in Mbit/s
            return f"{mbit_s / scale:g} {prefix}bit/s"
    return f"{mbit_s:g} Mbit/s"


def dual(fmt: Any, emulated: Any, real: Any) -> str:
    """``fmt(emulated)``, with ``fmt(real)`` beside it when the real-rate figure differs
    (the run was scaled): ``80 ms (80 µs real)``."""
    text = fmt(emulated)
    if _missing(real) or _missing(emulated) or real == emulated:
        return text
    return f"{text} ({fmt(real)} real)"


def _missing(figure: Any) -> bool:
    """No number: None or NaN, or a tuple of figures with one such."""
    parts = figure if isinstance(figure, tuple) else (figure,)
    return any(_n(p) is None for p in parts)


def _scale_note(run: Run) -> str | None:
    """The sentence stating a scaled run's factor, with its fastest link as the example."""
    scale = run.rate_scale
    if scale == UNSCALED:
        return None
    rates = [_n(lk.get("mbit_s")) for lk in run.topology.get("links") or []]
    rates += [_n(lk.get("configured_mbit_s")) for lk in (run.calibration or {}).get("links") or []]
    top = max((r for r in rates if r is not None), default=None)
    example = (f": emulated {fmt_mbit_s(top)} stands for {fmt_mbit_s(real_rate(top, scale))}"
               if top is not None else "")
    return (f"Rates scaled ×{scale:g} (rate_scale){example}. Figures are emulated, with the "
            "real-rate figure beside them (times × the factor, bandwidths ÷ it); DNN iteration "
            "times and JCTs include compute, which does not scale, and the plots are emulated")


def fmt_bytes(x: Any) -> str:
    """Sizes as :func:`testbed.core.units.format_size` writes them (2 MiB, 1.50 MiB)."""
    v = _n(x)
    return "—" if v is None else format_size(v, sep=" ")


def fmt_x(x: Any, digits: int = 2) -> str:
    v = _n(x)
    return "—" if v is None else f"{v:.{digits}f}×"


def fmt_num(x: Any, digits: int = 3) -> str:
    v = _n(x)
    return "—" if v is None else f"{v:.{digits}f}"


def _list(x: Any) -> str:
    return ", ".join(str(v) for v in x) if x else "—"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


# ---------------------------------------------------------------- context

def _fidelity(run: Run) -> dict[str, Any]:
    f = run.fidelity
    if not f:
        return {"state": "unknown", "verdict": "no fidelity record", "shown": "no fidelity record",
                "cls": "amber", "evidence": "—", "reasons": [],
                "notes": [], "cpu": "—", "links": [], "calibration": None, "judged": "—",
                "violations": []}
    links = []
    scale = run.rate_scale
    for lk in f.get("links") or []:
        conf, peak = _n(lk.get("configured_mbit_s")), _n(lk.get("peak_mbit_s"))
        links.append({"src": lk.get("src"), "dst": lk.get("dst"),
                      "configured": _mbit(conf, scale, "{:.0f}"),
                      "peak": _mbit(peak, scale, "{:.1f}"),
                      "ratio": fmt_pct(peak / conf) if conf and peak is not None else "—",
                      "_r": peak / conf if conf and peak is not None else -1})
    links.sort(key=lambda r: -r["_r"])
    verdict = str(f.get("verdict") or "unknown")
    # a simulated run has no emulation to distrust: it is a model, labelled as such
    state = {"faithful": "ok", "simulated": "simulated", "loopback": "loopback"}.get(verdict,
                                                                                   "bad")
    inv = f.get("invariants") or {}
    loaded_s = _n(inv.get("loaded_s")) or 0.0
    shown, cls = {"ok": ("faithful", "ok"), "simulated": ("simulated", "sim"),
                  "loopback": ("loopback", "amber"), "bad": ("not faithful", "bad")}[state]
    if state == "ok" and inv.get("judged") and loaded_s == 0:
        shown, cls = "not judged", "amber"  # no link was ever loaded: no evidence either way
    return {"state": state, "verdict": verdict, "shown": shown, "cls": cls,
            "evidence": (f"{loaded_s:.1f} s of loaded links" if inv.get("judged") else
                         "CPU headroom only (no qdisc samples)" if state == "ok" else "—"),
            "reasons": [str(r) for r in f.get("reasons") or []],
            "notes": [str(n) for n in f.get("notes") or []],
            "cpu": (f"min {fmt_pct(f.get('cpu_idle_min'))}, mean {fmt_pct(f.get('cpu_idle_mean'))}"
                    if _n(f.get("cpu_idle_mean")) is not None else "—"),
            "links": links[:12], "more_links": max(len(links) - 12, 0),
            "calibration": f.get("calibration"),
            "judged": (f"the link invariant, over {_n(inv.get('loaded_s')) or 0:.1f} s in "
                       "which a link's queue would have kept it busy" if inv.get("judged") else
                       "CPU headroom (this run has no qdisc samples)" if state != "simulated"
                       else "—") + _pipeline_judged(f),
            "violations": [{"link": f"{v.get('src')}→{v.get('dst')}",
                            "periods": str(v.get("periods")), "seconds": fmt_time(v.get("seconds")),
                            "worst": fmt_pct(v.get("worst_ratio")),
                            "at": fmt_time(v.get("worst_at_s")),
                            "shortfall": fmt_bytes(v.get("shortfall_bytes"))}
                           for v in inv.get("violations") or []]}


def _pipeline_judged(f: dict[str, Any]) -> str:
    """'; the scheduler invariant ...' : what else judged the run, in each registered
    invariant's words (:meth:`analysis.invariant.Invariant.summary`; the link invariant's are
    this section's first), then any ``registered`` record of an invariant no longer installed
    (fidelity.json from before an invariant has nothing of it)."""
    parts, said_by = [], set()
    for name in INVARIANTS.names():
        try:
            said = INVARIANTS.get(name).summary(f)
        except RegistryError:  # a plug-in that cannot be loaded here: its record below
            continue
        said_by.add(name)
        parts += [said] if said else []
    parts += [record_summary(name, rec) for name, rec in (f.get("registered") or {}).items()
              if name not in said_by]
    return "; " + "; ".join(parts) if parts else ""


def _mbit(mbit_s: float | None, scale: float, form: str = "{:.1f}") -> str:
    """A rate in a Mbit/s column, its real rate beside it when the run was scaled."""
    def fmt(v: Any) -> str:
        return "—" if _n(v) is None else form.format(_n(v))

    return dual(fmt, mbit_s, real_rate(mbit_s, scale))


def _calibration(run: Run) -> dict[str, Any] | None:
    """The calibration section: every link's expected and achieved rate, worst first."""
    c = run.calibration
    if not c:
        return None
    links = sorted(c.get("links") or [], key=lambda lk: abs((_n(lk.get("ratio")) or 0) - 1),
                   reverse=True)
    return {"verdict": c.get("verdict") or "—", "rounds": c.get("rounds"),
            "round_s": fmt_time(c.get("round_s")),
            "aggregate": fmt_pct(c.get("aggregate_ratio")),
            "goodput": fmt_pct(c.get("iperf_goodput_ratio")),
            "links": [{"src": lk.get("src"), "dst": lk.get("dst"),
                       **{k: _mbit(_n(lk.get(f"{k}_mbit_s")), run.rate_scale)
                          for k in ("configured", "expected", "achieved")},
                       "ratio": fmt_pct(lk.get("ratio"))} for lk in links]}


def _job_rows(jm, topology: dict[str, Any]) -> list[dict[str, str]]:
    rows = []
    for name, r in jm.iterrows():
        limit = host_rate_mbit_s(topology, r["hosts"] or [])
        dnn = r["workload"] in metrics.ITERATION_KINDS
        rows.append({
            "job": name, "hosts": str(len(r["hosts"])) if r["hosts"] else "—",
            "policy": r["policy"] or "—", "paths": _list(r["spines"] or r["circuits"]),
            "algorithm": _word(r["algorithm"]), "transport": _word(r["transport"]),
            "workload": r["workload"] + (f" {fmt_bytes(r['size_bytes'])}"
                                         if not dnn and _n(r["size_bytes"]) else ""),
            "iterations": str(r["iterations"]), "mean": _both(fmt_time, r, "mean_s"),
            "p50p99": (dual(lambda p: f"{fmt_time(p[0])} / {fmt_time(p[1])}",
                            (r["p50_s"], r["p99_s"]), (r["p50_real_s"], r["p99_real_s"]))
                       if _n(r["p50_s"]) is not None else "—"),
            "algbw": _both(fmt_rate, r, "algbw_gbit_s"),
            "busbw": _both(fmt_rate, r, "busbw_gbit_s") + _flag(r["busbw_gbit_s"], limit),
            "jct": fmt_time(r["jct_s"]), "slowdown": fmt_x(r["slowdown"]),
            "exposed": _exposed(r["exposed_comm_s"], r["mean_s"]),
            "status": str(r["status"] or "—") + ("" if r["correct"] is not False
                                                  else " (wrong result)"),
            "solo": f"solo baseline of {r['solo_of']}" if isinstance(r["solo_of"], str) else "",
        })
    return rows


def _exposed(exposed_s: Any, iteration_s: Any) -> str:
    """``1.4 ms (29%)``: a job's exposed communication and its share of the iteration."""
    exposed, iteration = _n(exposed_s), _n(iteration_s)
    if exposed is None:
        return "—"
    return fmt_time(exposed) + (f" ({fmt_pct(exposed / iteration)})" if iteration else "")


def _both(fmt: Any, figures: Any, key: str) -> str:
    """:func:`dual` of the figure ``key`` of a summary row and its ``*_real_*`` counterpart."""
    return dual(fmt, figures[key], figures[real_key(key)])


# (key, header, left-aligned) of the job table; a column empty for every job is left out
JOB_COLUMNS = [
    ("hosts", "hosts", False), ("policy", "policy", True), ("paths", "spines / circuits", True),
    ("algorithm", "algorithm", True), ("transport", "transport", True),
    ("workload", "workload", True), ("iterations", "iters", False), ("mean", "mean", False),
    ("p50p99", "p50 / p99", False), ("algbw", "algbw", False),
    ("busbw", "busbw", False), ("jct", "JCT", False), ("slowdown", "slowdown", False),
    ("exposed", "exposed comm (share of iteration)", False),
    ("status", "status", True),
]


def _job_columns(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [{"key": k, "header": h, "left": left} for k, h, left in JOB_COLUMNS
            if k == "status" or any(r[k] != "—" for r in rows)]


def _figure(path: Path | None) -> dict[str, str] | None:
    if path is None:
        return None
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return {"file": path.name, "uri": f"data:image/png;base64,{data}"}


def _run_context(run: Run, out: Path, prefix: str, recompute: bool = False) -> dict[str, Any]:
    # the numbers the run wrote (summary.json), or recomputed from its files when asked (or
    # when it wrote none): the same function made both, so they agree
    if run.summary is None or recompute:
        run.summary = metrics.summarise(run)
    summary = run.summary
    jm = metrics.jobs_frame(summary)
    bw = metrics.dim_bandwidths(run)
    dims = [{"dim": d, "rate": dual(lambda v: fmt_mbit_s(v / 1e6), bw[int(d)],
                                    real_rate(bw[int(d)], run.rate_scale)) if int(d) in bw else "—",
             "active": fmt_pct(v.get("active_fraction")), "bytes": fmt_pct(v.get("bytes_util")),
             "links": fmt_pct(v.get("link_util"))}
            for d, v in summary["dimensions"].items()]
    spec_kind = (run.topology.get("spec") or run.spec.get("fabric") or {}).get("kind")
    if spec_kind != "multidim":
        dims = []  # a leaf-spine fabric's "dimension 0" is its host links: nothing to add
    ls = metrics.leaf_spine_samples(run.links, run.topology)
    ls_util = metrics.link_utilisation(ls, run.window()) if len(ls) else None
    ls_rows = []
    if ls_util is not None and (ls_util["peak_util"] > 0).any():  # one leaf: none carry any
        for r in ls_util.sort_values("peak_util", ascending=False).itertuples():
            ls_rows.append({"key": r.key, "mean": fmt_pct(r.mean_util),
                            "peak": fmt_pct(r.peak_util)})
    figs = {
        "dimensions": (figures.dimension_timeline(run, out / f"{prefix}dimensions.png")
                       if dims else None),
        "gantt": figures.gantt(run, out / f"{prefix}gantt.png"),
        "heatmap": figures.link_heatmap(run, out / f"{prefix}heatmap.png"),
        "jct": figures.jct_cdfs([run], out / f"{prefix}jct.png"),
        "sizes": figures.size_sweep([run], out / f"{prefix}sizes.png"),
    }
    jct_rows = []
    if not jm.empty:
        for name, r in jm.iterrows():
            if isinstance(r["solo_of"], str):
                continue
            solo = jm[jm["solo_of"] == name]
            jct_rows.append({"job": name, "jct": fmt_time(r["jct_s"]),
                             "mean": _both(fmt_time, r, "mean_s"),
                             "solo": solo.index[0] if len(solo) else "—",
                             "solo_mean": (_both(fmt_time, solo.iloc[0], "mean_s") if len(solo)
                                           else "—"),
                             "slowdown": fmt_x(r["slowdown"])})
    if len(jct_rows) < 2 and all(r["slowdown"] == "—" for r in jct_rows):
        jct_rows = []  # one job without a solo baseline: its JCT is in the summary already
    job_rows = _job_rows(jm, run.topology) if not jm.empty else []
    sp = summary["speedup"]
    speed_rows = [{"baseline": p["baseline"], "themis": p["themis"],
                   "baseline_s": _both(fmt_time, p, "baseline_s"),
                   "themis_s": _both(fmt_time, p, "themis_s"),
                   "speedup": fmt_x(p["speedup"])} for p in (sp or {}).get("pairs", [])]
    spec_fabric = run.topology.get("kind") or (run.spec.get("fabric") or {}).get("kind") or "—"
    fidelity = _fidelity(run)
    facts = compare.facts(run, summary, fidelity["state"])
    size_rows = _size_rows(jm, run.topology)
    flagged = any("⚠" in r["busbw"] for r in [*job_rows, *size_rows])
    return {
        "facts": facts, "run_headlines": compare.run_headlines(facts, summary["speedup"]),
        "size_rows": size_rows,
        "run": run, "label": run.label, "name": run.name, "path": str(run.path),
        "scale_note": _scale_note(run), "link_note": run_note(summary),
        "server_note": server_note(summary),
        "summary": summary, "fabric": spec_fabric, "status": summary["status"],
        "fidelity": fidelity, "jobs": job_rows, "calibration": _calibration(run),
        "job_columns": _job_columns(job_rows),
        "dims": dims, "ls_rows": ls_rows, "jct_rows": jct_rows, "speed_rows": speed_rows,
        "fairness": fmt_num(summary["fairness"]), "fairness_basis": summary["fairness_basis"],
        "figures": {k: _figure(v) for k, v in figs.items()},
        "notes": [*run.notes, *([SIMULATED_ABOVE_RATE]
                                if flagged and fidelity["state"] == "simulated" else [])],
        "log_lines": len(run.controller_log.splitlines()) if run.controller_log else None,
    }


def _size_rows(jm, topology: dict[str, Any]) -> list[dict[str, str]]:
    """Every (job, size) of a run whose jobs ran more than one size; [] otherwise."""
    if jm.empty or all(len(r["sizes"] or {}) < 2 for _, r in jm.iterrows()):
        return []
    rows = []
    for name, r in jm.iterrows():
        limit = host_rate_mbit_s(topology, r["hosts"] or [])
        for size, v in sorted((r["sizes"] or {}).items(), key=lambda kv: int(kv[0])):
            rows.append({"job": name, "solo": isinstance(r["solo_of"], str),
                         "size": fmt_bytes(int(size)), "iterations": str(v["iterations"]),
                         "time": _both(fmt_time, v, "collective_s"),
                         "algbw": _both(fmt_rate, v, "algbw_gbit_s"),
                         "busbw": _both(fmt_rate, v, "busbw_gbit_s")
                         + _flag(v.get("busbw_gbit_s"), limit)})
    return rows


def _headline_context(h: compare.Headline, ctxs: dict[str, dict[str, Any]], out: Path,
                      index: int) -> dict[str, Any]:
    """A headline for the templates, with the figure that compares exactly its runs."""
    return {"title": h.title, "sentence": h.sentence, "ref": h.ref, "other": h.other,
            "caveats": h.caveats, "rows_note": h.rows_note, "runs": sorted({h.ref, h.other}),
            "figure": _figure(_headline_figure(h, ctxs, out / f"fig-headline-{index}.png")),
            "rows": [{"job": r["job"], "size": fmt_bytes(r["size_bytes"]),
                      "ref": _both(fmt_time, r, "ref_s"), "other": _both(fmt_time, r, "other_s"),
                      "speedup": fmt_x(r["speedup"])} for r in h.rows]}


def _headline_figure(h: compare.Headline, ctxs: dict[str, dict[str, Any]], path: Path
                     ) -> Path | None:
    """Busbw over size (transports), slowdown per job (routing, contention) or the chunk
    schedules stacked on one time axis (schedules), of the headline's runs only."""
    ref, other = ctxs[h.ref], ctxs[h.other]
    pair = [ref] if h.ref == h.other else [ref, other]
    if h.kind == "transport" and h.rows:
        jobs = sorted({r["job"] for r in h.rows})
        series = [(c["label"] + ("" if len(jobs) == 1 else f" · {j}"),
                   {int(size): v["busbw_gbit_s"]
                    for size, v in (c["facts"].jobs[j].get("sizes") or {}).items()
                    if _n(v.get("busbw_gbit_s")) is not None})
                  for c in pair for j in jobs]
        return figures.busbw_over_size(series, h.link_mbit_s, path)
    if h.kind in ("policy", "contention"):
        return figures.slowdown_bars(
            [(c["label"], {j: float(v["slowdown"]) for j, v in c["facts"].jobs.items()
                           if _n(v.get("slowdown")) is not None}) for c in pair], path)
    if h.kind == "schedule":
        jobs = sorted(set(ref["facts"].model_s) & set(other["facts"].model_s)
                      or set(ref["facts"].jobs) & set(other["facts"].jobs))
        return figures.gantt_stack([(c["label"], c["run"], j) for c in pair for j in jobs[:1]],
                                   path)
    if h.kind == "pair" and h.jobs:
        return figures.gantt_stack([(ref["label"], ref["run"], j) for j in h.jobs], path)
    return None


def _comparison(ctxs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of key metrics, one cell per run."""
    def tenants(c):
        return {k: v for k, v in c["summary"]["jobs"].items() if not v.get("solo_of")}

    def col(fn):
        return [fn(c) for c in ctxs]

    def tenant_mean(c, key):
        """The tenants' mean of ``key`` and, if every tenant has one, of its real figure."""
        jobs = tenants(c).values()
        reals = [j.get(real_key(key)) for j in jobs]
        return {key: metrics.mean_of(j[key] for j in jobs),
                real_key(key): metrics.mean_of(reals) if None not in reals else None}

    def uniq(c, key):
        vals = sorted({str(j.get(key)) for j in tenants(c).values() if j.get(key) is not None})
        return ", ".join(vals) or "—"

    rows = [
        ("Fabric", col(lambda c: c["fabric"])),
        ("Policy", col(lambda c: uniq(c, "policy"))),
        ("Algorithm", col(lambda c: uniq(c, "algorithm"))),
        ("Transport", col(lambda c: uniq(c, "transport"))),
        ("Jobs (tenants)", col(lambda c: str(len(tenants(c))))),
        ("Status", col(lambda c: c["status"])),
        ("Fidelity", col(lambda c: c["fidelity"]["verdict"])),
        ("Mean iteration time", col(lambda c: _both(fmt_time, tenant_mean(c, "mean_s"),
                                                    "mean_s"))),
        ("Mean busbw", col(lambda c: _both(fmt_rate, tenant_mean(c, "busbw_gbit_s"),
                                           "busbw_gbit_s"))),
        ("Mean JCT", col(lambda c: fmt_time(metrics.mean_of(
            [j["jct_s"] for j in tenants(c).values()])))),
        ("Mean slowdown", col(lambda c: fmt_x(metrics.mean_of(
            [j["slowdown"] for j in tenants(c).values()])))),
        ("Worst slowdown", col(lambda c: fmt_x(max(
            [j["slowdown"] for j in tenants(c).values() if j["slowdown"]], default=None)))),
        ("Jain fairness", col(lambda c: c["fairness"])),
        ("Themis speedup", col(lambda c: fmt_x((c["summary"]["speedup"] or {}).get("mean")))),
        ("Leaf-spine mean util (busiest link)", col(lambda c: max(
            (r["mean"] for r in c["ls_rows"]), default="—", key=_pct_key))),
        ("Leaf-spine peak util (busiest link)", col(lambda c: c["ls_rows"][0]["peak"]
                                                    if c["ls_rows"] else "—")),
    ]
    dims = sorted({d for c in ctxs if c["dims"] for d in c["summary"]["dimensions"]}, key=int)
    for d in dims:
        rows.append((f"Dim {d} active / bytes util", col(
            lambda c, d=d: " / ".join(
                fmt_pct(c["summary"]["dimensions"].get(d, {}).get(k))
                for k in ("active_fraction", "bytes_util")) if c["dims"] else "—")))
    # a row no run has a value for says nothing
    return [{"metric": m, "cells": cells} for m, cells in rows
            if any(c not in ("—", "— / —") for c in cells)]


def _pct_key(s: str) -> float:
    return float(s.rstrip("%")) if s.endswith("%") else -1.0


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",),
                                            default_for_string=False),
        trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
    )
    env.filters["md"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    return env


def default_out(run_dirs: Sequence[str | Path]) -> Path:
    """One run: the run directory; several: ``comparison/`` inside the first one."""
    first = Path(run_dirs[0])
    return first if len(run_dirs) == 1 else first / "comparison"


def _out_dir(run_dirs: Sequence[str | Path], out_dir: str | Path | None) -> Path:
    out = Path(out_dir) if out_dir is not None else default_out(run_dirs)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FabricLabError(f"cannot create the report directory {out}: {exc}") from None
    return out


def _unique_labels(runs: Sequence[Any]) -> None:
    """Make labels unique so table columns and figure names do not collide."""
    seen: dict[str, int] = {}
    for r in runs:
        n = seen.get(r.label, 0)
        seen[r.label] = n + 1
        if n:
            r.label = f"{r.label} ({n + 1})"


def _cluster_cell(value: Any, kind: str) -> str:
    if kind == "text":
        return "—" if value is None else str(value)
    if kind == "time":
        return fmt_time(value)
    if kind == "times":
        return " / ".join(fmt_time(v) for v in value)
    if kind == "pct":
        return fmt_pct(value)
    if kind == "x":
        return fmt_x(value, 3)
    if kind == "slowdown":
        return f"{fmt_x(value[0], 3)} ({fmt_x(value[1])})"
    return " / ".join("—" if v is None else str(v) for v in value)  # "pair" of counts


def write_cluster_report(run_dirs: Sequence[str | Path], out_dir: str | Path | None = None
                         ) -> Path:
    """``report.html`` / ``report.md`` comparing simulate-cluster directories: each run's trace
    (with a warning when the runs did not simulate the same jobs), a summary table, CDFs of
    JCT, waiting time and slowdown, and GPU utilisation over time."""
    runs = [load_cluster(p) for p in run_dirs]
    _unique_labels(runs)
    out = _out_dir(run_dirs, out_dir)
    ctx = {
        "title": "fabriclab cluster report: " + " vs ".join(r.label for r in runs),
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": runs,
        "run_rows": run_rows(runs),
        "trace_warning": trace_warning([r.summary for r in runs]),
        "jobs_warning": jobs_warning(runs),
        "rows": [{"metric": m, "cells": [_cluster_cell(v, kind) for v in values]}
                 for m, values, kind in comparison_rows(runs)],
        "cdfs": _figure(figures.cluster_cdfs(runs, out / "fig-cluster-cdfs.png")),
        "utilisation": _figure(figures.cluster_utilisation(
            runs, out / "fig-cluster-utilisation.png")),
        "papers": paper_sections([r.summary for r in runs]),
    }
    env = _env()
    html = out / "report.html"
    write_text(html, env.get_template("cluster_report.html.j2").render(**ctx))
    write_text(out / "report.md", env.get_template("cluster_report.md.j2").render(**ctx))
    return html


def write_report(run_dirs: Sequence[str | Path], out_dir: str | Path | None = None,
                 name: str | None = None, recompute: bool = False) -> Path:
    """Write ``report.html`` and ``report.md`` (and the figures) for ``run_dirs`` into
    ``out_dir`` (default :func:`default_out`); returns the HTML report's path. The numbers
    are each run's ``summary.json``; ``recompute`` summarises the run's files again instead.
    simulate-cluster directories get :func:`write_cluster_report` instead."""
    return build_report(run_dirs, out_dir, name, recompute)[0]


def build_report(run_dirs: Sequence[str | Path], out_dir: str | Path | None = None,
                 name: str | None = None, recompute: bool = False
                 ) -> tuple[Path, list[compare.Headline]]:
    """:func:`write_report`, also returning the headlines (``fabriclab run`` ends with them).
    ``name``: the experiment's, for the title (default: the runs' labels)."""
    if not run_dirs:
        raise FabricLabError("give at least one run directory to report on")
    cluster = [is_cluster_dir(p) for p in run_dirs]
    if any(cluster):
        if not all(cluster):
            raise FabricLabError("report on simulate-cluster directories or on experiment run "
                                 "directories, not both at once")
        return write_cluster_report(run_dirs, out_dir), []
    runs = [load_run(p) for p in run_dirs]
    _unique_labels(runs)
    out = _out_dir(run_dirs, out_dir)
    multi = len(runs) > 1
    ctxs = [_run_context(r, out, f"fig-{_slug(r.label)}-" if multi else "fig-", recompute)
            for r in runs]
    heads = (compare.headlines([c["facts"] for c in ctxs]) if multi
             else ctxs[0]["run_headlines"]) + latency.headlines(runs)
    by_label = {c["label"]: c for c in ctxs}
    ctx = {
        "title": "fabriclab report: " + (name or _common_name([r.label for r in runs])),
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": ctxs, "multi": multi, "comparison": _comparison(ctxs) if multi else None,
        "wide_runs": WIDE_RUNS,
        "sections": SECTIONS,
        "headlines": [_headline_context(h, by_label, out, i) for i, h in enumerate(heads, 1)],
        "papers": paper_sections([c["summary"] for c in ctxs]),
        "training": _training_context([{**c["summary"],
                                        "system": system_of(c["run"].spec.get("fabric"))}
                                       for c in ctxs]),
        "backends": _backends_context([c["summary"] for c in ctxs]),
        "simulated": [c["label"] for c in ctxs if c["fidelity"]["state"] == "simulated"],
        "scale_notes": _scale_notes(ctxs),
        "link_notes": _notes_by_text(ctxs, "link_note"),
        "server_notes": _notes_by_text(ctxs, "server_note"),
    }
    env = _env()
    html = out / "report.html"
    write_text(html, env.get_template("report.html.j2").render(**ctx))
    write_text(out / "report.md", env.get_template("report.md.j2").render(**ctx))
    return html, heads


def _training_context(summaries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The training section (analysis.training), its numbers formatted: ``lead``, the
    paper's table (per workload, its mean over the systems and each system: ours, ASTRA-sim's
    recorded figure, the paper's) with the sentence that answers it, and the detail rows."""
    section = e2e_section(summaries)
    if section is None:
        return None
    rows = [{
        "fabric": r["fabric"], "workload": r["workload"], "baseline": fmt_time(r["baseline_s"]),
        "fifo": fmt_time(r["themis-fifo_s"]), "scf": fmt_time(r["themis-scf_s"]),
        "gain_fifo": fmt_x(r["gain_fifo"], 3), "gain_scf": fmt_x(r["gain_scf"], 3),
        "exposed": fmt_time(r["exposed_comm_s"]),
        "by_dim": ", ".join(f"d{d} {fmt_time(t)}" for d, t in enumerate(r["exposed_dim_s"]))
        if r["exposed_dim_s"] else "—",
        "ceiling": fmt_x(r["ceiling"], 3)} for r in section["rows"]]
    return {"rows": rows, "lead": _lead_rows(section), "answer": _lead_answer(section)}


def _backends_context(summaries: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Per training job run on both backends (analysis.training.emulated_vs_simulated): the
    emulated run's pass and exposed communication (in all and per dimension) beside the
    simulated run's, and measured ÷ simulated of each, formatted."""
    def by_dim(times: Any) -> str:
        return ", ".join(f"d{d} {fmt_time(t)}" for d, t in enumerate(times)) if times else "—"

    return [{
        "run": r["label"], "verdict": r["verdict"] or "—", "job": r["job"],
        "workload": r["workload"], "schedule": f"{r['algorithm']}+{r['order']}",
        "pass": fmt_time(r["emulated"].get("mean_s")),
        "pass_sim": fmt_time(r["simulated"].get("mean_s")), "pass_x": fmt_x(r["pass"], 3),
        "exposed": fmt_time(r["emulated"].get("exposed_comm_s")),
        "exposed_sim": fmt_time(r["simulated"].get("exposed_comm_s")),
        "exposed_x": fmt_x(r["exposed"], 3),
        "by_dim": by_dim(r["emulated"].get("exposed_dim_s")),
        "by_dim_sim": by_dim(r["simulated"].get("exposed_dim_s")),
        "by_dim_x": ", ".join(f"d{d} {fmt_x(x, 3)}" for d, x in enumerate(r["exposed_dim"]))
        if r["exposed_dim"] else "—"} for r in emulated_vs_simulated(summaries)]


def _lead_rows(section: dict[str, Any]) -> list[dict[str, Any]]:
    """Per workload its mean row (``mean``: True), then one row per system."""
    out = []
    for g in section["gains"]:
        mine = [r for r in section["rows"] if r["workload"] == g["workload"]]
        paper = fmt_x(g["paper"]) + (f" ({fmt_x(g['paper_arxiv'])} arXiv)"
                                     if g["paper_arxiv"] else "")
        out.append({"mean": True, "workload": g["workload"],
                    "system": f"mean of {g['systems']}", "baseline": "", "baseline_astra": "",
                    "fifo": fmt_x(g["gain_fifo"], 3), "fifo_astra": fmt_x(g["astra_gain_fifo"], 3),
                    "scf": fmt_x(g["gain_scf"], 3), "scf_astra": fmt_x(g["astra_gain_scf"], 3),
                    "paper": paper if g["paper"] else "—", "ceiling": fmt_x(g["ceiling"], 3),
                    "note": g["note"]})
        out += [{"mean": False, "workload": r["workload"], "system": r["system"] or r["fabric"],
                 "baseline": fmt_time(r["baseline_s"]),
                 "baseline_astra": fmt_time(r["astra_baseline_s"]),
                 "fifo": fmt_x(r["gain_fifo"], 3), "fifo_astra": fmt_x(r["astra_gain_fifo"], 3),
                 "scf": fmt_x(r["gain_scf"], 3), "scf_astra": fmt_x(r["astra_gain_scf"], 3),
                 "paper": "", "ceiling": fmt_x(r["ceiling"], 3), "note": ""} for r in mine]
    return out


def _lead_answer(section: dict[str, Any]) -> str:
    """The table's answer in one paragraph: ours against ASTRA-sim (iteration times and
    gains) and the paper's figures against the ceiling no schedule can pass."""
    parts = []
    ratios = [r[f"{k}_s"] / r[f"astra_{k}_s"] for r in section["rows"]
              for k in ("baseline", "themis-fifo", "themis-scf")
              if _n(r.get(f"{k}_s")) and _n(r.get(f"astra_{k}_s"))]
    if ratios:
        gaps = [abs(g[f"gain_{k}"] - g[f"astra_gain_{k}"]) for g in section["gains"]
                for k in ("fifo", "scf") if _n(g[f"gain_{k}"]) and _n(g[f"astra_gain_{k}"])]
        parts.append(f"Iteration times, ours ÷ ASTRA-sim 1.0's recorded ones on the same inputs, "
                     f"over {len(ratios)} cases: median {statistics.median(ratios):.4f} "
                     f"[{min(ratios):.4f}, {max(ratios):.4f}]"
                     + (f"; mean gains within {max(gaps):.3f} of ASTRA-sim's" if gaps else ""))
    else:
        parts.append("No ASTRA-sim figure is recorded for these systems and workloads "
                     "(benchmarks/data/astra_e2e_reference.csv holds the Themis artifact's)")
    papers = [g for g in section["gains"] if _n(g["paper"]) and _n(g["ceiling"])]
    above = [g["workload"] + (f" ({g['note']})" if g["note"] else "")
             for g in papers if g["paper"] > g["ceiling"]]
    if papers:
        parts.append(f"the paper's Themis+SCF gain is above the ceiling (the gain were every "
                     f"exposed communication hidden) for {len(above)} of {len(papers)} "
                     "workloads" + (f" ({', '.join(above)})" if above else ""))
    return "; ".join(parts) + "."


def _common_name(labels: list[str]) -> str:
    """The experiment several runs' labels share (``demo`` of ``demo-ecmp``, ``demo-vclos``),
    else the labels themselves."""
    words = [label.split("-") for label in labels]
    common = []
    for parts in zip(*words, strict=False):
        if len(set(parts)) > 1:
            break
        common.append(parts[0])
    prefix = "-".join(common) if len(labels) > 1 else ""
    return prefix if len(prefix) >= 2 else " vs ".join(labels)


def _scale_notes(ctxs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each distinct rate-scale note once, with the runs it is about."""
    return _notes_by_text(ctxs, "scale_note")


def _notes_by_text(ctxs: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Each distinct note ``key`` of the runs once, with the runs it is about."""
    notes: dict[str, list[str]] = {}
    for c in ctxs:
        if c[key]:
            notes.setdefault(c[key], []).append(c["label"])
    return [{"text": text, "runs": labels} for text, labels in notes.items()]
