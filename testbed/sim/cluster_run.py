"""One `simulate-cluster` run, from its parameters to the texts of its files.

:func:`simulate_run` simulates in memory (so a Dask worker can return the texts and the client
alone writes them); :func:`write_run` writes them into a directory, each file atomically.
Both ``fabriclab simulate-cluster`` and ``fabriclab sweep`` use them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.core.atomic import csv_text, write_text
from testbed.core.errors import FabricLabError
from testbed.core.limits import cluster_error
from testbed.sim.cluster import ClusterConfig, simulate_cluster
from testbed.sim.job_plans import cluster_policy
from testbed.sim.peak_memory import peak_rss
from testbed.sim.presets import preset_params
from testbed.sim.trace_loading import load_trace_placement, trace_identity

# simulate-cluster's parameters (its flags, with '_' for '-') and their defaults.
DEFAULTS: dict[str, Any] = {
    "leaves": 128, "spines": 64, "hosts_per_leaf": 64, "ocs_count": None,
    "spine_ports_per_ocs": 0, "placement": "joint", "rewiring": "augment", "policy": "ecmp",
    "trace": "synthetic", "jobs": 1000, "load": 0.8, "seed": 1, "link_gbit_s": 100.0,
    "rounds": 8, "collective": "ring", "preset": "", "gpus_per_server": 1, "queue": "fifo",
    "host_link_delay_us": 0.0, "uplink_delay_us": 0.0,
}
FILES = ("jobs.csv", "utilisation.csv", "summary.json")  # summary.json last: it marks "done"


@dataclass(frozen=True)
class RunFiles:
    """What a run writes: each file's name and text, and the summary they hold."""

    summary: dict[str, Any]
    texts: dict[str, str]


def resolve_preset(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` over the defaults, with its ``preset`` (if any) filling every parameter
    left at its default (:mod:`testbed.sim.presets`)."""
    p = {**DEFAULTS, **params}
    if p["preset"]:
        kind = cluster_policy(p["policy"]).allocates_as
        for key, value in preset_params(p["preset"], kind).items():
            if p[key] == DEFAULTS[key]:
                p[key] = value
    return p


def cluster_config(params: Mapping[str, Any]) -> ClusterConfig:
    """The checked :class:`ClusterConfig` of ``params`` (simulate-cluster's names)."""
    p = resolve_preset(params)
    if problem := cluster_error(p):
        raise FabricLabError(problem)
    ocs = p["ocs_count"] if p["ocs_count"] is not None else (
        p["spines"] if cluster_policy(p["policy"]).allocates_as == "ocs-vclos" else 0)
    config = ClusterConfig(
        leaves=p["leaves"], spines=p["spines"], hosts_per_leaf=p["hosts_per_leaf"],
        policy=p["policy"], ocs_count=ocs, spine_ports_per_ocs=p["spine_ports_per_ocs"],
        placement=p["placement"], rewiring=p["rewiring"], link_bps=p["link_gbit_s"] * 1e9,
        rounds=p["rounds"], seed=p["seed"], collective=p["collective"],
        gpus_per_server=p["gpus_per_server"], queue=p["queue"],
        host_link_delay_s=p["host_link_delay_us"] * 1e-6,
        uplink_delay_s=p["uplink_delay_us"] * 1e-6,
    )
    config.check()
    return config


def simulate_run(params: Mapping[str, Any], label: str | None = None,
                 progress: Callable[[int, int, float], None] | None = None) -> RunFiles:
    """Simulate the run ``params`` describes; nothing is written. The summary adds this
    process's RSS when the run began and its peak during it (:mod:`testbed.sim.peak_memory`)."""
    p = resolve_preset(params)
    config = cluster_config(p)
    from analysis.cluster import utilisation_timeline  # pandas: only when it runs

    with peak_rss() as rss:  # the trace, the simulation and the tables' texts
        jobs, placement = load_trace_placement(p["trace"], p["jobs"], p["load"],
                                               config.total_gpus, p["seed"], config.link_bps)
        result = simulate_cluster(jobs, config, progress, placement)
        columns = list(result.rows[0]) if result.rows else ["job_id"]
        texts = {"jobs.csv": csv_text(result.rows, columns),
                 "utilisation.csv": utilisation_timeline(
                     result.rows, config.total_gpus).to_csv(index=False)}
    summary = {**result.summary, **trace_identity(p["trace"], p["load"]),
               "jobs_requested": p["jobs"], "label": label, "preset": p["preset"] or None,
               **rss.fields()}
    return RunFiles(summary, {**texts, "summary.json": json_text(summary)})


def write_run(files: RunFiles, out: Path) -> None:
    """Write ``files`` into ``out`` (made if missing), each atomically, summary.json last."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FabricLabError(f"cannot write results to {out}: {exc.strerror}") from None
    for name in FILES:
        write_text(out / name, files.texts[name])


def json_text(data: dict[str, Any]) -> str:
    """JSON with NaN written as null."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
             for k, v in data.items()}
    return json.dumps(clean, indent=2, sort_keys=True)
