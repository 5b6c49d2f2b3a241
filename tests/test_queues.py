"""Queue disciplines of the cluster simulator: each picks the job it should on hand-made queues,
fifo keeps the recorded results, a bad name is one sentence, a plug-in registered here runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sim_cases import CASES, run_case

from analysis.cluster import label_of
from testbed.cli import main as cli_main
from testbed.core.errors import FabricLabError, SpecError
from testbed.core.registry import QUEUES
from testbed.sim.cluster import ClusterConfig, simulate_cluster
from testbed.sim.queues import (
    QueueDiscipline,
    QueueView,
    RunningJob,
    WaitingJob,
    reservation,
)
from testbed.sim.sweep_spec import SweepSpec, expand, load_sweep, point_key, varying
from testbed.sim.traces import TraceJob

RECORDED = json.loads((Path(__file__).parent / "data" / "sim_cases.json").read_text())
PLUGINS = Path(__file__).parent / "plugins"
REPO = Path(__file__).parent.parent


def job(job_id: str, gpus: int, run_s: float = 100.0, grad_bytes: int = 1) -> WaitingJob:
    return WaitingJob(job_id, gpus, arrival_s=0.0, expected_run_s=run_s, grad_bytes=grad_bytes)


def view(waiting: list[WaitingJob], refused: tuple[str, ...] = (), free: int = 16,
         running: tuple[RunningJob, ...] = (), now_s: float = 0.0) -> QueueView:
    return QueueView(now_s, 16, free, waiting, running, frozenset(refused))


# A big job first, then smaller, shorter, lighter ones (arrival order = list order).
QUEUE = [job("big", 12, run_s=300, grad_bytes=50), job("mid", 4, run_s=50, grad_bytes=30),
         job("small", 2, run_s=200, grad_bytes=10)]


@pytest.mark.parametrize(("name", "first", "after_refusal"), [
    ("fifo", "big", None),                     # head-of-line: nothing passes a refused head
    ("fewest-gpus-first", "small", None),      # fewest GPUs, then head-of-line
    ("shortest-job-first", "mid", None),       # shortest expected run
    ("smallest-model-first", "small", None),   # fewest gradient bytes (small_task_first)
    ("dynamic-matching", "big", None),         # 3 waiting, not more than 6: arrival order
    ("first-fit", "big", "mid"),               # any job that fits, in arrival order
    ("easy-backfill", "big", "mid"),           # see test_easy_backfill_keeps_the_reservation
])
def test_each_discipline_picks_the_job_it_should(name: str, first: str,
                                                 after_refusal: str | None) -> None:
    discipline = QUEUES.get(name)
    assert discipline.next_job(view(QUEUE)).job_id == first
    picked = discipline.next_job(view(QUEUE, refused=(first,), free=8))
    assert (picked.job_id if picked else None) == after_refusal


def test_dynamic_matching_takes_the_fewest_gpus_when_more_than_six_wait() -> None:
    waiting = [job(f"j{i}", 8 - i) for i in range(7)]
    assert QUEUES.get("dynamic-matching").next_job(view(waiting)).job_id == "j6"
    assert QUEUES.get("dynamic-matching").next_job(view(waiting[:6])).job_id == "j0"


def test_easy_backfill_keeps_the_reservation() -> None:
    # 16 GPUs, 4 free; 8 end at 50 s, 4 more at 100 s: the 14-GPU head can start at 100 s
    # (the shadow time), with 2 GPUs to spare then.
    running = (RunningJob(8, 50.0), RunningJob(4, 100.0))
    waiting = [job("head", 14), job("long", 4, run_s=200), job("short", 4, run_s=60),
               job("narrow", 2, run_s=500), job("wide", 6, run_s=10)]
    v = view(waiting, refused=("head",), free=4, running=running, now_s=10.0)
    assert reservation(14, v) == (100.0, 2)
    easy = QUEUES.get("easy-backfill")
    # long would hold 4 GPUs past 100 s (2 spare): no; short ends by 70 s: yes.
    assert easy.next_job(v).job_id == "short"
    # narrow runs past the shadow time but fits in the 2 spare GPUs; wide has more than free.
    v = view(waiting, refused=("head", "short"), free=4, running=running, now_s=10.0)
    assert easy.next_job(v).job_id == "narrow"
    v = view(waiting, refused=("head", "short", "narrow"), free=4, running=running)
    assert easy.next_job(v) is None
    # Refused with enough GPUs free (fragmentation): reserved now, only the spare GPUs used.
    v = view(waiting, refused=("head",), free=16)
    assert reservation(14, v) == (0.0, 2)
    assert easy.next_job(v).job_id == "narrow"


def _jobs(*specs: tuple[str, float, int, float]) -> list[TraceJob]:
    """Jobs with no gradients: each runs exactly its compute time, wherever it is placed."""
    return [TraceJob(job_id, arrival, gpus, "m", 1, run_s, 0)
            for job_id, arrival, gpus, run_s in specs]


def _starts(queue: str) -> dict[str, float]:
    # One leaf of 4 GPUs: 3 held for 100 s, then a 4-GPU job, a 1-GPU job of 10 s and a
    # 1-GPU job of 500 s arrive.
    jobs = _jobs(("hold", 0, 3, 100), ("wide", 1, 4, 100), ("one", 2, 1, 10),
                 ("long", 3, 1, 500))
    config = ClusterConfig(leaves=1, spines=1, hosts_per_leaf=4, policy="gpu-count",
                           queue=queue)
    result = simulate_cluster(jobs, config)
    assert result.summary["queue"] == queue
    return {r["job_id"]: r["start_s"] for r in result.rows}


def test_the_simulator_starts_jobs_in_the_disciplines_order() -> None:
    assert _starts("fifo") == {"hold": 0, "wide": 100, "one": 200, "long": 200}
    # EASY: wide is reserved 100 s; "one" ends by then and starts at once, "long" would hold
    # the only spare GPU past 100 s and waits.
    assert _starts("easy-backfill") == {"hold": 0, "wide": 100, "one": 2, "long": 200}
    assert _starts("first-fit") == {"hold": 0, "wide": 512, "one": 2, "long": 12}
    assert _starts("fewest-gpus-first") == {"hold": 0, "wide": 512, "one": 2, "long": 12}
    assert _starts("shortest-job-first") == {"hold": 0, "wide": 100, "one": 2, "long": 200}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fifo_named_keeps_every_recorded_result(name: str) -> None:
    """Bit for bit: the recorded cases (tests/data/sim_cases.json, made before disciplines
    were plug-ins) with ``queue="fifo"`` given, compared exactly."""
    assert run_case(name, queue="fifo") == RECORDED[name]


def test_an_unknown_queue_is_one_sentence(tmp_path: Path, capsys) -> None:
    with pytest.raises(FabricLabError, match=r"^--queue 'lifo' is not a queue discipline; "
                       r"choose one of fifo, easy-backfill, "):
        ClusterConfig(leaves=1, spines=1, hosts_per_leaf=4, policy="ecmp", queue="lifo").check()
    code = cli_main(["simulate-cluster", "--leaves", "2", "--spines", "1", "--hosts-per-leaf",
                     "4", "--jobs", "5", "--queue", "lifo", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "--queue 'lifo' is not a queue discipline; choose one of" in err
    assert "Traceback" not in err
    with pytest.raises(SpecError, match=r"^grid\.queue\[1\]: 'lifo': 'lifo' is not a queue "
                       "discipline; choose one of fifo, "):
        expand(SweepSpec(base={"leaves": 2, "spines": 1, "hosts_per_leaf": 4},
                         grid={"queue": ["fifo", "lifo"]}))


def test_a_sweep_names_its_queue_and_fifo_keeps_the_old_keys() -> None:
    base = {"leaves": 2, "spines": 1, "hosts_per_leaf": 4}
    fifo, easy = expand(SweepSpec(base=base, grid={"queue": ["fifo", "easy-backfill"]}))
    assert (fifo.params["queue"], easy.params["queue"]) == ("fifo", "easy-backfill")
    before = {k: v for k, v in fifo.params.items() if k != "queue"}  # a sweep of before
    assert fifo.key == point_key(before) != easy.key


class LastComeFirst(QueueDiscipline):
    """A plug-in: the latest arrival first, head-of-line."""

    name = "last-come-first"

    def next_job(self, view: QueueView) -> WaitingJob | None:
        last = view.waiting[-1] if view.waiting else None
        return None if last is None or last.job_id in view.refused else last


def test_a_discipline_registered_from_outside_runs(tmp_path: Path) -> None:
    QUEUES.register("last-come-first", LastComeFirst())
    try:
        assert _starts("last-come-first") == {"hold": 0, "wide": 512, "one": 2, "long": 12}
        out = tmp_path / "run"
        assert cli_main(["simulate-cluster", "--leaves", "2", "--spines", "1",
                         "--hosts-per-leaf", "4", "--jobs", "20", "--queue", "last-come-first",
                         "--out", str(out)]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["queue"] == "last-come-first"
        assert label_of(summary) == "ecmp queue last-come-first"  # the report says which ran
    finally:
        QUEUES.unregister("last-come-first")


def test_a_discipline_from_an_installed_distribution_runs(tmp_path: Path) -> None:
    """A tiny distribution with a ``fabriclab.queues`` entry point on the path, as pip would
    install it: ``--queue last-come-first`` finds it by name; without it, one sentence."""
    dist = tmp_path / "site" / "fl_queue_demo-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fl-queue-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[fabriclab.queues]\nlast-come-first = fl_queue_demo:QUEUE\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path / "site"), str(PLUGINS), str(REPO)]))
    args = [sys.executable, "-m", "testbed.cli", "simulate-cluster", "--leaves", "2",
            "--spines", "1", "--hosts-per-leaf", "4", "--jobs", "20", "--queue",
            "last-come-first", "--out"]
    proc = subprocess.run([*args, str(tmp_path / "run")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["queue"] == "last-come-first"
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([*args, str(tmp_path / "again")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2
    assert "--queue 'last-come-first' is not a queue discipline; choose one of" in proc.stderr
    assert "Traceback" not in proc.stderr


# Found by a random search over small traces (4 leaves x 4 hosts, 2 spines, run times that do
# not depend on placement): under a discipline that reorders, a real placement can wait less
# than gpu-count. (arrival s, GPUs, run s) per job.
REORDERED = [(0, 2, 50), (5, 4, 100), (6, 8, 90), (26, 2, 80), (31, 4, 40), (36, 2, 10),
             (56, 4, 70), (57, 4, 40)]
BACKFILLED = [(20, 8, 40), (21, 2, 20), (26, 2, 20), (31, 4, 30), (32, 4, 60), (33, 1, 20),
              (34, 4, 40), (34, 1, 60), (54, 2, 60)]


def _avg_wait_s(jobs: list[tuple[int, int, int]], policy: str, queue: str) -> float:
    specs = _jobs(*((f"j{i}", a, g, r) for i, (a, g, r) in enumerate(jobs)))
    config = ClusterConfig(leaves=4, spines=2, hosts_per_leaf=4, policy=policy, queue=queue)
    summary = simulate_cluster(specs, config).summary
    assert summary["jobs_completed"] == len(jobs)
    return summary["avg_wait_s"]


@pytest.mark.parametrize(("jobs", "queue"), [
    (REORDERED, "fewest-gpus-first"), (REORDERED, "shortest-job-first"),
    (REORDERED, "first-fit"), (BACKFILLED, "easy-backfill")])
def test_gpu_count_bounds_fifo_only(jobs: list[tuple[int, int, int]], queue: str) -> None:
    """The same jobs: under fifo gpu-count waits no longer than vclos (the proof); under a
    discipline that reorders, vclos waits less than gpu-count under the same discipline
    (vclos refuses the 8-GPU job, which lets smaller ones pass), so there it is no bound."""
    assert _avg_wait_s(jobs, "gpu-count", "fifo") <= _avg_wait_s(jobs, "vclos", "fifo")
    assert _avg_wait_s(jobs, "vclos", queue) < _avg_wait_s(jobs, "gpu-count", queue)


def test_the_queues_sweep_runs_every_discipline_with_every_placement() -> None:
    _spec, points = load_sweep(REPO / "experiments" / "sweeps" / "queues.yaml")
    assert len(points) == 15
    assert {(p.params["queue"], p.params["policy"]) for p in points} == {
        (q, p) for q in ("fifo", "easy-backfill", "first-fit", "fewest-gpus-first",
                         "shortest-job-first") for p in ("gpu-count", "source-routing", "vclos")}
    assert varying(points) == ["policy", "queue"]
    # its trace is no file: it stays as written (it was made a path beside the sweep file)
    assert {p.params["trace"] for p in points} == {"rapidnetsim:241"}
