"""The workers' latency per step (testbed.emulator.step_latency): the probe a job runs, the
figure taken from it, and the model and simulator adding it (pure, no root)."""

from __future__ import annotations

import json

import pytest

from testbed.core.experiment import expand
from testbed.core.jobs import JobRun, resolve
from testbed.core.topology import build_plan
from testbed.emulator import prediction, step_latency
from testbed.sim.backend import SimRunner
from workloads.flat_model import flat_allreduce_s

HOSTS = [f"h{i}" for i in range(8)]


def _experiment(algorithm: str = "ring", **job_extra):
    (exp,) = expand({"name": "m", "rate_scale": 0.001,
                     "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 1,
                                "hosts_per_leaf": 4, "host_link_mbit_s": 100000,
                                "uplink_mbit_s": 200000, "host_link_delay_us": 2,
                                "uplink_delay_us": 2},
                     "jobs": [{"name": "a", "hosts": HOSTS, "algorithm": algorithm, **job_extra,
                               "workload": {"kind": "allreduce", "sizes": ["4KiB"]}}]})
    return exp, build_plan(exp.fabric, exp.rate_scale)


@pytest.mark.parametrize("algorithm, steps", [("ring", 14), ("halving-doubling", 6)])
def test_the_figure_is_what_each_step_took_beyond_the_model(algorithm: str, steps: int) -> None:
    """A probe that took the model's time plus 1.5 ms on each step of its chain gives 1.5 ms;
    one faster than the model gives 0."""
    exp, plan = _experiment(algorithm)
    job = JobRun("a", exp.jobs[0], resolve(exp.jobs[0], plan, HOSTS))
    probe = step_latency.probe_job(job.resolved)
    assert probe is not None and probe.name == "a-step-latency"
    assert probe.workload.sizes == [step_latency.PROBE_BYTES] and probe.hosts == HOSTS
    assert step_latency.chain_steps(probe) == steps
    collective = probe.plugin(algorithm)
    took = flat_allreduce_s(plan, HOSTS, collective, step_latency.PROBE_BYTES, 1.5e-3)
    found = step_latency.measure(plan, [job], lambda p: took)
    assert found is not None
    assert found["step_latency_s"] == pytest.approx(1.5e-3, abs=1e-6)
    assert found["per_job_s"] == {"a": found["step_latency_s"]}
    assert step_latency.measure(plan, [job], lambda p: 0.0)["step_latency_s"] == 0.0


def test_a_themis_job_is_measured_against_the_simulator(tmp_path) -> None:
    """Themis on a leaf-spine has no α-β model: its probe (the same schedule at 1 KiB) gets the
    latency at which the simulator's time for it is the measured one. A probe measured at the
    simulator's time with 1.5 ms per step gives 1.5 ms back, and that latency then reproduces
    the measured time; without the simulator nothing is measured."""
    exp, plan = _experiment("themis", order="scf", dims=[4, 2], chunks=4)
    job = JobRun("a", exp.jobs[0], resolve(exp.jobs[0], plan, HOSTS))
    probe = step_latency.probe_job(job.resolved)
    assert probe is not None and probe.algorithm == "themis" and probe.chunks == 4
    assert step_latency.measure(plan, [job], lambda p: 1.0) is None
    runs = iter(range(10))

    def simulate(j: JobRun, p, latency_s: float) -> float:
        return prediction.probe_s(exp, j, p, latency_s, tmp_path / str(next(runs)))

    took = simulate(job, probe, 1.5e-3)
    found = step_latency.measure(plan, [job], lambda p: took, simulate)
    assert found is not None and found["against"] == {"a": "simulator"}
    assert found["step_latency_s"] == pytest.approx(1.5e-3, rel=0.02)
    assert simulate(job, probe, found["step_latency_s"]) == pytest.approx(took, rel=0.02)
    # a chunk goes through 8 steps (3 + 1 Reduce-Scatter, 1 + 3 All-Gather) and the chunks
    # queue behind each other: the latency is paid a whole number of times, 8 or more
    paid = (took - simulate(job, probe, 0.0)) / 1.5e-3
    assert paid >= 8 and paid == pytest.approx(round(paid), abs=0.01)


def test_a_job_that_is_not_an_all_reduce_has_no_probe() -> None:
    (exp,) = expand({"name": "m", "rate_scale": 0.001,
                     "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 1,
                                "hosts_per_leaf": 4, "host_link_mbit_s": 100000,
                                "uplink_mbit_s": 200000},
                     "jobs": [{"name": "a", "hosts": HOSTS, "algorithm": "pairwise",
                               "workload": {"kind": "alltoall", "sizes": ["4KiB"]}}]})
    plan = build_plan(exp.fabric, exp.rate_scale)
    job = JobRun("a", exp.jobs[0], resolve(exp.jobs[0], plan, HOSTS))
    assert step_latency.probe_job(job.resolved) is None
    assert step_latency.measure(plan, [job], lambda p: 1.0, lambda *a: 1.0) is None


def test_the_model_and_the_simulator_add_it_to_every_step_of_a_rank_s_chain(tmp_path) -> None:
    """A 4 KiB ring on 8 ranks: 14 steps of one slice each, so 14 × the latency in both."""
    exp, plan = _experiment()
    job = resolve(exp.jobs[0], plan, HOSTS)
    ring = job.plugin("ring")
    assert (flat_allreduce_s(plan, HOSTS, ring, 4096, 1e-3)
            - flat_allreduce_s(plan, HOSTS, ring, 4096)) == pytest.approx(14e-3)
    times = []
    for latency_s in (0.0, 1e-3):
        run_dir = SimRunner(exp, tmp_path / str(latency_s), step_latency_s=latency_s).run()
        (rec,) = json.loads((run_dir / "jobs.json").read_text())
        times.append(min(r["time_us"] for r in rec["results"]) / 1e6)
        assert rec["model_s"]["4096"] == pytest.approx(
            flat_allreduce_s(plan, HOSTS, ring, 4096, latency_s))
    assert times[1] - times[0] == pytest.approx(14e-3, rel=0.02)


def test_a_fabric_the_flat_model_does_not_cover_measures_nothing() -> None:
    """A ring over one dimension of 4 on a multidim fabric: no α-β model to measure beyond."""
    (exp,) = expand({"name": "m", "policy": "shortest",
                     "fabric": {"kind": "multidim", "dims": [{"size": 4, "mbit_s": 12}]},
                     "jobs": [{"name": "a", "hosts_wanted": 4, "algorithm": "ring",
                               "workload": {"kind": "allreduce", "sizes": ["4KiB"]}}]})
    plan = build_plan(exp.fabric, exp.rate_scale)
    job = JobRun("a", exp.jobs[0], resolve(exp.jobs[0], plan, [h.name for h in plan.hosts]))
    assert step_latency.measure(plan, [job], lambda p: 1.0) is None
