"""Every fidelity invariant on one interface (analysis.invariant): the link, scheduler, switch,
job, loss and impairments invariants registered in order, judged each after the ones it reads
(``after``), from a run directory's files alone, as the runner's fidelity.json keeps them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.invariant import Evidence, Invariant, Judgement, judge_run, judging_order
from testbed.core.formulas import TCP_GOODPUT
from testbed.core.registry import INVARIANTS, RegistryError
from testbed.core.topology import LeafSpineSpec, build_plan
from testbed.core.traces import COLLECTIVE_SCHEMA
from testbed.emulator.fidelity import pipeline_record

T0 = 100.0
RATE_BYTES_S = 50e6 / 8  # the host links' 50 Mbit/s


@pytest.fixture
def plan():
    return build_plan(LeafSpineSpec.model_validate(
        {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
         "host_link_mbit_s": 50, "uplink_mbit_s": 40}))


def job_record(share_of_links: float) -> dict:
    """Job ``a`` on h0 and h1 (one leaf), reaching ``share_of_links`` of its links' goodput."""
    busbw = share_of_links * 50 * TCP_GOODPUT * 1e6 / 8 / 1e9
    return {"name": "a", "status": "ok", "policy": "vclos", "hosts": ["h0", "h1"],
            "dims": [2], "workload": {"kind": "allreduce"}, "model_s": None,
            "results": [{"size": 8 << 20, "time_us": 1e6, "busbw": busbw, "in_place": True}]}


def make_run(run: Path, share_of_links: float) -> Path:
    """Job a's worker waits 20 % of its 4 s of collectives while its host links send 80 % of
    their rate with a queue too short to judge them: neither the link invariant nor the links
    excuse the wait; the job's own result may."""
    (run / "jobs" / "a").mkdir(parents=True)
    pd.DataFrame([{"time": T0 + k / 20, "job": "a", "process": "h0 rank0", "pid": 1, "tid": 1,
                   "thread": "python3", "run_s": k / 20, "wait_s": 0.2 * k / 20}
                  for k in range(81)]).to_parquet(run / "sched_samples.parquet")
    pd.DataFrame([{"time": T0 + k / 10, "link": f"{h}-leaf0", "src": src, "dst": dst,
                   "capacity_mbit_s": 50.0, "sent_bytes": int(0.8 * RATE_BYTES_S * k / 10),
                   "backlog_bytes": 3000, "drops": 0}
                  for h in ("h0", "h1") for src, dst in ((h, "leaf0"), ("leaf0", h))
                  for k in range(41)]).to_parquet(run / "qdisc_samples.parquet")
    (run / "jobs.json").write_text(json.dumps([job_record(share_of_links)]))
    cols = {f.name: pa.nulls(1, f.type) for f in COLLECTIVE_SCHEMA}
    cols |= {"warmup": pa.array([False]), "start": pa.array([T0]), "time": pa.array([4.0])}
    pq.write_table(pa.table(cols, schema=COLLECTIVE_SCHEMA),
                   run / "jobs" / "a" / "collectives-rank0.parquet")
    return run


def test_the_built_in_invariants_are_registered_in_the_order_of_their_reasons():
    names = INVARIANTS.names()
    assert names[:6] == ("link", "scheduler", "switch", "job", "loss", "impairments")
    assert all(isinstance(INVARIANTS.get(n), Invariant) for n in names)
    order = judging_order(names)
    assert order.index("job") < order.index("scheduler")  # the scheduler reads the job's


def test_a_run_directory_alone_gives_fidelity_json_s_fields(tmp_path, plan):
    run = make_run(tmp_path / "held", 0.93)
    verdict = judge_run(run, {"plan": plan, "switches": "ovs"})
    f = verdict.fields
    assert {"links", "invariants", "scheduler", "switch", "sched_judged_s", "job",
            "registered"} <= set(f)
    assert set(f["registered"]) >= {"loss", "impairments"}
    assert f["invariants"]["judged"] and f["invariants"]["violations"] == []
    assert f["sched_judged_s"] == pytest.approx(4.0)
    assert not f["switch"]["judged"]
    # the job held (93 % of its links): the wait's cost is bounded by its own result
    assert verdict.reasons == [] and f["scheduler"]["violations"] == []
    (e,) = f["scheduler"]["excused"]
    assert e["excused_by"] == "job" and e["job_ratio"] == pytest.approx(0.93)
    assert e["links_ratio"] == pytest.approx(0.8, abs=1e-3)


def test_reasons_come_in_registration_order_whatever_the_judging_order(tmp_path, plan):
    run = make_run(tmp_path / "short", 0.85)
    verdict = judge_run(run, {"plan": plan, "switches": "ovs",
                              "busiest_then": lambda a, b: "; busiest then: spin"})
    assert [r.split(":")[0] for r in verdict.reasons] == ["scheduler invariant",
                                                          "job invariant"]
    assert verdict.reasons[0].endswith("; busiest then: spin")
    assert verdict.judgements["scheduler"].violations[0].place == "job a's worker h0 rank0"


