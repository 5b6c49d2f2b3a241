"""A fidelity invariant registered from outside fabriclab (tests): no shaped queue may hold
more than ``LIMIT_BYTES`` at any sample. One module; one registration
(``INVARIANTS.register("queue-depth", "fl_invariant_demo:INVARIANT")``)."""

from __future__ import annotations

from analysis.invariant import Evidence, Invariant, Judgement, Violation

LIMIT_BYTES = 100_000


class QueueDepth(Invariant):
    name = "queue-depth"
    needs = ("qdisc_samples.parquet",)
    checks = f"no shaped queue holds more than {LIMIT_BYTES} bytes"

    def judge(self, evidence: Evidence) -> Judgement:
        q = evidence.table("qdisc_samples.parquet")
        deep = q[q["backlog_bytes"] > LIMIT_BYTES]
        found = [Violation(f"{r.src}->{r.dst}", f"{r.src}->{r.dst} held {r.backlog_bytes} bytes",
                           round(r.time - evidence.t0, 2))
                 for r in deep.drop_duplicates(["src", "dst"]).itertuples()]
        return Judgement(True, found, {"deepest_bytes": int(q["backlog_bytes"].max())})


INVARIANT = QueueDepth()
