"""`fabriclab simulate-cluster`: a multi-tenant trace on a simulated leaf-spine cluster.

Writes ``DIR/jobs.csv`` (one row per completed job), ``DIR/utilisation.csv`` (busy GPUs over
time) and ``DIR/summary.json`` (averages, percentiles, utilisation, collisions, refusals and the
run's parameters: the trace and what fixes its jobs, the seed, the label), each atomically.
``fabriclab report DIR [DIR ...]`` compares such runs. Every key with a unit names it.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from sdn_app.allocation.ocs import REWIRINGS, rewiring_name
from testbed.cli.progress import progress
from testbed.core.errors import FabricLabError
from testbed.core.out_dir import FORCE_HELP, check_out_dir, clear_out_dir
from testbed.sim.cluster import SIM_PLACEMENTS
from testbed.sim.cluster_run import (
    DEFAULTS,
    cluster_config,
    resolve_preset,
    simulate_run,
    write_run,
)
from testbed.sim.job_plans import ALIASES, RAIL_RING, cluster_collective
from testbed.sim.presets import PRESETS

MAX_LABEL_CHARS = 80
MAX_LOAD = 2.0  # offered ÷ capacity: a little overload is a regime worth seeing, 3× is not


def preset_help() -> str:
    """What each preset sets, for ``--help``: ``vclos-paper: trace vclos-paper, jobs 5000,
    ...; with ecmp, vclos: leaves 128, ...``."""
    parts = []
    for name, (common, per_kind) in PRESETS.items():
        by_params: dict[str, list[str]] = {}
        for kind, params in per_kind.items():
            by_params.setdefault(_settings(params), []).append(kind)
        parts.append(f"{name}: {_settings(common)}; " + "; ".join(
            f"with {', '.join(kinds)}: {text}" for text, kinds in by_params.items()))
    return " ".join(parts)


def _settings(params: dict[str, Any]) -> str:
    return ", ".join(f"--{k.replace('_', '-')} {v:g}" if isinstance(v, float)
                     else f"--{k.replace('_', '-')} {v}" for k, v in params.items())

def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate-cluster",
        description="Admission of a job trace (FIFO, or another --queue discipline) onto a "
        "flow-level simulation of a leaf-spine cluster (one host = one GPU); writes jobs.csv "
        "and summary.json.",
    )
    p.add_argument("--leaves", type=int, default=128, help="leaf switches (default 128)")
    p.add_argument("--spines", type=int, default=64, help="spine switches (default 64)")
    p.add_argument("--hosts-per-leaf", type=int, default=64, help="hosts per leaf (default 64)")
    p.add_argument("--ocs-count", type=int, default=None,
                   help="optical circuit switches for ocs-vclos (default: --spines, so a "
                   "leaf has as many uplinks as in the electrical fabric)")
    p.add_argument("--gpus-per-server", type=int, default=1,
                   help="GPUs per server: a job that crosses leaves takes whole idle servers "
                   "(default 1: any free GPU)")
    p.add_argument("--spine-ports-per-ocs", type=int, default=0,
                   help="ports each spine has on each OCS (default: leaves / OCSes, so a "
                   "spine has as many ports as leaf links in the electrical fabric)")
    p.add_argument("--placement", choices=SIM_PLACEMENTS, default="joint",
                   help="vclos/ocs-vclos: choose hosts and network together (joint, default) "
                   "or hosts first, network-oblivious (hosts-first); trace: the hosts the "
                   "trace records (lingjun:DIR), with ecmp, ecmp-l3 or vclos")
    p.add_argument("--rewiring", type=rewiring_name, choices=list(REWIRINGS),
                   default="augment",
                   help="ocs-vclos: default wiring first, then a per-leaf matching that moves "
                   "default circuits only where it must (augment, default); any idle ports "
                   "(any, what the emulator's controller does); only ports no default "
                   "circuit needs (conservative); or RapidNetSim's GPUPlacemeter3 as "
                   "time-capped HiGHS MILPs, greedy wiring first (milp; formerly exact)")
    p.add_argument("--policy", default="ecmp",
                   help="a leaf-spine routing policy: ecmp (default), ecmp-l3, vclos, "
                   "ocs-vclos, source-routing(-flat) (RapidNetSim's baseline), gpu-count (the "
                   "bound under --queue fifo: GPUs counted, one non-blocking switch) or one "
                   "registered by a plug-in")
    p.add_argument("--queue", default="fifo", metavar="NAME",
                   help="the queue discipline: which waiting job is tried next (the policy's "
                   "allocator decides whether it fits): fifo (default, head-of-line), "
                   "easy-backfill, first-fit, fewest-gpus-first, shortest-job-first, "
                   "smallest-model-first, dynamic-matching, or one registered by a plug-in; "
                   "the gpu-count bound is proved for fifo only (docs/vclos-paper.md)")
    p.add_argument("--trace", default="synthetic",
                   help="synthetic, vclos-paper (the vClos paper's jobs), rapidnetsim:GAP_S "
                   "(RapidNetSim's own 5000 jobs, GAP_S s apart on average, run times that "
                   "ignore the network; rapidnetsim-comm:GAP_S: with their collectives' "
                   "bytes; rapidnetsim-jittered:GAP_S: with the run times RapidNetSim's "
                   "simulator draws), helios:FILE "
                   "(cluster_log.csv), philly:FILE (cluster_job_log JSON), acme:FILE "
                   "(trace_seren.csv, trace_kalos.csv), pai:DIR-or-FILE (PAI 2020 job and task "
                   "tables) or lingjun:DIR (job.csv, worker.csv, topo.csv) (default synthetic)")
    p.add_argument("--jobs", type=int, default=1000,
                   help="jobs to generate, or the first N of a trace file (default 1000)")
    p.add_argument("--load", type=float, default=0.8,
                   help="synthetic offered GPU-time / capacity (default 0.8)")
    p.add_argument("--seed", type=int, default=1, help="RNG seed (trace, ECMP ports)")
    p.add_argument("--link-gbit-s", type=float, default=100.0, metavar="GBIT_S",
                   help="rate of every NIC, leaf-spine link and circuit in Gbit/s (default 100)")
    p.add_argument("--link-gbps", dest="link_gbit_s", type=float, action=_Renamed,
                   const="--link-gbit-s", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument("--host-link-delay-us", type=float, default=0.0, metavar="US",
                   help="one-way propagation delay of every host link in µs; every step of a "
                   "collective pays its longest path's (default 0)")
    p.add_argument("--uplink-delay-us", type=float, default=0.0, metavar="US",
                   help="one-way propagation delay of every link above the leaves (leaf-spine "
                   "or circuit) in µs (default 0)")
    p.add_argument("--rounds", type=int, default=8,
                   help="simulate each job's iterations as at most this many rounds (default 8)")
    p.add_argument("--collective", type=_collective, default="ring",
                   help=f"every job's collective unless its trace names one: {RAIL_RING} (a "
                   "ring in every leaf and one per rail across them) or any registered "
                   "All-Reduce or all-to-all (default ring)")
    p.add_argument("--preset", default="", choices=["", *PRESETS], metavar="NAME",
                   help="a paper's own setup; flags left at their defaults take the preset's "
                   "values. " + preset_help())
    p.add_argument("--label", default=None, metavar="TEXT",
                   help="the run's name in reports (default: policy, placement, rewiring; "
                   f"at most {MAX_LABEL_CHARS} printable characters)")
    p.add_argument("--out", required=True, help="output directory: new or empty; an existing "
                   "non-empty one is refused unless --force")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.set_defaults(func=run)


class _Renamed(argparse.Action):
    """A flag's old name (hidden from --help): still works, and says what replaced it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"warning: {option_string} is deprecated; use {self.const} (same value)",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def _collective(name: str) -> str:
    """``--collective``: a known name; an older spelling still works, and says what it is now."""
    try:
        canonical = cluster_collective(name)
    except FabricLabError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if name in ALIASES:
        print(f"warning: --collective {name} is now called {canonical} (the same collective)",
              file=sys.stderr)
    return canonical


