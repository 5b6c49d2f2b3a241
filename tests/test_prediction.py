"""The simulator's prediction on the paths an emulated run's flows took (pure: a simulated run
directory stands in for the emulated one, with a paths.json written by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.core.errors import SpecError
from testbed.core.experiment import expand
from testbed.core.traces import read_table
from testbed.emulator.prediction import issue_times, repredict
from testbed.sim.backend import SimRunner

SPEC = {"name": "two", "policy": "ecmp",
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "host_link_mbit_s": 10, "uplink_mbit_s": 10},
        "jobs": [{"name": "a", "hosts": ["h0", "h2"],
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 2}},
                 {"name": "b", "hosts": ["h1", "h3"],
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 2}}]}


def _run(tmp_path: Path) -> Path:
    (exp,) = expand(SPEC)
    return SimRunner(exp, tmp_path / "runs").run()


def _paths(run: Path, spine_a: int, spine_b: int) -> None:
    legs = {"together": {
        "a": [{"src": "h0", "dst": "h2", "spine": spine_a, "bytes": 10**6},
              {"src": "h2", "dst": "h0", "spine": spine_a, "bytes": 10**6}],
        "b": [{"src": "h1", "dst": "h3", "spine": spine_b, "bytes": 10**6},
              {"src": "h3", "dst": "h1", "spine": spine_b, "bytes": 10**6}]}}
    (run / "paths.json").write_text(json.dumps({"source": "spine counters", "legs": legs}))


def test_jobs_counted_on_one_spine_are_predicted_to_share_it(tmp_path):
    run = _run(tmp_path)
    _paths(run, 0, 1)
    apart = repredict(run)
    _paths(run, 1, 1)
    shared = repredict(run)
    size = (2**20, True)
    for job in ("a", "b"):
        assert shared[job]["times_s"][size] == pytest.approx(2 * apart[job]["times_s"][size],
                                                             rel=0.01)
    assert any((run / "prediction").glob("*/jobs.json"))


def test_issue_times_read_the_traces(tmp_path):
    run = _run(tmp_path)
    starts = issue_times(run, ["a", "b", "missing"])
    assert set(starts) == {"a", "b"} and len(starts["a"]) == 3  # the warm-up and 2 iterations
    assert starts["a"][0] == pytest.approx(starts["b"][0])
    assert starts["a"] == sorted(starts["a"])


def _times_s(run: Path, job: str) -> list[float]:
    t = read_table(run / "jobs" / job, "collectives").to_pandas()
    return [float(x) for x in t.groupby("coll")["time"].max().sort_index()]


def test_a_replay_starts_each_collective_no_earlier_than_it_was_issued(tmp_path):
    # one spine: the two jobs share it whenever both run
    spec = {**SPEC, "fabric": {**SPEC["fabric"], "spines": 1}}
    (exp,) = expand(spec)
    lockstep = SimRunner(exp, tmp_path / "a").run()
    # b issues its second and third collectives long after a has finished all of its own
    late = SimRunner(exp, tmp_path / "b", issued={"b": [0.0, 100.0, 200.0]}).run()
    shared, alone = _times_s(lockstep, "a"), _times_s(late, "a")
    assert alone[0] == pytest.approx(shared[0], rel=0.01)  # both ran their first together
    for k in (1, 2):  # then a ran alone: its own links' rate, twice the shared one
        assert alone[k] == pytest.approx(shared[k] / 2, rel=0.01)
    b = read_table(late / "jobs" / "b", "collectives").to_pandas()
    starts = b.groupby("coll")["start"].min().sort_index().tolist()
    assert starts[1] - starts[0] == pytest.approx(100.0) and starts[2] - starts[0] == \
        pytest.approx(200.0)


def test_a_run_of_a_preset_is_predicted_again(tmp_path):
    # spec.yaml keeps the preset's name beside the fabric it expanded to
    (exp,) = expand({"name": "p", "preset": "2d-switch", "policy": "shortest",
                     "jobs": [{"name": "a", "hosts_wanted": 16, "algorithm": "baseline",
                               "workload": {"kind": "allreduce", "sizes": ["1MiB"],
                                            "iterations": 1}}]})
    run = SimRunner(exp, tmp_path / "runs").run()
    assert "a" in repredict(run)


def test_static_routes_are_predicted_where_every_pair_has_one_path(tmp_path):
    """Static rules on a tree (one spine) route as any policy would: the simulator and the
    replay take the fabric's default."""
    spec = {**SPEC, "policy": "static", "fabric": {**SPEC["fabric"], "spines": 1}}
    (exp,) = expand(spec)
    got = repredict(SimRunner(exp, tmp_path / "runs").run())
    (ecmp,) = expand({**spec, "policy": "ecmp"})
    want = json.loads((SimRunner(ecmp, tmp_path / "ecmp").run() / "jobs.json").read_text())
    size = (2**20, True)
    for rec in want:
        (r,) = [r for r in rec["results"] if int(r["size"]) == 2**20]
        assert got[rec["name"]]["times_s"][size] == pytest.approx(r["time_us"] / 1e6, rel=1e-6)


def test_static_routes_with_several_paths_are_not_guessed(tmp_path):
    (exp,) = expand({**SPEC, "policy": "static"})  # two spines
    with pytest.raises(SpecError, match="policy: the sim backend needs a routing policy"):
        SimRunner(exp, tmp_path / "sim").run()
    run = _run(tmp_path)  # an emulated run's files, as if its rules had been static
    spec = run / "spec.yaml"
    spec.write_text(spec.read_text().replace("policy: ecmp", "policy: static"))
    got = repredict(run)
    assert all("hosts have several paths" in got[j]["why_not"] for j in ("a", "b"))
