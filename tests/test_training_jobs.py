"""Training workloads as jobs: the built-ins, scaling, the spec, per-dimension collectives,
the replay of a resolved job and its iteration rows, the sim backend's run of one against
ASTRA-sim's recorded time, and the report's end-to-end table. No root."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis.training import e2e_gains, e2e_table
from testbed.cli import main
from testbed.core.astra_units import ASTRA_GBYTE_BYTES as ASTRA_GBYTE
from testbed.core.errors import FabricLabError, SpecError
from testbed.core.experiment import expand
from testbed.core.formulas import TCP_GOODPUT
from testbed.core.jobs import resolve
from testbed.core.topology import build_plan
from workloads import dnn
from workloads.training.jobs import job_platform, replay_job
from workloads.training.library import from_json, load, scaled, to_json
from workloads.training.replay import replay

ROOT = Path(__file__).resolve().parent.parent
GIB_MBIT = ASTRA_GBYTE * 8 / 1e6  # ASTRA-sim's GB/s in Mbit/s


def experiment(workload: dict, dims: list[dict] | None = None, **job) -> dict:
    dims = dims or [{"size": 4, "mbit_s": 100}, {"size": 2, "mbit_s": 50}]
    hosts = 1
    for d in dims:
        hosts *= d["size"]
    return {"name": "t", "fabric": {"kind": "multidim", "dims": dims},
            "jobs": [{"name": "train", "hosts_wanted": hosts, "algorithm": "themis",
                      "chunks": 4, **job, "workload": {"kind": "training", **workload}}]}


def resolved(data: dict, shaped: bool = True):
    (exp,) = expand(data, shaped=shaped)
    plan = build_plan(exp.fabric, exp.rate_scale)
    return resolve(exp.jobs[0], plan, [h.name for h in plan.hosts]), plan


# ---------------------------------------------------------------- the built-ins


@pytest.mark.parametrize(("name", "kind", "layers"), [
    ("themis-resnet50", "DATA", 54), ("themis-gnmt", "DATA", 10),
    ("themis-dlrm-medium", "HYBRID_DLRM", 20), ("themis-dlrm-large", "HYBRID_DLRM", 20),
    ("themis-transformer-1t", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", 18)])
def test_the_artifact_workloads_load_with_their_provenance(name, kind, layers):
    w = load(model=name)
    assert (w.kind, len(w.layers)) == (kind, layers)
    stored = json.loads((ROOT / "workloads/training/data" / f"{name}.json").read_text())
    prov = stored["provenance"]
    assert prov["commit"] == "786291289945ae0d0a0b0b77de622b7894b462d9"
    assert len(prov["sha256"]) == 64 and prov["path"].endswith(".txt")
    assert from_json(to_json(w, prov), name) == w  # stored and read back unchanged


def test_a_ddp_profile_is_a_data_workload_of_its_buckets():
    w = load(model="ddp-resnet50")
    prof = dnn.profile("resnet50")
    assert w.kind == "DATA" and len(w.layers) == len(prof.buckets)
    assert sum(la.wg_comm.size_bytes for la in w.layers) == prof.total_bytes
    # forward on the first layer, backward split over the buckets (ns cycles)
    assert w.layers[0].fwd_cycles == round(prof.forward_s * 1e9)
    assert sum(la.wg_cycles for la in w.layers) == pytest.approx(prof.backward_s * 1e9, abs=10)


def test_scaling_keeps_whole_float32_values_and_scales_compute():
    w = load(model="themis-gnmt")
    s = scaled(w, size_scale=1e-6, compute_scale=0.5)
    for a, b in zip(w.layers, s.layers, strict=True):
        assert b.fwd_cycles == round(a.fwd_cycles * 0.5)
        if a.wg_comm.active:
            assert b.wg_comm.size_bytes % 4 == 0 and b.wg_comm.size_bytes >= 4
            assert b.wg_comm.size_bytes == pytest.approx(a.wg_comm.size_bytes * 1e-6, abs=4)
    with pytest.raises(FabricLabError, match="size_scale"):
        scaled(w, size_scale=0)


# ---------------------------------------------------------------- the spec


@pytest.mark.parametrize(("workload", "match"), [
    ({}, "exactly one of model"),
    ({"model": "themis-gnmt", "file": "x.txt"}, "exactly one of model"),
    ({"model": "nope"}, "'nope' is not a training workload; choose one of themis-resnet50"),
    ({"model": "themis-gnmt", "passes": 2, "warmup": 2}, "warmup"),
    ({"model": "themis-gnmt", "size_scale": 2}, "size_scale"),
])
def test_a_bad_training_workload_is_one_sentence_naming_the_field(workload, match):
    with pytest.raises(SpecError, match=match) as err:
        expand(experiment(workload))
    assert "\n" not in str(err.value) and "jobs.0.workload" in str(err.value)


def test_a_bad_workload_file_is_one_sentence_before_the_run(tmp_path, capsys):
    bad = tmp_path / "w.txt"
    bad.write_text("DATA\n1\nconv1 -1 10 NONE 0 10 NONE 0 10 ALLREDUCE twelve 0\n")
    spec = tmp_path / "e.yaml"
    spec.write_text(json.dumps(experiment({"file": str(bad)})))
    out = tmp_path / "out"
    assert main(["run", str(spec), "--backend", "sim", "--out", str(out)]) != 0
    err = capsys.readouterr().err
    assert f"{bad} line 3" in err and "not a whole number" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())  # nothing made


# ---------------------------------------------------------------- per-dimension collectives


def test_by_kind_gives_each_dimension_its_kinds_collective():
    dims = [{"size": 4, "mbit_s": 100, "kind": "fully_connected"},
            {"size": 4, "mbit_s": 50, "kind": "ring"}, {"size": 2, "mbit_s": 25}]
    job, _ = resolved(experiment({"model": "themis-gnmt"}, dims, dim_algorithm="by-kind"))
    assert job.dim_algorithms == ["direct", "ring", "halving-doubling"]
    with pytest.raises(SpecError, match="different collectives"):
        job.uniform_dim_algorithm()
    named, _ = resolved(experiment({"model": "themis-gnmt"}, dims, dim_algorithm="ring"))
    assert named.dim_algorithms == ["ring"] * 3 and named.uniform_dim_algorithm() == "ring"


# ---------------------------------------------------------------- the replay of a job


def test_a_jobs_replay_is_the_replay_of_its_platform():
    job, plan = resolved(experiment({"model": "themis-gnmt", "size_scale": 1e-3,
                                     "compute_scale": 10, "passes": 3, "warmup": 1}))
    assert job.dim_kinds == ["switch", "switch"]
    assert job.dim_host_rates_bps == [d.mbit_s * 1e6 for d in plan.spec.dims]
    network, system = job_platform(job, TCP_GOODPUT, 1e-4)
    assert network[0].gbyte_s * ASTRA_GBYTE * 8 == pytest.approx(100e6 * TCP_GOODPUT)
    assert (system.splits, system.inter, system.intra, system.lifo) == (4, "themis", "fifo",
                                                                        True)
    assert system.endpoint_delay_ns == pytest.approx(1e5)
    got = replay_job(job, TCP_GOODPUT, 1e-4)
    want = replay(scaled(load(model="themis-gnmt"), 1e-3, 10), network, system, passes=3)
    assert got.finish_ns == want.finish_ns and got.pass_end_ns == want.pass_end_ns


def test_the_sim_runs_a_training_job_and_writes_its_iterations(tmp_path):
    spec = tmp_path / "e.yaml"
    spec.write_text(json.dumps(experiment({"model": "themis-gnmt", "size_scale": 1e-3,
                                           "compute_scale": 10, "passes": 4, "warmup": 1})))
    assert main(["run", str(spec), "--backend", "sim", "--out", str(tmp_path / "o"),
                 "--no-report"]) == 0
    (run,) = (tmp_path / "o").iterdir()
    rows = pq.read_table(run / "jobs/train/iterations-rank0.parquet").to_pylist()
    assert [r["warmup"] for r in rows] == [True, False, False, False]
    for r in rows:
        assert r["time"] == pytest.approx(r["end"] - r["start"])
        assert r["exposed_comm"] == pytest.approx(max(0.0, r["time"] - r["compute"]))
        assert len(r["exposed_dim"]) == 2
        assert all(0 <= x <= r["exposed_comm"] + 1e-12 for x in r["exposed_dim"])
    steady = rows[1:]  # every pass waits for the one before's gradients: the same time
    assert max(r["time"] for r in steady) == pytest.approx(min(r["time"] for r in steady))
    assert steady[0]["exposed_comm"] > 0  # these links are slow enough to show
    job = json.loads((run / "summary.json").read_text())["jobs"]["train"]
    assert job["workload"] == "training" and job["model"] == "themis-gnmt"
    assert job["iterations"] == 3 and job["mean_s"] == pytest.approx(steady[0]["time"])
    assert job["exposed_dim_s"] == pytest.approx(steady[0]["exposed_dim"])


def test_the_sim_is_within_five_percent_of_astra_sim_on_an_artifact_case(tmp_path):
    """GNMT on the artifact's 2d_switch system, baseline: ASTRA-sim 1.0's recorded time."""
    with (ROOT / "benchmarks/data/astra_e2e_reference.csv").open() as f:
        ref = next(float(r["finish_time_ns"]) for r in csv.DictReader(f)
                   if (r["workload"], r["network"], r["scheduler"])
                   == ("gnmt_fp16_fused", "2d_switch", "baseline"))
    dims = [{"size": 16, "mbit_s": 150 * GIB_MBIT}, {"size": 64, "mbit_s": 100 * GIB_MBIT}]
    data = experiment({"model": "themis-gnmt", "passes": 1}, dims, algorithm="baseline",
                      chunks=64, dim_algorithm="by-kind")
    job, _ = resolved(data, shaped=False)
    got = replay_job(job, TCP_GOODPUT)
    assert float(got.finish_ns) / ref == pytest.approx(1.0, abs=0.05)


# ---------------------------------------------------------------- the report's table


def _summary(fabric: str, model: str, algorithm: str, order: str, mean_s: float) -> dict:
    return {"fabric": fabric, "jobs": {"train": {
        "workload": "training", "model": model, "algorithm": algorithm, "order": order,
        "mean_s": mean_s, "exposed_comm_s": mean_s / 4, "exposed_dim_s": [mean_s / 4]}}}


def test_the_end_to_end_table_pairs_schedules_per_system_and_workload():
    summaries = [_summary(f, "themis-gnmt", a, o, t)
                 for f, times in (("A", (2.0, 1.6, 1.5)), ("B", (3.0, 3.0, 2.0)))
                 for (a, o), t in zip((("baseline", "fifo"), ("themis", "fifo"),
                                       ("themis", "scf")), times, strict=True)]
    rows = e2e_table(summaries)
    assert [(r["fabric"], r["gain_fifo"], r["gain_scf"]) for r in rows] == [
        ("A", pytest.approx(1.25), pytest.approx(2 / 1.5)), ("B", 1.0, 1.5)]
    assert rows[0]["ceiling"] == pytest.approx(2.0 / 1.5)  # exposed = a quarter
    (gain,) = e2e_gains(rows)
    assert gain["gain_scf"] == pytest.approx((2 / 1.5 + 1.5) / 2)
    assert (gain["paper"], gain["paper_arxiv"]) == (1.30, 1.41)


# ---------------------------------------------------------------- Chakra traces as jobs


def _chakra_layers(layers: int, size_bytes: int) -> bytes:
    """A multi-layer training trace: per layer a forward compute, then (backward) a
    weight-gradient compute and its All-Reduce, each depending on the one before."""
    from tests.test_training_chakra import node, trace

    nodes, nid, prev = [], 1, []
    for _ in range(layers):
        nodes.append(node(nid, 4, deps=prev, micros=200))
        prev, nid = [nid], nid + 1
    for _ in range(layers):
        nodes.append(node(nid, 4, deps=prev, micros=400))
        nodes.append(node(nid + 1, 7, deps=[nid], comm_type=0, comm_size=size_bytes))
        prev, nid = [nid], nid + 2
    return trace(*nodes)


@pytest.mark.parametrize("layers", [0, 3])
def test_the_sim_runs_a_chakra_trace_as_a_training_job(tmp_path, layers):
    """An 8-rank All-Reduce microbenchmark (no layers) and a multi-layer trace, on a ring of
    8: the job's one iteration is the replay of the trace on the job's platform."""
    from tests.test_training_chakra import node, trace
    from workloads.training.chakra import read_trace, replay_trace

    size = 1 << 20
    data = _chakra_layers(layers, size) if layers else trace(
        node(1, 7, comm_type=0, comm_size=size))
    et = tmp_path / "trace.0.et"
    et.write_bytes(data)
    dims = [{"size": 8, "mbit_s": 400, "kind": "ring"}]
    spec = tmp_path / "e.yaml"
    spec.write_text(json.dumps(experiment({"file": str(et)}, dims, algorithm="baseline",
                                          dim_algorithm="ring")))
    assert main(["run", str(spec), "--backend", "sim", "--out", str(tmp_path / "o"),
                 "--no-report"]) == 0
    (run,) = (tmp_path / "o").iterdir()
    (row,) = pq.read_table(run / "jobs/train/iterations-rank0.parquet").to_pylist()
    job, _ = resolved(experiment({"file": str(et)}, dims, algorithm="baseline",
                                 dim_algorithm="ring"))
    assert job.dim_kinds == ["ring"] and job.dim_host_rates_bps == [400e6]
    network, system = job_platform(job, TCP_GOODPUT)
    want = replay_trace(read_trace(data, "t"), network, system)
    assert row["time"] == pytest.approx(float(want.finish_ns) * 1e-9)
    assert row["compute"] == pytest.approx(layers * 600e-6)
    assert row["buckets"] == max(1, layers) and row["exposed_dim"] is None