def check_flags(args: argparse.Namespace) -> None:
    """One sentence naming the first bad flag (the cluster's shape: ClusterConfig.check)."""
    if args.jobs < 1:
        raise FabricLabError(f"--jobs is {args.jobs}; it must be at least 1")
    if args.seed < 0:
        raise FabricLabError(f"--seed is {args.seed}; it must be 0 or more")
    if not (math.isfinite(args.load) and 0 < args.load <= MAX_LOAD):
        raise FabricLabError(f"--load is {args.load}; it must be in (0, {MAX_LOAD:g}]: it is "
                             "the offered GPU-time ÷ the cluster's, and above 1 the queue "
                             "only grows, so waiting times measure the trace's length")
    if not (math.isfinite(args.link_gbit_s) and args.link_gbit_s > 0):
        raise FabricLabError(f"--link-gbit-s is {args.link_gbit_s}; it must be a positive "
                             "number")
    for flag in ("host_link_delay_us", "uplink_delay_us"):
        value = getattr(args, flag)
        if not (math.isfinite(value) and value >= 0):
            raise FabricLabError(f"--{flag.replace('_', '-')} is {value}; it must be 0 or "
                                 "more")
    if args.ocs_count is not None and args.ocs_count < 0:
        raise FabricLabError(f"--ocs-count is {args.ocs_count}; it must be at least 0")
    if not args.out.strip():
        raise FabricLabError("--out is empty; name the directory to write the results to")
    check_out_dir(args.out, args.force)
    if args.label is not None:
        check_label(args.label)


