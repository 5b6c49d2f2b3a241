"""The job contract from spec to report: a job is resolved once after placement
(:func:`testbed.core.jobs.resolve`), recorded in jobs.json, and read — never inferred back —
by the workers, the simulator and the analysis; one recorder writes every run directory, and
the report reads the summary the run wrote."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from analysis.load import load_run
from analysis.metrics import dim_bandwidths, summarise
from analysis.report import write_report
from testbed.core.errors import SpecError
from testbed.core.experiment import CollectiveOptions, expand
from testbed.core.jobs import ResolvedJob, resolve
from testbed.core.topology import build_plan
from testbed.sim.backend import SimRunner
from workloads.launcher import loopback_job

LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 4,
              "host_link_mbit_s": 20, "uplink_mbit_s": 20}
MULTIDIM = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 6},
                                         {"size": 3, "mbit_s": 12, "kind": "fully_connected"}]}


def _job(fabric: dict, **job) -> tuple:
    (exp,) = expand({"name": "c", "fabric": fabric, "jobs": [
        {"name": "j", "workload": {"kind": "allreduce", "sizes": ["1MiB"]}, **job}]})
    return exp.jobs[0], build_plan(exp.fabric)


def test_a_jobs_dimensions_and_planning_rates_are_decided_in_one_place():
    spec, plan = _job(LEAF_SPINE, hosts_wanted=8, algorithm="themis")
    hosts = [f"h{i}" for i in range(8)]
    assert resolve(spec, plan, hosts).dims == [2, 4]  # the default 2-D split
    assert resolve(spec, plan, hosts).dim_rates_bps == [20e6, 20e6]
    flat, _ = _job(LEAF_SPINE, hosts_wanted=8)
    assert resolve(flat, plan, hosts).dims == [8]
    split, _ = _job(LEAF_SPINE, hosts_wanted=8, algorithm="baseline", dims=[4, 2])
    assert resolve(split, plan, hosts).dims == [4, 2]
    # a fully connected dimension: a ring uses one of its n-1 links, direct all of them
    spec, plan = _job(MULTIDIM, hosts_wanted=6, algorithm="themis")
    hosts = [h.name for h in plan.hosts]
    assert resolve(spec, plan, hosts).dim_rates_bps == pytest.approx([6e6, 6e6])
    direct = spec.model_copy(update={"dim_algorithm": "direct"})
    assert resolve(direct, plan, hosts).dim_rates_bps == pytest.approx([6e6, 12e6])


def test_the_job_carries_its_dimensions_kinds_and_host_rates():
    spec, plan = _job(LEAF_SPINE, hosts_wanted=8, algorithm="themis")
    job = resolve(spec, plan, [f"h{i}" for i in range(8)])
    assert job.dim_kinds == ["switch", "switch"] and job.dim_host_rates_bps == [20e6, 20e6]
    spec, plan = _job(MULTIDIM, hosts_wanted=6, algorithm="themis")
    job = resolve(spec, plan, [h.name for h in plan.hosts])
    assert job.dim_kinds == ["switch", "fully_connected"]
    assert job.dim_host_rates_bps == [6e6, 12e6]  # the host's whole rate, not the ring's share
    # the loopback launcher makes its job the same way: switches at the given rates
    loop = loopback_job(ranks=4, dims=[2, 2], dim_bandwidths=[40e6, 20e6], algorithm="themis",
                        sizes=[1024], semantics="fabriclab")
    assert (loop.dim_kinds, loop.dim_host_rates_bps, loop.dim_rates_bps) == (
        ["switch"] * 2, [40e6, 20e6], [40e6, 20e6])
    assert loop.chunks == CollectiveOptions().chunks and loop.semantics == "fabriclab"


def test_a_job_that_cannot_be_resolved_is_one_sentence():
    spec, plan = _job(LEAF_SPINE, hosts_wanted=6, algorithm="baseline",
                      dim_algorithm="halving-doubling")
    with pytest.raises(SpecError, match=r"^job j: dim_algorithm: halving-doubling needs a "
                                        r"power-of-two") as info:
        resolve(spec, plan, [f"h{i}" for i in range(6)])
    assert "\n" not in str(info.value)


def _sim_run(tmp_path: Path, data: dict) -> Path:
    (exp,) = expand(data)
    return SimRunner(exp, tmp_path).run()


def test_jobs_json_records_the_resolved_job_the_simulator_ran(tmp_path):
    run = _sim_run(tmp_path, {"name": "r", "fabric": MULTIDIM, "jobs": [
        {"name": "t", "hosts_wanted": 6, "algorithm": "themis", "chunks": 4,
         "dim_algorithm": "direct", "workload": {"kind": "allreduce", "sizes": ["3MiB"],
                                                 "iterations": 2}}]})
    (job,) = json.loads((run / "jobs.json").read_text())
    assert job["dims"] == [2, 3] and job["dim_rates_bps"] == pytest.approx([6e6, 12e6])
    assert job["hosts"] == [f"h{i}" for i in range(6)] and job["dim_algorithm"] == "direct"
    assert job["dim_kinds"] == ["switch", "fully_connected"]
    assert job["dim_host_rates_bps"] == [6e6, 12e6]
    # the analysis reads the record back as the typed job it was
    typed = load_run(run).resolved["t"]
    assert isinstance(typed, ResolvedJob) and typed.record() == {
        k: v for k, v in job.items() if k in ResolvedJob.model_fields}
    # every phase row records its group and what the collective says the rank sent
    ph = load_run(run).phases
    assert set(zip(ph["dim"], ph["group"], strict=True)) == {(0, 2), (1, 3)}
    assert ph["sent_bytes"].notna().all() and (ph["sent_bytes"] > 0).all()
    assert json.loads((run / "run.json").read_text())["status"] == "ok"


def test_the_analysis_rates_every_dimension_from_the_jobs(tmp_path):
    run = _sim_run(tmp_path, {"name": "d", "fabric": LEAF_SPINE, "jobs": [
        {"name": "t", "hosts_wanted": 8, "algorithm": "themis", "workload": {
            "kind": "allreduce", "sizes": ["1MiB"], "iterations": 1}}]})
    assert dim_bandwidths(load_run(run)) == {0: 20e6, 1: 20e6}  # a leaf-spine job's 2 dims


def test_the_status_the_runner_recorded_is_the_one_every_reader_shows(tmp_path):
    run = _sim_run(tmp_path, {"name": "s", "fabric": LEAF_SPINE, "policy": "ecmp", "jobs": [
        {"name": "a", "hosts": ["h0", "h4"], "workload": {"kind": "allreduce",
                                                          "sizes": ["1MiB"]}}]})
    assert json.loads((run / "summary.json").read_text())["status"] == "ok"
    # a run its runner called incomplete stays incomplete, though its one job finished
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "status": "incomplete",
                                              "error": "interrupted"}))
    again = summarise(run)
    assert again["status"] == "incomplete" and again["error"] == "interrupted"
    assert again["jobs"]["a"]["status"] == "ok"


def _numbers(report_md: Path) -> str:
    """The report's text but when it was generated."""
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "", report_md.read_text())


