"""`fabriclab sweep` on real Dask: a scheduler and two workers started here (one killed
mid-sweep), a LocalCluster giving the same results, and a rerun that runs only what is
missing. Every process started here is ended through its own Popen handle."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import psutil
import pytest

from analysis.sweep import MEASURED, simulated_results
from testbed.cli import main

pytest.importorskip("distributed")

ROOT = Path(__file__).parent.parent
DASK = Path(sys.executable).parent / "dask"
# 8 runs of a 4-GPU cluster, long enough (~0.3 s each) for a worker to die holding one.
SWEEP = """name: tiny
base: {leaves: 2, spines: 2, hosts_per_leaf: 2, jobs: 1500}
grid: {policy: [ecmp, vclos], seed: [1, 2, 3, 4]}
"""
POINTS = 8
START_TIMEOUT_S = 40


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}


def stop(procs: list[subprocess.Popen]) -> None:
    """Workers first, then the scheduler (a worker whose scheduler went first waits to
    reconnect); SIGKILL for any that has not ended 10 s after SIGTERM."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[tuple[str, list[subprocess.Popen]]]:
    """A scheduler and two single-thread workers (no nanny: Popen.kill kills the worker),
    every socket on 127.0.0.1 (a worker's HTTP server takes 0.0.0.0 unless told)."""
    address = f"tcp://127.0.0.1:{free_port()}"
    procs: list[subprocess.Popen] = []
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env()}
    try:
        procs.append(subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
             "--no-dashboard", "--dashboard-address", "127.0.0.1:0"], **quiet))
        for i in range(2):
            procs.append(subprocess.Popen(
                [DASK, "worker", address, "--nthreads", "1", "--no-nanny", "--name", f"w{i}",
                 "--host", "127.0.0.1", "--no-dashboard", "--dashboard-address",
                 "127.0.0.1:0", "--death-timeout", "30"],
                **quiet))
        from distributed import Client

        with Client(address, timeout=f"{START_TIMEOUT_S}s") as client:
            client.wait_for_workers(2, timeout=START_TIMEOUT_S)
        yield address, procs
    finally:
        stop(procs)


def point_dirs(out: Path) -> list[Path]:
    return sorted(d for d in out.iterdir() if d.is_dir() and len(d.name) == 16)


def results(out: Path) -> pd.DataFrame:
    return simulated_results(pd.read_parquet(out / "results.parquet"))


@pytest.fixture(scope="module")
def scheduler_run(dask_cluster, tmp_path_factory) -> tuple[Path, str, int]:
    """The sweep through --scheduler, one worker killed once the first run is written."""
    address, procs = dask_cluster
    tmp = tmp_path_factory.mktemp("sched")
    (tmp / "s.yaml").write_text(SWEEP)
    out = tmp / "out"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "testbed.cli", "sweep", str(tmp / "s.yaml"), "--out", str(out),
         "--scheduler", address, "--insecure"], env=env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (out.is_dir() and point_dirs(out)) and sweep.poll() is None:
            assert time.monotonic() < deadline, "no run finished in time"
            time.sleep(0.05)
        written_before_kill = len(point_dirs(out)) if out.is_dir() else 0
        procs[1].kill()  # the worker named w1, mid-sweep
        stdout, stderr = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert procs[1].wait(timeout=10) != 0
    assert sweep.returncode == 0, stderr[-800:]
    return out, stdout, written_before_kill


def test_a_killed_worker_loses_no_run_and_duplicates_none(scheduler_run) -> None:
    out, stdout, written_before_kill = scheduler_run
    assert written_before_kill < POINTS, "the sweep ended before the worker was killed"
    assert f"{POINTS} runs, {POINTS} run now, 0 already done, 0 failed" in stdout
    dirs = point_dirs(out)
    assert len(dirs) == POINTS
    for d in dirs:
        assert sorted(p.name for p in d.iterdir()) == [
            "jobs.csv", "point.json", "summary.json", "utilisation.csv"]
    assert not (out / ".partial").exists()
    assert not list(out.rglob("*.partial"))
    df = results(out)
    assert sorted(df["point"]) == [d.name for d in dirs]  # each run once
    assert df.groupby("policy").size().to_dict() == {"ecmp": 4, "vclos": 4}
    assert (df["jobs_completed"] > 0).all() and "avg_jct_s" in df.columns
    raw = pd.read_parquet(out / "results.parquet")
    assert set(MEASURED) <= set(raw.columns) and (raw["wall_s"] > 0).all()
    measured = raw.dropna(subset=["peak_rss_bytes"])  # null where the kernel cannot reset
    assert (measured["peak_rss_bytes"] >= measured["rss_start_bytes"]).all()
    csv = pd.read_csv(out / "results.csv")
    assert len(csv) == POINTS and set(csv["point"]) == set(df["point"])
    report = (out / "report.md").read_text()
    assert ("| policy | seeds | jobs_in_trace | jobs_completed | refused_unshapeable | "
            "dropped_too_large | avg_jct_s |") in report and "| ecmp | 4 |" in report


