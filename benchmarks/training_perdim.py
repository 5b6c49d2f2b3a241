"""Recorded emulated training runs: each dimension's phases, group by group, against the model.

BENCHMARKS.md "Training on the emulator judged on its exposed communication, per dimension".
Reads run directories only (no root, no fabric). For every chunk phase of a measured pass and
every group that ran it (the ranks that differ only on the phase's dimension), from the
ranks' ``phases`` traces: how far apart the members began (``skew``), each member's own span
(``member``: what the worker's per-dimension rule counts), from the last member's start to
the last member's end (``all_in``), from the first start to the last end (``group``) and, in
a group of two, from the later member's start to the earlier member's end (``wire``: the
time the later member's bytes took to arrive, since the earlier one was waiting for them).
Each against the model's time of the same phase (:func:`workloads.training.emulated.plan_pass`
of the run's experiment in ``--spec``, on the hosts the run gave the job: what the workers
plan with), ms, mean over the phases.

It also checks that each rank's ``exposed_dim`` is the rule
(:func:`workloads.training.exposure.exposed_per_dim`) applied to its recorded phases over the
pass's drain (from the end of its backward pass to its end), and says what share of each
dimension's phase time lies in that drain; and, per dimension, how often the sampled shaped
queues (``qdisc_samples``) held data and how much (a TSO segment is up to 64 KiB).

    .venv/bin/python benchmarks/training_perdim.py RUN_DIR [RUN_DIR ...] [--spec SPEC]
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from pathlib import Path

import pandas as pd

from testbed.core.experiment import Experiment, load_experiments
from testbed.core.formulas import TCP_GOODPUT
from testbed.core.jobs import resolve
from testbed.core.topology import build_plan
from testbed.core.traces import read_table
from workloads.hierarchical import Topology
from workloads.training.emulated import plan_pass
from workloads.training.exposure import covered, exposed_per_dim
from workloads.training.jobs import job_platform, job_workload

SPEC = Path(__file__).resolve().parent.parent / "experiments" / "themis-e2e-emulated.yaml"
KEY = ["iteration", "chunk", "phase", "dim", "op", "group_id"]


def model_phase_s(exp: Experiment, run_dir: Path, job: str
                  ) -> tuple[dict[tuple[int, int], float], tuple[int, ...]]:
    """The model's time of each phase of one pass of ``job`` of ``exp`` on the hosts
    ``run_dir`` gave it, by (chunk, phase index), seconds; and the job's dimensions."""
    spec = next(s for s in exp.jobs if s.name == job)
    hosts = next(r["hosts"] for r in json.loads((run_dir / "jobs.json").read_text())
                 if r["name"] == job)
    resolved = resolve(spec, build_plan(exp.fabric, exp.rate_scale), hosts)
    network, system = job_platform(resolved, TCP_GOODPUT)
    p = plan_pass(job_workload(resolved), network, system)
    out = {}
    for (d, _), started in p.sequences.items():  # the replay's spans, in the order started
        for ph, (s, e) in zip(started, p.model.dim_spans[d], strict=True):
            out[(ph.chunk, ph.index)] = float((e - s) / Fraction(10**9))
    return out, tuple(int(n) for n in resolved.dims)


def groups(phases: pd.DataFrame, dims: tuple[int, ...]) -> pd.DataFrame:
    """One row per (pass, chunk phase, group): members, ``skew``, ``member`` (mean of the
    members' spans), ``all_in``, ``group`` and, for two members, ``wire`` (module doc), s."""
    topo = Topology(dims)
    ph = phases.assign(
        group_id=[tuple(-1 if k == d else c for k, c in enumerate(topo.coords(r)))
                  for r, d in zip(phases["rank"], phases["dim"], strict=True)],
        span=phases["end"] - phases["start"])
    g = ph.groupby(KEY).agg(members=("rank", "size"), first=("start", "min"),
                            last=("start", "max"), end=("end", "max"), member=("span", "mean"))
    early_end = ph.sort_values("start").groupby(KEY)["end"].first()
    g["skew"] = g["last"] - g["first"]
    g["all_in"] = g["end"] - g["last"]
    g["group"] = g["end"] - g["first"]
    g["wire"] = (early_end - g["last"]).where(g["members"] == 2)
    return g.reset_index()


