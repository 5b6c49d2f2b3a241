"""The low findings of issue 27: the state directory is checked wherever it comes from, state,
lock and `up` records are private, pins are never followed through symlinks, a command job
does not inherit root's whole environment, and results keep no other user's command lines."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import time
from pathlib import Path

import pytest

from testbed.core.errors import FabricLabError
from testbed.emulator import cleanup, commands, runlock
from testbed.emulator.sampler import BusyProcesses

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's files need root")


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    return tmp_path / "state"


@needs_root
def test_a_state_directory_another_user_owns_is_refused(state):
    state.mkdir()
    os.chown(state, pwd.getpwnam("nobody").pw_uid, -1)
    with pytest.raises(FabricLabError, match="belongs to uid"):
        runlock.acquire("test")
    with pytest.raises(FabricLabError, match="belongs to uid"):
        cleanup.RunState.new(state / "run", [], []).save()


def test_state_lock_and_records_are_private(state):
    run = cleanup.RunState.new(state / "run", [], [])
    run.save()
    runlock.acquire("test")
    try:
        for path in (run.path, runlock.lock_path()):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    finally:
        runlock.release()


def test_a_symlinked_pin_is_never_taken_for_a_namespace(tmp_path):
    (tmp_path / "pins").mkdir()
    (tmp_path / "pins" / "h0").symlink_to("/proc/self/ns/net")
    assert cleanup.pinned_netns(tmp_path / "pins" / "h0") is None


def test_a_command_job_does_not_inherit_roots_secrets(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = commands.base_environment()
    assert "AWS_SECRET_ACCESS_KEY" not in env and "SSH_AUTH_SOCK" not in env
    assert env["PATH"] == os.environ["PATH"] and env["LC_ALL"] == "C.UTF-8"


@needs_root
def test_starved_seconds_keep_no_other_users_arguments():
    busy = BusyProcesses(below_idle=1.01, keep=100_000)  # every second, every process
    spin = ["timeout", "60", "sh", "-c", "while :; do :; done"]
    theirs = subprocess.Popen(["setpriv", "--reuid", "nobody", "--regid", "nogroup",
                               "--clear-groups", *spin, "their-secret"])
    mine = subprocess.Popen([*spin, "my-argument"])
    labels: list[str] = []
    try:
        busy.tick()
        for _ in range(10):  # a loaded machine may give the spinners little CPU at first
            time.sleep(1)
            busy.tick()
            labels = [p["process"] for s in busy.starved for p in s["busiest"]]
            if any("my-argument" in label for label in labels) \
                    and any(label.startswith("sh") and "my" not in label for label in labels):
                break
    finally:
        for proc in (theirs, mine):
            proc.terminate()
            proc.wait()
    assert any("my-argument" in label for label in labels), labels
    assert not any("their-secret" in label for label in labels), labels


def test_the_api_sockets_of_dead_runs_are_removed_and_live_ones_kept(state):
    from testbed.emulator.controller_proc import _api_listener

    where, sock = _api_listener()
    assert stat.S_IMODE(os.stat(where).st_mode) == 0o700
    assert cleanup.remove_dead_sockets() == 0 and where.is_dir()  # its run holds it
    sock.close()  # what a run killed with -9 leaves
    assert cleanup.remove_dead_sockets() == 1 and not where.exists()


def _open_files(pid: int) -> set[str]:
    """What `pid`'s descriptors point to now. A descriptor closed while it is listed (the
    child's redirections, or sleep reading its locale files) is skipped: it holds nothing."""
    targets = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            targets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    return targets


def test_daemons_start_ovs_leaves_running_never_hold_the_lock_it_ran_under(tmp_path):
    """`flock LOCK bash scripts/start-ovs.sh` (as the helpers' rules run it): the OVS daemons
    it starts outlive it and inherited LOCK's descriptor, so LOCK stayed locked for as long as
    they ran. Its no_inherited_fds gives whatever it starts none of the files it was handed."""
    script = (Path(__file__).resolve().parents[1] / "scripts" / "start-ovs.sh").read_text()
    body = script[script.index("no_inherited_fds() {"):]
    body = body[:body.index("\n}\n") + 3]
    lock = tmp_path / "lock"
    lock.touch()
    daemon = f"{body}\nno_inherited_fds\nsetsid sleep 30 >/dev/null 2>&1 < /dev/null &\necho $!"
    out = subprocess.run(["flock", str(lock), "bash", "-c", daemon], capture_output=True,
                         text=True, timeout=10, check=True)
    pid = int(out.stdout.strip())
    try:
        assert str(lock) not in _open_files(pid)
        free = subprocess.run(["flock", "-n", str(lock), "true"], timeout=10)
        assert free.returncode == 0  # the lock is free while the "daemon" still runs
    finally:
        os.kill(pid, 15)  # the sleep this test started
