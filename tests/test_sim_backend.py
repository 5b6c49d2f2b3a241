"""The sim backend: run directories with the emulator's layout from the flow simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis.load import load_run
from analysis.metrics import summarise
from testbed.core.errors import FabricLabError, SpecError
from testbed.core.experiment import expand
from testbed.sim.backend import FABRIC_KINDS, GOODPUT, SimRunner, simulate_experiment
from workloads.dnn import DnnWorkload
from workloads.model import predict

MIB = 1 << 20
LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 4, "hosts_per_leaf": 4,
              "host_link_mbit_s": 20, "uplink_mbit_s": 20}


def demo_like(policy: str) -> dict:
    """Four 2-host jobs across two leaves and four spines, each also run alone."""
    return {
        "name": f"demo-{policy}", "fabric": LEAF_SPINE, "policy": policy,
        "solo_baselines": True,
        "jobs": [{"name": f"j{k}", "hosts": [f"h{k}", f"h{k + 4}"],
                  "workload": {"kind": "allreduce", "sizes": ["2MiB"], "iterations": 2}}
                 for k in range(4)],
    }


def multidim(algorithm: str, order: str = "fifo") -> dict:
    return {
        "name": f"md-{algorithm}", "policy": "shortest",
        "fabric": {"kind": "multidim",
                   "dims": [{"size": 2, "mbit_s": 6}, {"size": 4, "mbit_s": 12}]},
        "jobs": [{"name": "allreduce", "hosts_wanted": 8, "algorithm": algorithm, "order": order,
                  "chunks": 16, "workload": {"kind": "allreduce", "sizes": ["1MiB"],
                                             "iterations": 2}}],
    }


def run(data: dict, tmp: Path, seed: int = 1) -> tuple[SimRunner, Path]:
    (exp,) = expand(data)
    runner = SimRunner(exp, tmp, seed=seed)
    return runner, runner.run()


def collided(runner: SimRunner) -> bool:
    """A leaf-spine link carried connections of two jobs while they ran together."""
    users: dict = {}
    for job, paths in runner.routes["together"].items():
        for path in paths:
            for link in path:
                if link[0] in FABRIC_KINDS:
                    users.setdefault(link, set()).add(job)
    return any(len(jobs) > 1 for jobs in users.values())


def test_vclos_jobs_run_at_their_solo_time_and_line_rate(tmp_path: Path) -> None:
    _, run_dir = run(demo_like("vclos"), tmp_path)
    jobs = json.loads((run_dir / "summary.json").read_text())["jobs"]
    line = 2 * MIB * 8 / (20e6 * GOODPUT)  # a 2-rank ring sends S bytes per rank
    for k in range(4):
        job, solo = jobs[f"j{k}"], jobs[f"j{k}-solo"]
        assert job["mean_s"] == pytest.approx(solo["mean_s"], abs=1e-6)
        assert job["mean_s"] == pytest.approx(line, abs=1e-6)
        assert job["spines"] and job["policy"] == "vclos"
        assert solo["solo_of"] == f"j{k}"
        assert job["slowdown"] == pytest.approx(1.0, abs=1e-6)


def test_step_latency_adds_alpha_per_ring_step(tmp_path: Path) -> None:
    data = demo_like("vclos")
    data["solo_baselines"] = False
    (exp,) = expand(data)
    run_dir = SimRunner(exp, tmp_path, step_latency_s=0.01).run()
    jobs = json.loads((run_dir / "summary.json").read_text())["jobs"]
    line = 2 * MIB * 8 / (20e6 * GOODPUT)
    assert jobs["j0"]["mean_s"] == pytest.approx(line + 2 * 0.01, abs=1e-6)  # 2 steps
    env = json.loads((run_dir / "env.json").read_text())
    assert env["sim"]["step_latency_s"] == 0.01
    with pytest.raises(FabricLabError, match="--step-latency-us"):
        SimRunner(exp, tmp_path, step_latency_s=-1.0)


# Seed 106 hashes the eight cross-leaf connections of the four jobs onto distinct uplinks
# (found by a scan); seeds 1 and 2 put two jobs' connections on one uplink.
@pytest.mark.parametrize(("seed", "collision"), [(1, True), (2, True), (106, False)])
def test_ecmp_collisions_slow_jobs_down(tmp_path: Path, seed: int, collision: bool) -> None:
    runner, run_dir = run(demo_like("ecmp"), tmp_path, seed)
    assert collided(runner) == collision
    jobs = json.loads((run_dir / "summary.json").read_text())["jobs"]
    slower = [k for k in range(4)
              if jobs[f"j{k}"]["mean_s"] > jobs[f"j{k}-solo"]["mean_s"] * (1 + 1e-6)]
    assert bool(slower) == collision
    for k in range(4):  # nothing beats running alone, and alone every job runs at line rate
        assert jobs[f"j{k}"]["mean_s"] >= jobs[f"j{k}-solo"]["mean_s"] * (1 - 1e-9)
        assert jobs[f"j{k}-solo"]["mean_s"] == pytest.approx(2 * MIB * 8 / (20e6 * GOODPUT),
                                                             abs=1e-6)


@pytest.mark.parametrize("order", ["fifo", "scf"])
def test_multidim_times_match_the_model(tmp_path: Path, order: str) -> None:
    bws = [6e6 * GOODPUT, 12e6 * GOODPUT]
    means = {}
    for algorithm in ("baseline", "themis"):
        _, run_dir = run(multidim(algorithm, order), tmp_path / algorithm)
        want = predict([2, 4], bws, MIB, 16, policy=algorithm, order=order, align=4).time_s
        r = load_run(run_dir)
        times = r.collectives.groupby("coll")["time"].max()
        assert len(times) == 3  # warmup + 2 iterations
        for t in times:
            assert t == pytest.approx(want, abs=1e-6)
        job = summarise(r)["jobs"]["allreduce"]
        assert job["mean_s"] == pytest.approx(want, abs=1e-6)
        assert job["world"] == 8 and job["algorithm"] == algorithm
        ph = r.phases[r.phases["coll"] == 1]
        assert set(ph["rank"]) == set(range(8))
        assert ph["end"].max() - ph["start"].min() == pytest.approx(want, abs=1e-6)
        means[algorithm] = job["mean_s"]
    assert means["baseline"] > means["themis"]


def test_run_directory_has_the_emulator_layout(tmp_path: Path) -> None:
    runner, run_dir = run(demo_like("vclos"), tmp_path)
    for name in ("spec.yaml", "env.json", "topology.json", "jobs.json", "fidelity.json",
                 "summary.json"):
        assert (run_dir / name).exists(), name
    assert not (run_dir / "link_samples.parquet").exists()
    assert json.loads((run_dir / "env.json").read_text())["backend"] == "sim"
    fidelity = json.loads((run_dir / "fidelity.json").read_text())
    assert fidelity["verdict"] == "simulated" and fidelity["reasons"] == []
    records = json.loads((run_dir / "jobs.json").read_text())
    assert [r["name"] for r in records] == [*(f"j{k}" for k in range(4)),
                                            *(f"j{k}-solo" for k in range(4))]
    for rec in records:
        assert rec["status"] == "ok" and rec["end"] > rec["start"] >= 0
        assert rec["results"] and rec["results"][0]["size"] == 2 * MIB
    solo_end = max(r["end"] for r in records if r["solo_of"])
    assert all(r["start"] >= solo_end - 1e-9 for r in records if not r["solo_of"])
    r = load_run(run_dir)
    assert r.links.empty and r.fidelity["verdict"] == "simulated"
    assert len(r.collectives) == 8 * 2 * 3  # jobs x ranks x (warmup + iterations)
    c = r.collectives
    assert set(c["count"]) == {MIB // 2} and c["correct"].all()
    assert c["algbw"].iloc[0] == pytest.approx(2 * MIB / c["time"].iloc[0] / 1e9)
    assert sorted(set(c[c["job"] == "j0"]["iteration"])) == [-1, 0, 1]
    summary = summarise(r)
    saved = json.loads((run_dir / "summary.json").read_text())
    for name, job in summary["jobs"].items():
        assert saved["jobs"][name]["mean_s"] == pytest.approx(job["mean_s"])
        assert job["mean_s"] == pytest.approx(
            c[(c["job"] == name) & ~c["warmup"]]["time"].mean())
    assert runner.status == "ok" and saved["status"] == "ok"


def test_start_offsets_and_hosts_wanted(tmp_path: Path) -> None:
    data = demo_like("vclos")
    data["solo_baselines"] = False
    data["jobs"] = [{"name": "a", "hosts_wanted": 4, "start_offset_s": 0.5,
                     "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 1}},
                    {"name": "b", "hosts_wanted": 2, "algorithm": "themis", "dims": [2, 1],
                     "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 1}}]
    _, run_dir = run(data, tmp_path)
    recs = {r["name"]: r for r in json.loads((run_dir / "jobs.json").read_text())}
    assert recs["a"]["start"] == pytest.approx(0.5) and recs["b"]["start"] == 0
    assert len(recs["a"]["hosts"]) == 4 and len(recs["b"]["hosts"]) == 2
    assert not set(recs["a"]["hosts"]) & set(recs["b"]["hosts"])


def test_dnn_iterations_overlap_backward_with_serial_bucket_all_reduces(tmp_path: Path) -> None:
    """One 2-host ring job (vclos: alone on its spine): every iteration, by hand, is forward,
    then each bucket's All-Reduce starting when both its backward and the previous bucket's
    All-Reduce are done; the iteration ends with the later of backward and the last one."""
    data = demo_like("vclos")
    data["solo_baselines"] = False
    dnn = {"kind": "dnn", "model": "resnet50", "scale": 0.001, "compute_scale": 0.1,
           "iterations": 2, "warmup": 1}
    data["jobs"] = [{**data["jobs"][0], "workload": dnn}]
    _, run_dir = run(data, tmp_path)

    prof = DnnWorkload(model="resnet50", scale=0.001, compute_scale=0.1).profile()
    rate = 20e6 * GOODPUT
    clock, comm_free = prof.forward_s, 0.0
    for bucket in prof.buckets:
        clock += bucket.backward_s
        comm_free = max(clock, comm_free) + bucket.bytes * 8 / rate  # 2 ranks: S per rank
    expected = max(clock, comm_free)

    job = run_dir / "jobs" / "j0"
    iters = pd.read_parquet(job / "iterations-rank0.parquet")
    assert list(iters["iteration"]) == [-1, 0, 1] and list(iters["warmup"]) == [True, False, False]
    assert iters["time"].tolist() == pytest.approx([expected] * 3, rel=1e-9)
    assert iters["compute"].tolist() == pytest.approx([prof.compute_s] * 3)
    buckets = pd.read_parquet(job / "buckets-rank1.parquet")
    assert len(buckets) == 3 * len(prof.buckets)
    assert (buckets["start"] >= buckets["ready"] - 1e-12).all()
    summary = json.loads((run_dir / "summary.json").read_text())["jobs"]["j0"]
    assert summary["workload"] == "dnn" and summary["mean_s"] == pytest.approx(expected)
    assert 0 < summary["compute_share"] < 1


def test_static_policy_is_refused(tmp_path: Path) -> None:
    data = demo_like("static")
    (exp,) = expand(data)
    with pytest.raises(SpecError, match="not static"):
        simulate_experiment(exp, tmp_path)


def test_cli_runs_the_sim_backend_and_the_report_renders(tmp_path: Path) -> None:
    from analysis.report import write_report
    from testbed.cli import main

    data = demo_like("ecmp")
    data["name"] = "clidemo"
    data["variants"] = [{"name": "ecmp"}, {"name": "vclos", "policy": "vclos"}]
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    out = tmp_path / "results"
    assert main(["run", str(spec), "--backend", "sim", "--out", str(out), "--no-report"]) == 0
    run_dirs = sorted(d for d in out.iterdir() if d.is_dir())
    assert [d.name.split("-", 2)[-1] for d in run_dirs] == ["clidemo-ecmp", "clidemo-vclos"]
    for d in run_dirs:
        summary = json.loads((d / "summary.json").read_text())
        assert summary["status"] == "ok" and summary["jobs"]["j0"]["mean_s"] > 0
    report = write_report(run_dirs, tmp_path / "report")
    assert report.exists() and "clidemo-vclos" in report.read_text()


def test_what_the_simulator_does_not_model_is_not_reported_as_a_result(tmp_path: Path,
                                                                         capsys) -> None:
    """The sim backend moves no data and models no transport: summary.json says so, the check
    warns, and the report says n/a instead of a transport ratio of 1.00x."""
    from analysis.report import write_report
    from testbed.sim.backend import SimBackend

    data = demo_like("ecmp")
    data["jobs"][0]["transport"] = "rpc"
    (exp,) = expand(data)
    SimBackend().check(exp)
    assert "does not model transports (rpc, zerocopy)" in capsys.readouterr().err
    _runner, run_dir = run(data, tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["not_modelled"] == ["transport", "correctness"]
    assert summary["jobs"]["j0"]["correct"] is None
    assert summary["jobs"]["j0"]["transport"] == "rpc (not simulated)"
    report = write_report([run_dir], run_dir)
    assert "the simulator does not model transports (every transport gets the same times)" \
        in report.read_text()
