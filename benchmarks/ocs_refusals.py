"""Are milp's circuit refusals real; BENCHMARKS.md "The vClos paper reproduced honestly".

Are the ``milp`` OCS rewiring's (formerly ``exact``) refusals for circuits real, within the
shapes it knows? Replays the vClos paper's run (``benchmarks/vclos_paper.py``: trace
``rapidnetsim:GAP``, preset vclos-paper, policy ocs-vclos, rewiring milp, 4-GPU servers)
and, at every admission refused for circuits, decides exactly whether any shape ``milp``
knows could place the job (:mod:`sdn_app.allocation.ocs_feasibility`: counting bounds, then a
joint MILP per shape; a wiring found is checked port by port; running circuits stay put).

    nice -n 10 .venv/bin/python benchmarks/ocs_refusals.py [--gap 241] [--jobs 5000]
        [--time-limit 120] [--no-audit]

One line per refusal: the job, its size k, the refusal's number for that job, every shape
tried with its answer (``none``: proven, with the reason; ``WIRING``: a wiring exists;
``unknown``) and the seconds spent; then totals. Where a wiring exists, a summary of the
state. The run itself
is ``milp``'s own (the refusals are kept, so the run is the one vclos_paper.py measures),
only observed: the hook is a subclass of the milp rewiring registered under another name.
``--no-audit`` only runs, for timing (JWT, refusals, wall and CPU seconds).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import Allocation, Ledger
from sdn_app.allocation.ocs import REWIRINGS, MilpRewiring
from sdn_app.allocation.ocs_feasibility import (
    Decision,
    Shape,
    State,
    decide,
)
from testbed.sim.cluster import simulate_cluster
from testbed.sim.cluster_run import cluster_config
from testbed.sim.trace_loading import load_trace


class AuditedExact(MilpRewiring):
    """The milp rewiring, deciding every refusal for circuits as it happens."""

    name = "milp-audited"

    def __init__(self, time_limit_s: float) -> None:
        self.time_limit_s = time_limit_s
        self.decisions: list[tuple[str, Decision, float]] = []
        self.attempts: Counter[str] = Counter()

    def place_job(self, ledger: Ledger, job_id: str, k: int,
                  shapes: list[tuple[int, int]]) -> Allocation | None:
        found = super().place_job(ledger, job_id, k, shapes)
        # Refused for circuits: what Cluster raises as cause "links" next.
        if found is None and isinstance(ledger, Cluster) and ledger.hosts_fit(k, "ocs-vclos"):
            self.attempts[job_id] += 1
            start = time.perf_counter()
            decision = decide(ledger, k, self.time_limit_s)
            seconds = time.perf_counter() - start
            self.decisions.append((job_id, decision, seconds))
            print(line(job_id, self.attempts[job_id], decision, seconds), flush=True)
            if decision.answer == "wiring":
                wiring = decision.verdicts[-1].wiring
                print("  " + state_summary(ledger, wiring.shape), flush=True)
        return found


def state_summary(ledger: Ledger, shape: Shape) -> str:
    st = State.of(ledger)
    idle_leaves = [lf for lf, spread in enumerate(st.spread) if spread]
    return (f"state: {sum(st.spread)} hosts in idle servers on {len(idle_leaves)} leaves, "
            f"{sum(st.leaf_mask[lf].bit_count() for lf in idle_leaves)} idle OCS ports on "
            f"them; {sum(map(sum, st.spine_idle))} idle spine ports, "
            f"{sum(sum(idle) >= shape.m for idle in st.spine_idle)} spines with >= "
            f"{shape.m} ({shape.n} needed)")


def line(job_id: str, attempt: int, decision: Decision, seconds: float) -> str:
    shapes = "; ".join(
        f"{v.shape}: {'WIRING' if v.answer == 'wiring' else v.answer} ({v.how}, "
        f"{v.seconds:.2f} s)" for v in decision.verdicts)
    verdict = {"none": "no wiring", "unknown": "unknown",
               "wiring": f"WIRING EXISTS ({decision.verdicts[-1].shape})"}[decision.answer]
    return f"job {job_id} k={decision.k} refusal #{attempt}: {verdict} [{seconds:.1f} s] | {shapes}"


def run(gap: float, jobs: int, rewiring: str) -> dict:
    """The vClos paper's ocs-vclos run (as ``vclos_paper.py`` runs it, 4-GPU servers) with
    ``rewiring``: its JWT, JCT, refusals for circuits, wall and CPU seconds."""
    config = cluster_config({"preset": "vclos-paper", "policy": "ocs-vclos",
                             "rewiring": rewiring, "gpus_per_server": 4})
    specs = load_trace(f"rapidnetsim:{gap:g}", jobs, 0.8, 8192, 1)
    wall, cpu = time.perf_counter(), time.process_time()
    s = simulate_cluster(specs, config).summary
    return {"jwt_s": s["avg_wait_s"], "jct_s": s["avg_jct_s"],
            "refused_links": s["refused_fragmented_links"],
            "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gap", type=float, default=241.0, help="mean inter-arrival time, s")
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--time-limit", type=float, default=120.0,
                    help="seconds per MILP before a shape is reported unknown")
    ap.add_argument("--no-audit", action="store_true",
                    help="only run (for timing): no decision at refusals")
    args = ap.parse_args()
    audited = AuditedExact(args.time_limit)
    REWIRINGS[audited.name] = audited
    rewiring = "milp" if args.no_audit else audited.name
    result = run(args.gap, args.jobs, rewiring)
    print(f"milp: JWT "
          f"{result['jwt_s']:.0f} s, JCT {result['jct_s']:.0f} s, refused for circuits "
          f"{result['refused_links']}, run wall {result['wall_s']:.1f} s, "
          f"CPU {result['cpu_s']:.1f} s")
    if args.no_audit:
        return
    decisions = audited.decisions
    answers = Counter(d.answer for _, d, _ in decisions)
    by_how = Counter()
    for _, d, _ in decisions:
        if d.answer == "none":
            by_how["by counting alone" if all(not v.how.startswith("MILP") for v in d.verdicts)
                   else "with a MILP"] += 1
    milp_s = [v.seconds for _, d, _ in decisions for v in d.verdicts if v.how.startswith("MILP")]
    print(f"\ngap {args.gap:g} s, {args.jobs} jobs: JWT {result['jwt_s']:.0f} s, run refused "
          f"{result['refused_links']} admissions for circuits; audited {len(decisions)} "
          f"({len({j for j, _, _ in decisions})} jobs)")
    print(f"no wiring: {answers['none']} ({by_how['by counting alone']} by counting alone, "
          f"{by_how['with a MILP']} with a MILP); wiring exists: {answers['wiring']}; "
          f"unknown: {answers['unknown']}")
    sizes = Counter(d.k for _, d, _ in decisions)
    print("refusals by size: " + ", ".join(f"{k}: {c}" for k, c in sorted(sizes.items())))
    if milp_s:
        print(f"MILP shapes: {len(milp_s)}, seconds median {sorted(milp_s)[len(milp_s) // 2]:.2f}"
              f", max {max(milp_s):.2f}; audit total {sum(s for *_, s in decisions):.0f} s, "
              f"run wall {result['wall_s']:.0f} s")
    for job_id, d, _ in decisions:
        if d.answer == "wiring":
            w = d.verdicts[-1].wiring
            print(f"job {job_id}: {w.shape} hosts per leaf {w.hosts} spines {list(w.spines)} "
                  f"circuits (ocs, leaf, spine, port) "
                  f"{[(c.ocs, c.end_a[1], *c.end_b[1:]) for c in w.circuits]}")


if __name__ == "__main__":
    main()