def check_label(label: str) -> None:
    """A label is a short line of printable text."""
    text = label.strip()
    if not text:
        raise FabricLabError("--label is empty; give the run a name or leave the flag out")
    bad = next((c for c in text if not c.isprintable()), None)
    if bad is not None:
        raise FabricLabError(f"--label holds the unprintable character {bad!r}; use one line "
                             "of printable text")
    if len(text) > MAX_LABEL_CHARS:
        raise FabricLabError(f"--label is {len(text)} characters long; it must be at most "
                             f"{MAX_LABEL_CHARS}")


def run(args: argparse.Namespace) -> int:
    check_flags(args)
    params = {name: getattr(args, name) for name in DEFAULTS}
    config = cluster_config(params)
    # a bar on a terminal, a line every few seconds in a log: a paper preset takes minutes
    with progress(f"simulating {config.policy}", resolve_preset(params)["jobs"],
                  "jobs, {hours:.1f} h simulated", hours=0.0) as update:
        files = simulate_run(params, args.label and args.label.strip(),
                             lambda done, jobs, now: update(done, jobs, hours=now / 3600))
    out = clear_out_dir(args.out)  # --force: nothing of an earlier run is left beside this one
    write_run(files, out)
    summary = files.summary
    from analysis.cluster import accounting  # pandas: only once the run is done

    queue = f" (queue {summary['queue']})" if summary["queue"] != "fifo" else ""

    print(
        f"{summary['policy']}{queue}: {accounting(summary)}; over those: "
        f"avg JCT {summary['avg_jct_s']:.1f} s, avg wait {summary['avg_wait_s']:.1f} s, "
        f"avg slowdown {summary['avg_slowdown']:.3f}, GPU utilisation "
        f"{summary['gpu_utilisation']:.3f}, collided flows "
        f"{summary['collided_flow_fraction']:.0%} -> {out}"
    )
    print(f"report: fabriclab report {out} [more simulate-cluster directories]")
    return 0