def test_a_local_cluster_gives_the_same_results(scheduler_run, tmp_path: Path,
                                                 capsys) -> None:
    sched_out = scheduler_run[0]
    (tmp_path / "s.yaml").write_text(SWEEP)
    out = tmp_path / "out"
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out", str(out), "--workers", "2"]) == 0
    assert f"{POINTS} run now" in capsys.readouterr().out
    pd.testing.assert_frame_equal(results(out), results(sched_out))
    for d in point_dirs(out):
        for name in ("jobs.csv", "utilisation.csv", "point.json"):
            assert (d / name).read_bytes() == (sched_out / d.name / name).read_bytes()


def test_a_rerun_runs_only_the_missing_run(tmp_path: Path, capsys) -> None:
    (tmp_path / "s.yaml").write_text(SWEEP.replace("jobs: 1500", "jobs: 20").replace(
        "seed: [1, 2, 3, 4]", "seed: [1, 2]"))
    out = tmp_path / "out"
    argv = ["sweep", str(tmp_path / "s.yaml"), "--out", str(out), "--workers", "1"]
    assert main(argv) == 0
    assert "4 run now, 0 already done" in capsys.readouterr().out
    dirs = point_dirs(out)
    kept = {d.name: (d / "summary.json").stat().st_mtime_ns for d in dirs[1:]}
    shutil.rmtree(dirs[0])
    assert main(argv) == 0
    assert "4 runs, 1 run now, 3 already done, 0 failed" in capsys.readouterr().out
    assert (dirs[0] / "summary.json").is_file()
    assert {n: (out / n / "summary.json").stat().st_mtime_ns for n in kept} == kept
    assert len(pd.read_parquet(out / "results.parquet")) == 4
    assert main(argv) == 0  # all done: no cluster started at all
    assert "0 run now, 4 already done" in capsys.readouterr().out
    (out / "notes.txt").write_text("not a sweep's")  # a directory a sweep did not write alone
    assert main(argv) == 2
    assert "holds notes.txt, which no sweep writes" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0  # emptied: every run again, the stray file gone
    assert "4 run now, 0 already done" in capsys.readouterr().out
    assert not (out / "notes.txt").exists() and len(point_dirs(out)) == 4


def test_the_local_cluster_listens_on_loopback_only() -> None:
    from testbed.sim.sweep_cluster import dask_client

    me = psutil.Process()
    with dask_client(workers=1) as client:
        client.wait_for_workers(1, timeout=START_TIMEOUT_S)
        listening = []
        for proc in [me, *me.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                listening += [c.laddr.ip for c in proc.net_connections("inet")
                              if c.status == psutil.CONN_LISTEN]
    assert listening and set(listening) == {"127.0.0.1"}, listening


def test_a_failing_run_is_listed_and_the_others_still_written(tmp_path: Path, capfd) -> None:
    (tmp_path / "s.yaml").write_text(
        "base: {leaves: 2, spines: 2, hosts_per_leaf: 2, jobs: 20}\n"
        "grid: {trace: [synthetic, 'helios:missing.csv']}\n")
    out = tmp_path / "out"
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out", str(out), "--workers", "1"]) == 1
    text, err = capfd.readouterr()  # the workers' output too: no worker traceback
    assert "2 runs, 1 run now, 0 already done, 1 failed" in text
    assert "(trace=helios:" in text and "missing.csv: No such file" in text
    assert "Traceback" not in text + err
    assert len(point_dirs(out)) == 1 and len(pd.read_csv(out / "results.csv")) == 1


def test_run_sweep_in_process_gives_the_table_or_names_what_failed(tmp_path: Path) -> None:
    from testbed.core.errors import FabricLabError
    from testbed.sim.sweep_cluster import dask_client
    from testbed.sim.sweep_run import run_sweep
    from testbed.sim.sweep_spec import SweepSpec, expand

    tiny = {"leaves": 2, "spines": 2, "hosts_per_leaf": 2, "jobs": 20}
    good = expand(SweepSpec(base=tiny, grid={"policy": ["ecmp", "vclos"]}))
    bad = expand(SweepSpec(base={**tiny, "trace": "helios:missing.csv"}))
    with dask_client(workers=1) as client:
        df = run_sweep(client, good, tmp_path / "good", "tiny")
        assert list(df["point"]) == [p.key for p in good]
        assert "| policy | seeds |" in (tmp_path / "good" / "report.md").read_text()
        with pytest.raises(FabricLabError, match=r"1 of 1 runs failed: \w+ \(base\): .*missing"):
            run_sweep(client, bad, tmp_path / "bad", "tiny")
