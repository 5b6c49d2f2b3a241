"""Experiment specs: variants expand, mistakes are one sentence naming the field (no root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cli import main
from testbed.core.errors import SpecError
from testbed.core.experiment import expand, load_experiments
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.runner import Runner
from testbed.sim.backend import SimBackend

BASE = {
    "name": "t",
    "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
               "host_link_mbit_s": 50, "uplink_mbit_s": 50},
    "jobs": [{"name": "a", "hosts_wanted": 2,
              "workload": {"kind": "allreduce", "sizes": ["1MiB", 64]}}],
}


def err(data) -> str:
    with pytest.raises(SpecError) as exc:
        for exp in expand(data):
            Runner(exp, Path("/nonexistent"))
    return str(exc.value)


def test_sizes_parse_and_defaults_fill_in():
    (exp,) = expand(BASE)
    job = exp.jobs[0]
    assert job.workload.sizes == [1 << 20, 64]
    assert (job.algorithm, job.transport, job.chunks, exp.policy) == ("ring", "zerocopy", 4, None)


def test_repeats_default_to_one_and_reach_every_variant():
    assert expand(BASE)[0].repeats == 1
    runs = expand(dict(BASE, repeats=3, variants=[{"name": "e"}, {"name": "v", "repeats": 2}]))
    assert [r.repeats for r in runs] == [3, 2]


def test_variants_replace_keys_and_override_jobs():
    data = dict(BASE, variants=[
        {"name": "e", "policy": "ecmp"},
        {"name": "v", "policy": "vclos", "job_overrides": {"transport": "rpc"}},
        {"name": "m", "fabric": {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 5}]},
         "jobs": [{"name": "x", "hosts_wanted": 2, "algorithm": "themis",
                   "workload": {"kind": "allreduce", "sizes": [64]}}]},
    ])
    runs = expand(data)
    assert [r.name for r in runs] == ["t-e", "t-v", "t-m"]
    assert runs[1].jobs[0].transport == "rpc" and runs[0].jobs[0].transport == "zerocopy"
    assert runs[2].fabric.kind == "multidim"


@pytest.mark.parametrize(("change", "words"), [
    ({"name": "bad name"}, "name: 'bad name' is not a name: use 1 to 40 letters, digits"),
    ({"policy": "magic"}, "policy: 'magic' is not a routing policy; choose one of ecmp, "),
    ({"jobs": []}, "jobs: List should have at least 1 item"),
    ({"jobs": [{"name": "a", "workload": {"kind": "allreduce", "sizes": [64]}}]},
     "jobs.0: give exactly one of hosts or hosts_wanted"),
    ({"jobs": [{"name": "a", "hosts": ["h0", "$(reboot)"],
                "workload": {"kind": "allreduce", "sizes": [64]}}]}, "is not a host name"),
    ({"jobs": [{"name": "a", "hosts_wanted": 2,
                "workload": {"kind": "allreduce", "sizes": [6]}}]},
     "jobs.0.workload.sizes: 6 bytes is not a whole number of float32 values"),
    ({"jobs": [{"name": "a", "hosts_wanted": 2, "workload": {"kind": "dnn", "model": "vgg"}}]},
     "jobs.0.workload.model"),
    ({"jobs": [{"name": "a", "hosts": ["h0", "h9"],
                "workload": {"kind": "allreduce", "sizes": [64]}}]},
     "jobs.0.hosts: h9 is not a host of this fabric"),
    ({"jobs": [{"name": "a", "hosts_wanted": 9,
                "workload": {"kind": "allreduce", "sizes": [64]}}]},
     "jobs.0.hosts_wanted: 9 hosts, the fabric has 4"),
    ({"policy": "ocs-vclos"}, "policy: ocs-vclos does not route a leaf_spine fabric; use ecmp"),
    ({"colour": "red"}, "colour: unknown key"),
    ({"repeats": 0}, "repeats: Input should be greater than or equal to 1"),
    ({"jobs": [{"name": "a", "hosts": ["h0", "h1"], "workload": {"kind": "allreduce",
                                                                 "sizes": [64]}},
               {"name": "b", "hosts": ["h2", "h1"], "workload": {"kind": "allreduce",
                                                                 "sizes": [64]}}]},
     "jobs a and b both list host h1"),
])
def test_mistakes_name_their_field(change, words):
    msg = err(dict(BASE, **change))
    assert words in msg and "\n" not in msg


def test_multidim_job_rules():
    md = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 5}, {"size": 2, "mbit_s": 5}]}
    assert "spans all 4 hosts" in err(dict(BASE, fabric=md))
    ring = dict(BASE, fabric=md, jobs=[{"name": "a", "hosts_wanted": 4,
                                         "workload": {"kind": "allreduce", "sizes": [64]}}])
    assert "a flat ring needs a leaf-spine fabric" in err(ring)


SIM_ONLY = {"themis-e2e.yaml"}  # the paper's 1024-NPU systems at their real rates


def test_ready_experiments_validate():
    files = sorted(Path("experiments").glob("*.yaml"))
    assert any(f.name == "demo.yaml" for f in files)
    for f in files:
        if f.name in SIM_ONLY:
            with pytest.raises(SpecError, match="simulate it"):
                load_experiments(f)
            for exp in load_experiments(f, shaped=False):
                SimBackend().check(exp)
            continue
        for exp in load_experiments(f):
            Runner(exp, Path("/nonexistent"))  # checked against its fabric, nothing created
            build_plan(parse_fabric({"fabric": exp.fabric.model_dump(),
                                     "rate_scale": exp.rate_scale}), exp.rate_scale)


def test_run_with_a_bad_spec_is_one_sentence_and_creates_nothing(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\nfabric: {kind: leaf_spine, leaves: 1, spines: 1, "
                    "hosts_per_leaf: 2, host_link_mbit_s: 10, uplink_mbit_s: 10}\n"
                    "jobs: [{name: a, hosts: [h0, h7], workload: {kind: allreduce, "
                    "sizes: [64]}}]\n")
    assert main(["run", str(spec), "--out", str(tmp_path / "results")]) == 2
    err_text = capsys.readouterr().err.strip()
    assert err_text.endswith("jobs.0.hosts: h7 is not a host of this fabric (h0..h1)")
    assert not (tmp_path / "results").exists()


def test_a_jobs_semantics_defaults_to_astra_sim_and_reaches_the_worker_config(tmp_path):
    from workloads.worker import WorkerConfig

    (exp,) = expand({"name": "s", "fabric": {"kind": "multidim", "dims": [
        {"size": 2, "mbit_s": 10}, {"size": 2, "mbit_s": 20}]},
        "jobs": [{"name": "t", "hosts_wanted": 4, "algorithm": "themis",
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"]}}]})
    assert exp.jobs[0].semantics == "astra-sim-1.0"
    with pytest.raises(SpecError, match="semantics"):
        expand({**exp.model_dump(), "jobs": [{**exp.jobs[0].model_dump(),
                                               "semantics": "ns3"}]})
    from testbed.core.jobs import resolve
    from testbed.emulator.workers import fabric_configs

    plan = build_plan(exp.fabric)
    spec = exp.jobs[0].model_copy(update={"semantics": "fabriclab"})
    job = resolve(spec, plan, [h.name for h in plan.hosts])
    assert job.dims == [2, 2] and job.dim_rates_bps == [10e6, 20e6]
    cfg = fabric_configs(plan, job, out_dir=tmp_path)[0]
    assert WorkerConfig.model_validate(cfg).job.semantics == "fabriclab"
