"""Process identity, signalling only what is proven ours, the run lock and state files (no
root needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from testbed.core.errors import FabricLabError
from testbed.emulator import cleanup, procs, runlock
from testbed.emulator.procs import ProcessId


@pytest.fixture
def child():
    p = subprocess.Popen(["sleep", "60"])
    yield p
    p.kill()
    p.wait()


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    return tmp_path / "state"


def test_identity_is_pid_and_start_time(child):
    me = procs.identify(child.pid)
    assert me is not None and me.pid == child.pid and me.alive()
    assert not ProcessId(child.pid, me.start_ticks + 1).alive()  # a reused PID is not ours
    assert procs.identify(2**22 + 7) is None  # above pid_max: no such process


def test_a_reused_pid_is_never_signalled(child):
    me = procs.identify(child.pid)
    impostor = ProcessId(child.pid, me.start_ticks - 1)  # what a recorded, wrapped PID looks like
    assert procs.send(impostor, signal.SIGKILL) is False
    assert child.poll() is None, "a process that only shares the PID was killed"
    assert procs.send(me, signal.SIGTERM) is True
    assert child.wait(timeout=5) == -signal.SIGTERM


def test_terminate_escalates_to_sigkill_and_never_signals_itself():
    p = subprocess.Popen([sys.executable, "-c",
                          "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
                          "print('ready', flush=True); time.sleep(60)"],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    me = procs.identify(os.getpid())
    left = procs.terminate([procs.identify(p.pid), me], grace_s=0.3)
    p.wait(timeout=5)
    assert p.returncode == -signal.SIGKILL
    assert left == [me]  # we are still here: never signalled


def test_the_callers_namespace_is_never_swept():
    assert procs.in_netns([procs.own_netns()]) == []


def test_run_ids_are_plain_so_they_are_safe_in_shell_commands(state_dir):
    state = cleanup.RunState.new(state_dir / "run", ["leaf0"], ["leaf0-eth1"])
    assert cleanup.RUN_ID.match(state.run_id)
    assert state.mark == f"fabriclab-run={state.run_id}"
    with pytest.raises(ValueError, match="run id"):
        cleanup.RunState("x; rm -rf /", [1, 1], [], [])


def test_clean_kills_only_recorded_processes_that_still_match(state_dir, child, monkeypatch):
    """A dead run's state names two processes: one still the same (killed), one whose PID
    now belongs to someone else (left alone). The state is kept until both are verified."""
    monkeypatch.setattr(cleanup, "marked_bridges", lambda state, rundir=None: [])
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        mine = procs.identify(child.pid)
        other = procs.identify(bystander.pid)
        dead_owner = [2**22 + 7, 1]  # no such process: the run's owner is gone
        state = cleanup.RunState("fl-0123456789ab", dead_owner, ["leaf0"], ["leaf0-eth1"],
                                 procs=[mine.as_list(), [other.pid, other.start_ticks + 5]])
        state.save()
        assert [s.run_id for s in cleanup.stale_states()] == [state.run_id]
        report = cleanup.clean_stale()
        assert report == [f"run {state.run_id}: removed 1 leftovers"]
        assert child.wait(timeout=5) < 0
        assert bystander.poll() is None, "a process with a recorded PID but another start " \
                                         "time was signalled"
        assert not state.path.exists()
    finally:
        bystander.kill()
        bystander.wait()


def test_state_is_kept_while_ovs_cannot_verify_the_bridges(state_dir, monkeypatch):
    def unreachable(state, rundir=None):
        raise cleanup.OvsUnreachable("database connection failed")

    monkeypatch.setattr(cleanup, "marked_bridges", unreachable)
    state = cleanup.RunState("fl-00000000000a", [2**22 + 7, 1], ["leaf0"], [])
    state.save()
    (line,) = cleanup.clean_stale()
    assert "Open vSwitch is not running" in line and "clean` again" in line
    assert state.path.exists(), "state forgotten although its bridges were not verified gone"
    monkeypatch.setattr(cleanup, "marked_bridges", lambda state, rundir=None: [])
    assert cleanup.clean_stale() == [f"run {state.run_id}: removed 0 leftovers"]
    assert not state.path.exists()


def test_unreadable_state_files_are_reported_not_deleted(state_dir, monkeypatch):
    monkeypatch.setattr(cleanup, "marked_bridges", lambda state, rundir=None: [])
    state_dir.mkdir()
    old = state_dir / "20250101-old.json"
    old.write_text(json.dumps({"run_id": "x", "owner_pid": 1, "pids": [1]}))
    (line,) = cleanup.clean_stale()
    assert "left untouched" in line and old.exists()


def test_a_second_run_gets_one_sentence(state_dir):
    code = ("import sys; from testbed.emulator import cleanup, runlock; from pathlib import Path;"
            f"cleanup.STATE_DIR = Path({str(state_dir)!r});"
            "\ntry:\n    with runlock.exclusive_run('second'): pass\n"
            "except Exception as e:\n    print(e); sys.exit(3)")
    with runlock.exclusive_run("first run"):
        with runlock.exclusive_run("calibration inside it"):  # re-entrant in one process
            pass
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.returncode == 3, out.stderr
        assert "another fabriclab run" in out.stdout and "first run" in out.stdout
        assert f"pid {os.getpid()}" in out.stdout and "\n" not in out.stdout.strip()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_lock_dies_with_its_holder(state_dir):
    code = ("import time; from testbed.emulator import cleanup, runlock; from pathlib import Path;"
            f"cleanup.STATE_DIR = Path({str(state_dir)!r});"
            "\nwith runlock.exclusive_run('doomed'):\n    print('held', flush=True);"
            " time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    with pytest.raises(FabricLabError, match="doomed"), runlock.exclusive_run("me"):
        pass
    p.kill()
    p.wait()
    with runlock.exclusive_run("me"):  # SIGKILL released it
        pass


def test_the_holder_says_how_to_stop_it(state_dir):
    code = ("import sys; from testbed.emulator import cleanup, runlock; from pathlib import Path;"
            f"cleanup.STATE_DIR = Path({str(state_dir)!r});"
            "\ntry:\n    runlock.acquire('second')\n"
            "except Exception as e:\n    print(e); sys.exit(3)")
    with runlock.exclusive_run("fabriclab up x.yaml", stop_hint="leave its CLI with exit"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 3, out.stderr
    assert "fabriclab up x.yaml, since " in out.stdout
    assert out.stdout.strip().endswith("): leave its CLI with exit")
