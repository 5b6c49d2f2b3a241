"""scripts/rapidnetsim_reference.py: reading RapidNetSim's task log, and its bad-input answers
(no RapidNetSim, no network: the parts that do not fetch or run it)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "rapidnetsim_reference.py"


def load():
    spec = importlib.util.spec_from_file_location("rapidnetsim_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_task_log_averages_like_cal_jrt_jwt(tmp_path: Path) -> None:
    ref = load()
    log = tmp_path / "task_time.log"
    # RapidNetSim writes arrivals as "debug taskid,..." for 5-tuple task lists
    log.write_text("debug taskid,0,arriving_time,10\ndebug taskid,1,arriving_time,20\n"
                   "debug taskid,2,arriving_time,30\n"
                   "taskid,0,start_time,10\ntaskid,1,start_time,40\n"
                   "taskid,0,finish_time,110\n")
    jobs = ref.read_task_log(log)
    summary = ref.summarise(jobs)
    assert summary["jobs_started"] == 2 and summary["jobs_finished"] == 1
    assert summary["avg_jwt_s"] == pytest.approx((0 + 20) / 2)  # over the started prefix
    assert summary["avg_jct_s"] == pytest.approx(100)
    assert summary["avg_jrt_s"] == pytest.approx(100)
    out = tmp_path / "jobs.csv"
    ref.write_jobs_csv(out, jobs, {0: 512, 1: 8, 2: 64})
    lines = out.read_text().splitlines()
    assert lines[0] == "job,gpus,arrival_s,start_s,finish_s"
    assert lines[3] == "2,64,30.0,,"


@pytest.mark.parametrize(("args", "field"), [
    (["--runs", "ecmp"], "--runs"),
    (["--gaps", "fast"], "--gaps"),
    (["--gaps", "0"], "--gaps"),
    (["--jobs", "6000"], "--jobs"),
])
def test_bad_input_is_one_sentence(tmp_path: Path, args: list[str], field: str) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and field in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()
