"""Jobs that share a link are judged together: TCP may split a shared link unequally, but the
group finishes when the links allow (analysis.job_invariant.judge_shared)."""

from analysis.job_invariant import coupled, held, judge, span_s

SIZE = 1 << 20


def job(name: str, measured_s: float, solo_of: str | None = None) -> dict:
    return {"name": name, "status": "ok", "solo_of": solo_of, "tcp_timeouts": 0,
            "results": [{"size": SIZE, "in_place": True, "time_us": measured_s * 1e6}]}


def predicted(**times_s: float) -> dict:
    return {name: {"times_s": {(SIZE, True): t}} for name, t in times_s.items()}


# j0 and j1 share leaf1->spine2; j2 crosses only its own links
ON_LINKS = {"leaf1→spine2": {"j0": 4_000_000, "j1": 4_000_000},
            "leaf0→spine3": {"j0": 4_000_000}, "leaf0→spine1": {"j2": 4_000_000}}


def windows(**spans: tuple[float, float]) -> dict:
    return {name: [(a, (a + b) / 2), ((a + b) / 2, b)] for name, (a, b) in spans.items()}


def verdicts(measured: dict, spans_run: dict, spans_sim: dict, alone_s: float = 0.9):
    jobs = [job(n, t) for n, t in measured.items()] + [
        job(f"{n}-solo", alone_s, solo_of=n) for n in measured]
    pred = predicted(**{n: 1.75 for n in measured}, **{f"{n}-solo": alone_s for n in measured})
    out = judge(jobs, None, "ovs", predicted=pred, on_links=ON_LINKS,
                windows=(windows(**spans_run), windows(**spans_sim)))
    return {v["job"]: v for v in out}


def test_jobs_are_grouped_through_the_links_they_share():
    assert sorted(map(sorted, coupled(ON_LINKS, {"j0", "j1", "j2"}))) == [["j0", "j1"], ["j2"]]
    assert span_s(windows(j0=(10.0, 15.0), j1=(10.5, 16.0)), {"j0", "j1"}) == 6.0
    assert span_s(windows(j0=(10.0, 15.0)), {"j0", "j1"}) is None


def test_a_job_that_beat_its_share_is_held_when_the_group_finished_on_time():
    v = verdicts({"j0": 1.50, "j1": 1.80, "j2": 1.75},
                 {"j0": (100.0, 104.6), "j1": (100.1, 105.4), "j2": (100.0, 105.2)},
                 {"j0": (0.0, 5.25), "j1": (0.1, 5.35), "j2": (0.0, 5.25)})
    assert not v["j0"]["violated"]  # 1.75 / 1.50 = 1.17, outside 10 % alone
    assert v["j0"]["shared"]["jobs"] == ["j0", "j1"]
    assert v["j0"]["shared"]["held"] and v["j0"]["shared"]["alone_ratio"] == 0.6
    assert v["j0"]["shared"]["span_ratio"] == round(5.35 / 5.4, 4)
    assert "shared" not in v["j2"]


def test_a_group_that_finished_late_is_not_held():
    # the retransmission timeouts of a lossy fabric: the whole group ran a quarter longer
    v = verdicts({"j0": 1.50, "j1": 2.30, "j2": 1.75},
                 {"j0": (100.0, 104.6), "j1": (100.1, 107.0), "j2": (100.0, 105.2)},
                 {"j0": (0.0, 5.25), "j1": (0.1, 5.35), "j2": (0.0, 5.25)})
    assert v["j0"]["violated"] and v["j1"]["violated"]
    assert v["j0"]["shared"]["span_ratio"] < 0.9 and "held" not in v["j0"]["shared"]


def test_a_job_faster_than_it_could_run_alone_is_not_held():
    v = verdicts({"j0": 0.70, "j1": 1.80, "j2": 1.75},
                 {"j0": (100.0, 102.1), "j1": (100.1, 105.4), "j2": (100.0, 105.2)},
                 {"j0": (0.0, 5.25), "j1": (0.1, 5.35), "j2": (0.0, 5.25)})
    assert v["j0"]["violated"]
    assert v["j0"]["shared"]["alone_ratio"] == round(0.9 / 0.7, 4)


def test_a_job_alone_on_its_links_is_judged_alone():
    v = verdicts({"j0": 1.75, "j1": 1.75, "j2": 1.50},
                 {"j0": (100.0, 105.2), "j1": (100.1, 105.3), "j2": (100.0, 104.5)},
                 {"j0": (0.0, 5.25), "j1": (0.1, 5.35), "j2": (0.0, 5.25)})
    assert v["j2"]["violated"] and "shared" not in v["j2"]


def test_the_report_names_the_jobs_held_with_their_group():
    from analysis.report import _pipeline_judged

    jobs = [{"job": "j0", "judged": True, "against": "prediction",
             "shared": {"jobs": ["j0", "j1"], "span_ratio": 0.97, "held": True}},
            {"job": "j1", "judged": True, "against": "prediction",
             "shared": {"jobs": ["j0", "j1"], "span_ratio": 0.97}}]
    line = _pipeline_judged({"job": {"tolerance": 0.1, "jobs": jobs}})
    assert "j0 outside 10% alone but held with the jobs sharing their links" in line


def test_a_job_its_group_held_does_not_excuse_its_workers_waits():
    # what the scheduler invariant excuses by the job's result (held): only jobs within the
    # tolerance on their own; a job held by its group was outside it
    v = verdicts({"j0": 1.50, "j1": 1.80, "j2": 1.75},
                 {"j0": (100.0, 104.6), "j1": (100.1, 105.4), "j2": (100.0, 105.2)},
                 {"j0": (0.0, 5.25), "j1": (0.1, 5.35), "j2": (0.0, 5.25)})
    assert v["j0"]["shared"]["held"] and not v["j0"]["violated"]
    assert {"j1", "j2"} <= set(held(list(v.values()))) and "j0" not in held(list(v.values()))