def test_files_and_tables_in_memory_judge_alike(tmp_path, plan):
    """The runner hands over what it holds (jobs.json is written after the verdict); a
    rejudge reads the files: the same fields and reasons."""
    run = make_run(tmp_path / "run", 0.85)
    from_files = judge_run(run, {"plan": plan, "switches": "ovs"},
                           only=("scheduler", "switch", "job"))
    in_memory = pipeline_record(
        pd.read_parquet(run / "sched_samples.parquet"), {"a": [(T0, T0 + 4.0)]},
        [job_record(0.85)], plan, "ovs", lambda a, b: "",
        pd.read_parquet(run / "qdisc_samples.parquet"))
    assert in_memory["reasons"] == from_files.reasons
    for key in ("scheduler", "switch", "sched_judged_s", "job"):
        assert in_memory[key] == from_files.fields[key]


class _Reads(Invariant):
    """An invariant from outside that reads the job invariant's judgement."""

    name: ClassVar[str] = "reads-job"
    after: ClassVar[tuple[str, ...]] = ("job",)
    seen: ClassVar[list[str]] = []

    def judge(self, evidence: Evidence) -> Judgement:
        type(self).seen = sorted(evidence.earlier)
        jobs = evidence.earlier["job"].measured["job"]["jobs"]
        return Judgement(True, measured={"jobs_judged": len(jobs)})


class _Cycle(Invariant):
    name: ClassVar[str] = "cycle"
    after: ClassVar[tuple[str, ...]] = ("reads-job",)

    def judge(self, evidence: Evidence) -> Judgement:
        return Judgement(True)


def test_an_invariant_reads_the_judgements_it_declares_and_no_cycle_is_allowed(tmp_path,
                                                                               plan):
    run = make_run(tmp_path / "run", 0.93)
    INVARIANTS.register("reads-job", _Reads())
    try:
        verdict = judge_run(run, {"plan": plan})
        assert _Reads.seen == ["job"]
        assert verdict.fields["registered"]["reads-job"]["measured"] == {"jobs_judged": 1}
        INVARIANTS.register("cycle", _Cycle())
        _Reads.after = ("job", "cycle")
        with pytest.raises(RegistryError, match="read each other's judgements"):
            judge_run(run, {"plan": plan})
    finally:
        _Reads.after = ("job",)
        INVARIANTS.unregister("reads-job")
        INVARIANTS.unregister("cycle")


def test_the_report_says_what_judged_a_run_in_each_invariant_s_words():
    from analysis.report import _pipeline_judged

    f = {"switch": {"judged": True}, "job": {"tolerance": 0.1, "jobs": []},
         "registered": {"loss": {"judged": True, "checks": "packets lost only in queues"},
                        "gone": {"judged": False, "why_not": "no such file"}}}
    assert _pipeline_judged(f) == ("; the switch invariant (ovs-vswitchd's threads, likewise)"
                                   "; the loss invariant (packets lost only in queues)"
                                   "; not the gone invariant (no such file)")
    assert _pipeline_judged({}) == ""


def test_the_job_invariant_reads_the_prediction_the_run_recorded(tmp_path):
    """A recorded run is judged again from its files: prediction.json holds the simulator's
    times (no plan needed), as predict() wrote them."""
    from analysis.job_invariant import prediction_record, recorded_prediction

    predicted = {"a": {"times_s": {(8 << 20, True): 0.8}, "run": "prediction/x"},
                 "b": {"why_not": "it runs a program"}}
    record = json.loads(json.dumps(prediction_record(predicted)))
    assert recorded_prediction(record) == predicted
    run = make_run(tmp_path / "run", 0.85)
    (run / "prediction.json").write_text(json.dumps(record))
    verdict = judge_run(run, only=("job",))
    (v,) = verdict.fields["job"]["jobs"]
    assert v["against"] == "prediction" and v["sizes"][0]["ratio"] == pytest.approx(0.8)
    assert verdict.reasons[0].startswith("job invariant: job a took 1 s for its All-Reduce "
                                         "of 8MiB where the simulator predicts 0.8 s")


class _Overwrites(Invariant):
    name: ClassVar[str] = "overwrites"

    def judge(self, evidence: Evidence) -> Judgement:
        return Judgement(True)

    def fields(self, judgement: Judgement) -> dict:
        return {"job": {}}


def test_no_invariant_overwrites_another_s_fields(tmp_path, plan):
    run = make_run(tmp_path / "run", 0.93)
    INVARIANTS.register("overwrites", _Overwrites())
    try:
        with pytest.raises(RegistryError, match=r"'overwrites' would overwrite fidelity\.json's "
                                                r"job, which another invariant fills"):
            judge_run(run, {"plan": plan})
    finally:
        INVARIANTS.unregister("overwrites")