@pytest.mark.slow
def test_the_demo_report_is_the_same_from_the_run_and_recomputed(tmp_path):
    """make demo's experiment on the simulator: its report from the summaries the runs wrote
    and from a recomputation of their files agree to the byte (but the generation time)."""
    from testbed.core.experiment import load_experiments

    runs = [SimRunner(exp, tmp_path / "results").run()
            for exp in load_experiments("experiments/demo.yaml")]
    for run in runs:  # what the run wrote is what the metrics give on its files
        assert json.loads((run / "summary.json").read_text()) == json.loads(
            json.dumps(summarise(run)))
    written = write_report(runs, tmp_path / "as-written")
    recomputed = write_report(runs, tmp_path / "recomputed", recompute=True)
    assert _numbers(written.with_name("report.md")) == _numbers(
        recomputed.with_name("report.md"))
    assert "busbw" in written.with_name("report.md").read_text()


# ---------------------------------------------------------------- plug-ins from outside

PLUGINS = Path(__file__).parent / "plugins"
REPO = Path(__file__).parent.parent
PLUGIN = "whole-direct"  # tests/plugins/fabriclab_testplugin: a collective with a knob


def plugin_experiment(whole_buffers: bool = True) -> dict:
    """A Themis job whose dimensions run the plug-in collective, with the plug-in's own knob
    set through the spec's ``options``."""
    return {"name": "plugin", "fabric": {"kind": "multidim", "dims": [
        {"size": 2, "mbit_s": 40}, {"size": 3, "mbit_s": 60, "kind": "fully_connected"}]},
        "jobs": [{"name": "p", "hosts_wanted": 6, "algorithm": "themis", "chunks": 2,
                  "dim_algorithm": PLUGIN,
                  "options": {PLUGIN: {"whole_buffers": whole_buffers}},
                  "workload": {"kind": "allreduce", "sizes": ["192KiB"], "iterations": 2}}]}


