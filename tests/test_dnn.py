"""DNN training emulation: model profiles, bucketed overlapped All-Reduce, iteration traces."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from testbed.core.errors import FabricLabError
from testbed.core.traces import read_table
from workloads import dnn
from workloads.dnn import DnnWorkload
from workloads.launcher import local_configs, run_in_threads, run_local
from workloads.traces import TraceWriter
from workloads.worker import WorkerConfig

# Published parameter counts (the all-reduced part) and the tolerance of our layer tables.
PUBLISHED = {"resnet50": 25.6e6, "gnmt": 160e6, "dlrm": 2.37e6, "bert-large": 340e6}


# ---------------------------------------------------------------- profiles (pure)


def test_models_and_aliases():
    assert dnn.model_names() == sorted(PUBLISHED)
    assert dnn.canonical("Transformer") == "bert-large" == dnn.canonical("bert")
    assert dnn.canonical("ResNet-50") == "resnet50"
    with pytest.raises(ValueError, match="unknown model 'vgg'"):
        dnn.profile("vgg")


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_published(name):
    assert dnn.parameters(name) == pytest.approx(PUBLISHED[name], rel=0.02)
    if name == "resnet50":
        assert dnn.parameters(name) == 25_557_032  # torchvision's exact count


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_full_size_profile_buckets(name):
    p = dnn.profile(name)
    params = dnn.parameters(name)
    assert p.total_bytes == params * 4 == sum(b.params for b in p.buckets) * 4
    assert p.cap_bytes == 25_000_000
    assert all(b.bytes % 4 == 0 and 0 < b.bytes <= p.cap_bytes for b in p.buckets)
    assert all(b.backward_s > 0 for b in p.buckets) and p.forward_s > 0
    # Round V100 figures: backward ≈ 2x forward, fwd+bwd of the documented size.
    assert p.backward_s == pytest.approx(2 * p.forward_s, rel=0.05)
    assert p.compute_s == pytest.approx(dnn.MODELS[name].forward_s + dnn.MODELS[name].backward_s)


def test_backward_order_is_last_layers_first():
    resnet = dnn.profile("resnet50").buckets
    assert resnet[0].layers[0] == "fc" and resnet[-1].layers[-1] == "conv1"
    bert = dnn.profile("bert-large").buckets
    assert bert[0].layers[0] == "nsp" and bert[-1].layers == ("embeddings.word",)
    # The shared GNMT embedding is used by encoder and decoder: its gradient comes last.
    assert dnn.profile("gnmt").buckets[-1].layers == ("embedding.shared",)
    assert len(dnn.profile("dlrm").buckets) == 1  # 9.5 MB of dense MLPs: one bucket


def test_oversized_layers_split_or_kept_whole():
    split = dnn.profile("bert-large")
    whole = dnn.profile("bert-large", split_oversized=False)
    assert max(b.bytes for b in whole.buckets) == 30522 * 1024 * 4  # the word embedding
    assert split.total_bytes == whole.total_bytes
    assert len(split.buckets) > len(whole.buckets)
    assert sum(b.backward_s for b in split.buckets) == pytest.approx(whole.backward_s)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(PUBLISHED)),
       scale=st.floats(1e-5, 1.0),
       compute_scale=st.one_of(st.just(0.0), st.floats(1e-6, 10.0)),
       cap_mb=st.floats(1.0, 100.0))
def test_scaled_profile_properties(name, scale, compute_scale, cap_mb):
    full = dnn.profile(name, bucket_cap_mb=cap_mb)
    p = dnn.profile(name, scale, compute_scale, bucket_cap_mb=cap_mb)
    assert len(p.buckets) == len(full.buckets)  # same structure, fewer bytes
    assert all(b.bytes % 4 == 0 and b.bytes >= 4 for b in p.buckets)
    # Each bucket: its scaled float32 count, rounded, at least one element.
    for b, f in zip(p.buckets, full.buckets, strict=True):
        assert abs(b.bytes - f.bytes * scale) <= 4 or b.bytes == 4
        assert b.bytes <= max(4, p.cap_bytes * scale + 2)
    assert abs(p.total_bytes - dnn.parameters(name) * 4 * scale) <= 4 * len(p.buckets)
    assert p.forward_s == pytest.approx(full.forward_s * compute_scale)
    for b, f in zip(p.buckets, full.buckets, strict=True):
        assert b.backward_s == pytest.approx(f.backward_s * compute_scale)
        assert (b.backward_s > 0) == (compute_scale > 0)


@pytest.mark.parametrize(("name", "layers"), [("resnet50", 54), ("bert-large", 153)])
def test_unbucketed_profile_is_one_bucket_per_layer_with_its_global_index(name, layers):
    p = dnn.profile(name, 0.01, bucket_cap_mb=0)
    full = dnn.profile(name, 0.01)
    assert len(p.buckets) == layers == len(dnn.MODELS[name].layers) and p.cap_bytes == 0
    assert [b.variables[0][0] for b in p.buckets] == list(range(layers))  # backward order
    assert all(len(b.variables) == 1 and b.variables[0][1] == b.params for b in p.buckets)
    assert p.backward_s == pytest.approx(full.backward_s)
    assert p.params == full.params == sum(b.params for b in p.buckets)
    # a bucket of several layers keeps each one's global index, in the same numbering
    bounds = full.buckets[0].variable_bounds(full.buckets[0].bytes // 4)
    assert [v for v, _, _ in bounds] == [v for v, _ in full.buckets[0].variables]
    assert bounds[0][1] == 0 and bounds[-1][2] == full.buckets[0].bytes // 4
    assert DnnWorkload(kind="dnn", model="resnet50", bucket_cap_mb=0).profile().buckets \
        == dnn.profile("resnet50", 0.01, bucket_cap_mb=0).buckets


def test_profile_rejects_bad_scales():
    for kwargs in ({"scale": 0}, {"scale": 2}, {"compute_scale": -1}, {"bucket_cap_mb": -1}):
        with pytest.raises(ValueError):
            dnn.profile("resnet50", **kwargs)


def test_summarize_stats_skip_warmup():
    rows = [{"job_id": "j", "iteration": i, "warmup": i < 0, "model": "m", "time": t,
             "exposed_comm": t / 2, "compute_share": 0.5, "correct": True}
            for i, t in zip([-1, 0, 1, 2], [9.0, 1.0, 2.0, 3.0], strict=True)]
    s = dnn.summarise_iterations(rows)
    assert s["rows"] == 3 and s["iterations"] == 3 and s["correct"]
    assert s["time"]["mean"] == 2.0 and s["time"]["p50"] == 2.0
    assert 2.9 < s["time"]["p99"] <= 3.0
    assert s["exposed_comm"]["mean"] == 1.0 and s["compute_share"]["p50"] == 0.5
    assert dnn.summarise_iterations(rows, include_warmup=True)["rows"] == 4
    assert math.isnan(dnn.summarise_iterations([])["time"]["mean"])


# ---------------------------------------------------------------- configs


def test_worker_config_workload_or_dnn(tmp_path):
    base = local_configs(ranks=2, dims=[2], algorithm="ring", sizes=[4], out_dir=tmp_path)[0]
    assert WorkerConfig.model_validate(base).dnn is None
    dnn_job = dict(base["job"], workload={"kind": "dnn", "model": "dlrm"})
    cfg = WorkerConfig.model_validate({**base, "job": dnn_job})
    assert cfg.dnn is not None and cfg.dnn.model == "dlrm" and cfg.dnn.iterations == 3
    (alias,) = local_configs(ranks=2, dims=[2], algorithm="ring", dnn={"model": "Transformer"},
                             out_dir=tmp_path)[:1]
    assert WorkerConfig.model_validate(alias).dnn.model == "bert-large"
    with pytest.raises(FabricLabError, match="unknown model"):
        local_configs(ranks=2, dims=[2], algorithm="ring", dnn={"model": "alexnet"},
                      out_dir=tmp_path)
    with pytest.raises(ValidationError):
        WorkerConfig.model_validate({**base, "job": dict(dnn_job, workload={
            "kind": "dnn", "model": "dlrm", "compute": "gpu"})})
    with pytest.raises(FabricLabError, match="one of sizes, a dnn workload or a training"):
        run_local(ranks=2, out_dir=tmp_path)


# ---------------------------------------------------------------- emulation


def run_dnn(tmp_path, name, **dnn_options):
    """A 4-rank DNN job on loopback processes; returns (result, iterations, buckets, colls)."""
    res = run_local(ranks=4, dnn={"model": name, **dnn_options}, timeout=10, wall_timeout=60,
                    out_dir=tmp_path)
    frames = [read_table(tmp_path, kind).to_pandas()
              for kind in ("iterations", "buckets", "collectives")]
    return res, *frames


def test_loopback_dnn_job_traces_and_correct_buckets(tmp_path):
    res, its, buckets, colls = run_dnn(tmp_path, "resnet50", scale=1e-3, compute_scale=0.01,
                                       iterations=2, warmup=1)
    prof = dnn.profile("resnet50", 1e-3, 0.01)
    nb = len(prof.buckets)
    assert not list(tmp_path.glob("*.partial.parquet"))
    assert sorted(p.name for p in tmp_path.glob("iterations-rank*.parquet")) == [
        f"iterations-rank{r}.parquet" for r in range(4)]
    # One row per rank and iteration (warm-up included, numbered negative).
    assert len(its) == 4 * 3
    assert sorted(its.groupby("rank")["iteration"].apply(list).tolist()) == [[-1, 0, 1]] * 4
    assert its["correct"].all() and (its["model"] == "resnet50").all()
    assert (its["buckets"] == nb).all() and (its["bytes"] == prof.total_bytes).all()
    assert (its["exposed_comm"] >= 0).all()
    assert (its["time"] >= its["compute"]).all()
    assert (its["compute"] >= its["nominal_compute"] * 0.99).all()
    assert np.allclose(its["compute_share"], its["compute"] / its["time"])
    assert np.allclose(its["end"] - its["start"], its["time"])
    # Every bucket of every iteration All-Reduced correctly, in profile order on every rank.
    assert len(buckets) == 4 * 3 * nb and buckets["correct"].all()
    for _, g in buckets.groupby(["rank", "iteration"]):
        assert g["bucket"].tolist() == list(range(nb))
        assert g["bytes"].tolist() == [b.bytes for b in prof.buckets]
        assert (g["start"] >= g["ready"]).all() and (g["end"] >= g["start"]).all()
        assert (g["start"].diff().dropna() > 0).all()  # one at a time, FIFO
    # The same collectives (same ids, same order) on every rank, in the usual tables.
    assert len(colls) == 4 * 3 * nb and colls["correct"].all()
    per_rank = colls.sort_values("coll").groupby("rank")[["coll", "size"]]
    assert len({tuple(map(tuple, g.to_numpy())) for _, g in per_rank}) == 1
    assert set(buckets["coll"]) == set(colls["coll"])
    assert len(read_table(tmp_path, "phases")) == len(colls)  # ring: one AR phase each
    s = res.dnn
    assert s is not None and s["rows"] == 8 and s["iterations"] == 2 and s["correct"]
    assert 0 < s["compute_share"]["mean"] <= 1 and s["time"]["p99"] >= s["time"]["p50"] > 0
    assert res.rows and all(r.correct for r in res.rows)


def test_no_compute_iteration_is_communication(tmp_path):
    _, its, _, _ = run_dnn(tmp_path, "resnet50", scale=1e-2, compute_scale=0,
                                 iterations=3)
    assert (its["compute"] == 0).all() and (its["compute_share"] == 0).all()
    assert np.allclose(its["exposed_comm"], its["time"])
    # Back-to-back bucket All-Reduces: the iteration is their sum plus hand-over gaps.
    assert (its["time"] >= its["comm"]).all()
    assert (its["time"] <= its["comm"] * 1.25 + 0.005).all()


def test_communication_overlaps_backward_compute(tmp_path):
    # ResNet-50 at 1% bytes: ≈ 8 ms of bucket All-Reduces on loopback; 30 ms of compute of
    # which the last bucket's backward (conv1..layer3) is ≈ 10 ms: room to hide the others.
    _, its, buckets, _ = run_dnn(tmp_path, "resnet50", scale=1e-2, compute_scale=0.3,
                                 iterations=3)
    measured = its[~its["warmup"]]
    # Structural: on every rank and iteration the first bucket's All-Reduce starts while
    # backward compute still runs (and, nearly always, has finished by then too).
    first = buckets[buckets["bucket"] == 0].merge(
        its[["rank", "iteration", "backward_end"]], on=["rank", "iteration"])
    assert (first["start"] < first["backward_end"]).all()
    assert (first["end"] < first["backward_end"]).mean() >= 0.5
    # Timing: a good share of the overlappable time is really saved (generous bound).
    saved = measured["compute"] + measured["comm"] - measured["time"]
    overlappable = np.minimum(measured["compute"], measured["comm"])
    assert (saved / overlappable).mean() >= 0.15
    assert (measured["time"] < measured["compute"] + measured["comm"]).mean() >= 0.5


@pytest.mark.parametrize(("algorithm", "dims", "compute"),
                         [("themis", [2, 2], "busy"), ("baseline", [2, 2], "sleep")])
def test_hierarchical_dnn_in_threads(tmp_path, algorithm, dims, compute):
    """The DNN mode runs on the chunked hierarchical All-Reduce too (in-process ranks)."""
    opts = {"model": "gnmt", "scale": 1e-4, "compute_scale": 0.005, "compute": compute}
    cfgs = local_configs(ranks=4, dims=dims, algorithm=algorithm, out_dir=tmp_path, chunks=3,
                         timeout=10, dnn=opts, iterations=2, warmup=0)

    def body(worker):
        trace = TraceWriter(tmp_path, worker.cfg.rank, dnn=True)
        worker.run_dnn(trace)
        trace.finish()

    run_in_threads(cfgs, body, timeout=60)
    its = read_table(tmp_path, "iterations").to_pandas()
    colls = read_table(tmp_path, "collectives").to_pandas()
    phases = read_table(tmp_path, "phases").to_pandas()
    nb = len(dnn.profile("gnmt", 1e-4).buckets)
    assert len(its) == 4 * 2 and its["correct"].all()
    assert (its["time"] >= its["compute"]).all() and not its["warmup"].any()
    assert len(colls) == 4 * 2 * nb and colls["correct"].all()
    assert (colls["size"] > 4).all()  # the size workload's sizes are not run
    # astra-sim-1.0 semantics (default): a themis chunk ends its last dimension with RS + AG
    assert set(phases["op"]) == ({"RS", "AG"} if algorithm == "themis" else {"RS", "AR", "AG"})


def test_stalled_peer_fails_dnn_job_cleanly(tmp_path):
    """A bucket All-Reduce that never completes fails the job with the peer's name, no hang."""
    with pytest.raises(FabricLabError, match=r"waited more than 1\.5 s for data from rank 1"):
        run_local(ranks=3, dnn={"model": "dlrm", "scale": 1e-3, "compute_scale": 0.1},
                  timeout=1.5, stall_ranks=(1,), wall_timeout=30, out_dir=tmp_path)
    assert not [p for p in tmp_path.glob("*.parquet") if ".partial" not in p.name]
    assert list(tmp_path.glob("iterations-rank0.partial.parquet"))