def drain_check(iterations: pd.DataFrame, phases: pd.DataFrame, n_dims: int
                ) -> tuple[float, list[float]]:
    """Largest |recorded exposed_dim - the rule on the recorded phases over the drain| (s) and,
    per dimension, the share of its phase time inside the drain."""
    worst, inside, total = 0.0, [0.0] * n_dims, [0.0] * n_dims
    by_pass = phases.groupby(["rank", "iteration"])
    for _, row in iterations.iterrows():
        p = by_pass.get_group((row["rank"], row["iteration"]))
        spans = [list(zip(p[p["dim"] == d]["start"], p[p["dim"] == d]["end"], strict=True))
                 for d in range(n_dims)]
        drain = (row["backward_end"], row["end"])
        got = exposed_per_dim([drain], spans, row["start"], row["end"])
        worst = max(worst, *(abs(a - b) for a, b in zip(got, row["exposed_dim"], strict=True)))
        for d, sp in enumerate(spans):
            inside[d] += covered(drain, sp)
            total[d] += sum(e - s for s, e in sp)
    return worst, [i / t if t else 0.0 for i, t in zip(inside, total, strict=True)]


def backlogs(run_dir: Path) -> dict[int, tuple[float, float, float]]:
    """Per dimension: the share of queue samples holding data, and the median and largest
    backlog then (bytes)."""
    topo = json.loads((run_dir / "topology.json").read_text())
    dim = {f"{lk['a']}:{lk['a_port']}-{lk['b']}:{lk['b_port']}": lk["dim"]
           for lk in topo["links"] if lk.get("dim") is not None}
    q = pd.read_parquet(run_dir / "qdisc_samples.parquet")
    q = q.assign(dim=q["link"].map(dim)).dropna(subset=["dim"])
    out = {}
    for d, g in q.groupby("dim"):
        held = g["backlog_bytes"][g["backlog_bytes"] > 0]
        out[int(d)] = (len(held) / len(g), float(held.median()) if len(held) else 0.0,
                       float(held.max()) if len(held) else 0.0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("runs", type=Path, nargs="+", help="emulated run directories")
    ap.add_argument("--spec", type=Path, default=SPEC, help="the experiments they ran")
    args = ap.parse_args()
    experiments = load_experiments(args.spec)
    rows = []
    for run_dir in args.runs:
        exp = max((e for e in experiments if run_dir.name.endswith(e.name)),
                  key=lambda e: len(e.name), default=None)
        if exp is None:
            raise SystemExit(f"{run_dir}: no experiment of {args.spec} has its name")
        for job_dir in sorted((run_dir / "jobs").iterdir()):
            phases = read_table(job_dir, "phases").to_pandas()
            its = read_table(job_dir, "iterations").to_pandas()
            phases = phases[~phases["warmup"].astype(bool)]
            its = its[~its["warmup"].astype(bool)]
            model, dims = model_phase_s(exp, run_dir, job_dir.name)
            worst, share = drain_check(its, phases, len(dims))
            print(f"{run_dir.name} {job_dir.name}: exposed_dim = the rule on the phases over "
                  f"the drain within {worst:.1e} s; phase time in the drain "
                  + ", ".join(f"dim {d} {s:.3f}" for d, s in enumerate(share)))
            print("  queues holding data: " + "; ".join(
                f"dim {d} {held:.1%} of samples, median {med:.0f} B, max {top:.0f} B"
                for d, (held, med, top) in sorted(backlogs(run_dir).items())))
            g = groups(phases, dims)
            g["model"] = [model[(c, i)] for c, i in zip(g["chunk"], g["phase"], strict=True)]
            g["run"] = run_dir.name.split("-", 2)[-1]
            rows.append(g)
    df = pd.concat(rows)
    cols = ["model", "member", "skew", "all_in", "group", "wire"]
    table = df.groupby(["run", "dim", "op"])[cols].mean() * 1e3
    for c in cols[1:]:
        table[f"{c}/model"] = table[c] / table["model"]
    pd.set_option("display.width", 250)
    print("\nms, mean over the measured passes' chunk phases and groups (÷ the model's time)")
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