@pytest.fixture
def installed_plugin(monkeypatch):
    """The test plug-in on this process's path and on its children's, as pip would put it."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(PLUGINS), str(REPO)]))
    from testbed.core.registry import COLLECTIVES

    COLLECTIVES.refresh()
    yield
    COLLECTIVES.unregister(PLUGIN)
    COLLECTIVES.refresh()


def check_plugin_bytes(phases, whole_buffers: bool = True) -> None:
    """Every Reduce-Scatter sent what the knob says: the whole buffer to every peer."""
    rs = phases[phases["op"] == "RS"]
    assert len(rs)
    n, nbytes = rs["group"].to_numpy(), rs["bytes"].to_numpy()
    want = (n - 1) * nbytes if whole_buffers else (n - 1) * nbytes // n
    assert (abs(rs["sent_bytes"].to_numpy() - want) <= 1).all()


def test_a_plugin_collective_and_its_knob_run_in_the_simulator(tmp_path, installed_plugin):
    """An installed collective (entry point), with a knob only it knows, runs through `fabriclab
    run --backend sim`; the knob reaches the simulator (its bytes) and the report's dimension
    utilisation counts exactly what the plug-in sent."""
    spec = tmp_path / "plugin.yaml"
    spec.write_text(yaml.safe_dump(plugin_experiment()))
    proc = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(spec), "--backend",
                           "sim", "--out", str(tmp_path / "results")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (run,) = [d for d in (tmp_path / "results").iterdir() if d.is_dir()]
    (job,) = json.loads((run / "jobs.json").read_text())
    assert job["dim_algorithm"] == PLUGIN and job["options"] == {PLUGIN: {"whole_buffers": True}}
    loaded = load_run(run)
    check_plugin_bytes(loaded.phases)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["jobs"]["p"]["correct"] is None  # the simulator moves no data
    # the report's bytes utilisation of each dimension is the plug-in's bytes over its rate
    ph = loaded.phases[~loaded.phases["warmup"]]
    window = (loaded.collectives[~loaded.collectives["warmup"]].groupby("rank")["time"].sum())
    for dim, rate_bps in ((0, 40e6), (1, 60e6)):
        sent = ph[ph["dim"] == dim].groupby("rank")["sent_bytes"].sum()
        want = (sent * 8 / (rate_bps * window)).mean()
        assert summary["dimensions"][str(dim)]["bytes_util"] == pytest.approx(want, rel=1e-6)


def test_a_plugin_collective_and_its_knob_run_on_real_workers(tmp_path, installed_plugin):
    """The same plug-in on worker processes (loopback): the sum is exact with the knob on,
    and the bytes each rank recorded are the knob's."""
    from testbed.core.traces import read_table
    from workloads.launcher import run_local

    res = run_local(ranks=6, dims=[2, 3], sizes=[4 * 3000], algorithm="themis", chunks=2,
                    dim_algorithm=PLUGIN, options={PLUGIN: {"whole_buffers": True}},
                    iterations=2, timeout=20, wall_timeout=120, out_dir=tmp_path)
    assert [r.correct for r in res.rows] == [True]
    check_plugin_bytes(read_table(tmp_path, "phases").to_pandas())


def test_a_plugin_knob_is_checked_by_the_plugin(installed_plugin):
    base = plugin_experiment()
    job = base["jobs"][0]
    with pytest.raises(SpecError, match=r"jobs\.0: options\.whole-direct\.whole_buffers: "
                                        r"Input should be a valid boolean"):
        expand({**base, "jobs": [{**job, "options": {PLUGIN: {"whole_buffers": "maybe"}}}]})
    with pytest.raises(SpecError, match=r"options\.ring: the job runs no ring"):
        expand({**base, "jobs": [{**job, "options": {"ring": {}}}]})
    with pytest.raises(SpecError, match=r"options\.zerocopy: zerocopy takes no options"):
        expand({**base, "jobs": [{**job, "options": {"zerocopy": {"x": 1}}}]})


def test_a_command_job_on_the_simulator_is_one_sentence(tmp_path):
    (exp,) = expand({"name": "c", "fabric": LEAF_SPINE, "policy": "ecmp", "jobs": [
        {"name": "ddp", "hosts": ["h0", "h4"],
         "workload": {"kind": "command", "argv": ["python", "-c", "pass"]}}]})
    with pytest.raises(SpecError, match=r"^jobs\.0\.workload: job ddp runs a program, which only "
                                        r"the emulator can do"):
        SimRunner(exp, tmp_path)
    assert not list(tmp_path.iterdir())  # nothing written
