"""Job by job against RapidNetSim; BENCHMARKS.md "RapidNetSim's own code on the same job list".

fabriclab against RapidNetSim's own run, job by job, on the same job list.

    nice -n 10 .venv/bin/python benchmarks/rapidnetsim_compare.py RNS_JOBS_CSV
        [--policy source-routing] [--gap 241] [--rewiring milp] [--gpus-per-server 4]
        [--run-times own|rapidnetsim|jittered] [--out side_by_side.csv]

``RNS_JOBS_CSV``: the ``jobs.csv`` that ``scripts/rapidnetsim_reference.py`` writes for one run
(job, gpus, arrival_s, start_s, finish_s from RapidNetSim's task_time.log). fabriclab runs the
same first N jobs (N: the rows of that file) of ``--trace rapidnetsim:GAP`` with ``--policy``
on the paper's shapes (``--preset vclos-paper``). ``--run-times rapidnetsim`` gives each job
RapidNetSim's measured run time (finish - start) instead of the job list's own, so what is left
of the difference is admission (placement, queue) alone; ``--run-times jittered`` runs the
trace ``rapidnetsim-jittered:GAP`` (the run times RapidNetSim's simulator draws,
``testbed.sim.traces.rapidnetsim_drawn_run_s``) and says how many of RapidNetSim's measured
run times it draws.

Prints both average JWT and JCT over the jobs RapidNetSim finished, how far the run times
differ, and the first job (in arrival order) whose start differs by more than ``--tol-s``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
from collections import Counter

from testbed.sim.cluster import simulate_cluster
from testbed.sim.cluster_run import cluster_config
from testbed.sim.trace_loading import load_trace


def read_reference(path: str) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [{k: (float(v) if v not in ("", None) else None) for k, v in r.items()} for r in rows]


def fabriclab_rows(policy: str, trace: str, jobs: int, rewiring: str, gpus_per_server: int,
                   run_times: dict[int, float] | None) -> dict[int, dict]:
    config = cluster_config({"preset": "vclos-paper", "policy": policy, "rewiring": rewiring,
                             "gpus_per_server": gpus_per_server})
    specs = load_trace(trace, jobs, 0.8, 8192, 1)
    if run_times is not None:
        specs = [dataclasses.replace(s, compute_s=run_times.get(i, s.compute_s))
                 for i, s in enumerate(specs)]
    result = simulate_cluster(specs, config)
    own = {s.job_id: s.compute_s for s in specs}
    return {int(row["job_id"].removeprefix("j")): {**row, "own_run_s": own[row["job_id"]]}
            for row in result.rows}


def explain_run_times(fab: dict[int, dict], done: dict[int, dict]) -> None:
    explained, other = 0, Counter()
    for j, r in done.items():
        if abs(r["finish_s"] - r["start_s"] - fab[j]["own_run_s"]) < 1e-3:
            explained += 1
        else:
            other[int(r["gpus"])] += 1
    print(f"RapidNetSim's run times the jittered trace draws: {explained} of "
          f"{len(done)}; the others by size: {dict(other)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reference", help="jobs.csv of one RapidNetSim run")
    ap.add_argument("--policy", default="source-routing")
    ap.add_argument("--gap", type=float, default=241.0)
    ap.add_argument("--rewiring", default="milp")
    ap.add_argument("--gpus-per-server", type=int, default=1)
    ap.add_argument("--run-times", choices=("own", "rapidnetsim", "jittered"),
                    default="own")
    ap.add_argument("--tol-s", type=float, default=1.0)
    ap.add_argument("--out", default="", help="write the per-job side-by-side CSV here")
    args = ap.parse_args()

    ref = read_reference(args.reference)
    jobs = len(ref)
    started = {int(r["job"]): r for r in ref if r["start_s"] is not None}
    done = {j: r for j, r in started.items() if r["finish_s"] is not None}
    trace = f"rapidnetsim{'-jittered' if args.run_times == 'jittered' else ''}:{args.gap:g}"
    run_times = ({j: r["finish_s"] - r["start_s"] for j, r in done.items()}
                 if args.run_times == "rapidnetsim" else None)
    fab = fabriclab_rows(args.policy, trace, jobs, args.rewiring, args.gpus_per_server,
                         run_times)
    ids = sorted(j for j in done if j in fab)
    firsts = sorted(j for j in started if j in fab)
    if not ids:
        raise SystemExit("no job finished in RapidNetSim's run")

    def avg(values):
        return sum(values) / len(values)

    rns_jwt = avg([started[j]["start_s"] - started[j]["arrival_s"] for j in firsts])
    rns_jct = avg([done[j]["finish_s"] - done[j]["arrival_s"] for j in ids])
    fab_jwt = avg([fab[j]["wait_s"] for j in firsts])
    fab_jct = avg([fab[j]["jct_s"] for j in ids])
    print(f"RapidNetSim started {len(firsts)} and finished {len(ids)} of {jobs} jobs; fabriclab "
          f"{args.policy}, gap {args.gap:g} s, run times {args.run_times}")
    print(f"JWT s over the {len(firsts)} started: RapidNetSim {rns_jwt:.1f}  "
          f"fabriclab {fab_jwt:.1f}  "
          f"fabriclab / RapidNetSim {fab_jwt / rns_jwt if rns_jwt else float('nan'):.3f}")
    print(f"JCT s over the {len(ids)} finished: RapidNetSim {rns_jct:.1f}  "
          f"fabriclab {fab_jct:.1f}  fabriclab / RapidNetSim {fab_jct / rns_jct:.3f}")
    every = [r for r in fab.values() if r["finish_s"] == r["finish_s"]]  # not NaN
    print(f"fabriclab over all {len(fab)} jobs ({len(every)} finished): JWT "
          f"{avg([r['wait_s'] for r in every]):.1f} s, "
          f"JCT {avg([r['jct_s'] for r in every]):.1f} s")
    if args.run_times == "jittered":
        explain_run_times(fab, done)
    arrival_gap = max(abs(done[j]["arrival_s"] - fab[j]["arrival_s"]) for j in ids)
    print(f"largest arrival difference: {arrival_gap:.6f} s")
    run_diff = [(done[j]["finish_s"] - done[j]["start_s"]) - fab[j]["run_s"] for j in ids]
    print(f"run time, RapidNetSim - fabriclab: mean {statistics.fmean(run_diff):+.1f} s, "
          f"min {min(run_diff):+.1f}, max {max(run_diff):+.1f}; "
          f"{sum(abs(d) > args.tol_s for d in run_diff)} jobs differ by more than "
          f"{args.tol_s:g} s")
    starts = [(j, started[j]["start_s"] - fab[j]["start_s"]) for j in firsts]
    differ = [(j, d) for j, d in starts if abs(d) > args.tol_s]
    print(f"{len(differ)} jobs start more than {args.tol_s:g} s apart")
    if differ:
        j, d = differ[0]
        r = started[j]
        print(f"first: job {j} ({int(r['gpus'])} GPUs, arrival {r['arrival_s']:.1f} s)"
              f" starts at {r['start_s']:.1f} s in RapidNetSim, {fab[j]['start_s']:.1f} s "
              f"in fabriclab ({d:+.1f} s)")
    if args.out:
        with open(args.out, "w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh)
            out.writerow(["job", "gpus", "arrival_s", "rns_start_s", "fab_start_s",
                          "rns_run_s", "fab_run_s", "own_run_s"])
            for j in ids:
                out.writerow([j, int(done[j]["gpus"]), done[j]["arrival_s"],
                              done[j]["start_s"], fab[j]["start_s"],
                              done[j]["finish_s"] - done[j]["start_s"], fab[j]["run_s"],
                              fab[j]["own_run_s"]])


if __name__ == "__main__":
    main()
