"""`fabriclab up --wait` on a real fabric (root): its record appears, `fabriclab jobs` places,
lists and removes jobs through the controller (the job's rules reach the switches), hosts ping
through the fabric from another process, a second fabric command is refused in one sentence,
and Ctrl-C or SIGTERM leaves nothing behind; after a `kill -9`, `fabriclab clean` does.

A canary in the caller's namespace and one in an unrelated namespace must survive every test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testbed.emulator import cleanup, up_record
from testbed.emulator.faults import Canaries, fault_spec, residue, wait_until

pytestmark = [pytest.mark.root, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def canaries():
    with Canaries() as c:
        yield
        assert c.alive(), "a canary was killed"


def fabriclab(*args: str, **kwargs) -> subprocess.Popen:
    """``fabriclab ARGS`` from this checkout in a child process, output captured. SIGINT is
    reset to its default: a background child may inherit it ignored."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.pop("FABRICLAB_FAILPOINT", None)
    return subprocess.Popen([sys.executable, "-m", "testbed.cli", *args], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **kwargs)


def run(*args: str, timeout_s: float = 120) -> tuple[int, str]:
    proc = fabriclab(*args)
    out, _ = proc.communicate(timeout=timeout_s)
    return proc.returncode, out


def start_up(tmp_path: Path) -> tuple[subprocess.Popen, up_record.UpRecord, cleanup.RunState]:
    """`fabriclab up SPEC --wait` on the fault fabric under vclos (an experiment file: its
    policy is taken, its jobs are not placed); returns once its record is live."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(fault_spec(policy="vclos")))
    proc = fabriclab("up", str(spec), "--wait", "--out", str(tmp_path / "out"))

    def live() -> up_record.UpRecord | None:
        if proc.poll() is not None:
            pytest.fail(f"up exited ({proc.returncode}): {proc.communicate()[0]}")
        for r in up_record.registered()[0]:
            if r.run_dir.startswith(str(tmp_path / "out")) and r.alive():
                return r
        return None

    record = wait_until(live, timeout_s=180, poll_s=0.2)
    if record is None:
        proc.kill()
        pytest.fail(f"up never came up: {proc.communicate()[0]}")
    assert record.pid == proc.pid and record.policy == "vclos"
    state = cleanup.RunState(**json.loads((cleanup.STATE_DIR / f"{record.run_id}.json")
                                          .read_text()))
    assert cleanup.leftovers(state), "the fabric should be up"
    return proc, record, state


def pings(record: up_record.UpRecord, src: str, dst: str) -> bool:
    """One ping from ``src``'s namespace, as a user in another shell would send it."""
    out = subprocess.run(["nsenter", f"--net={record.netns(src)}", "ping", "-c1", "-W2",
                          record.hosts[dst][0]], capture_output=True, text=True, timeout=30)
    return " 0% packet loss" in out.stdout


def flows(switch: str) -> str:
    return subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", switch],
                          capture_output=True, text=True, check=True).stdout


def assert_nothing_left(record: up_record.UpRecord, state: cleanup.RunState) -> None:
    assert cleanup.leftovers(state) == []  # processes (controller included), pins, bridges
    assert not state.path.exists() and not state.pin_dir.exists()
    assert not record.registry_path.exists()
    assert residue() == []  # no state file, pin, bridge or interface of any run


def test_up_jobs_ping_and_ctrl_c_leaves_nothing(tmp_path):
    up, record, state = start_up(tmp_path)
    try:
        code, out = run("jobs", "add", "a", "--hosts", "h0,h2")
        assert code == 0 and out.startswith("job a placed: h0, h2 (via spine"), out
        code, out = run("jobs", "add", "b", "--size", "2", "--policy", "ecmp")
        assert code == 0 and "policy ecmp" in out, out
        code, out = run("jobs", "list", "--run", record.run_dir)
        assert code == 0 and [ln.split()[0] for ln in out.splitlines()[1:]] == ["a", "b"], out
        code, out = run("jobs", "list", "--json")
        cookie = hex(next(j["cookie"] for j in json.loads(out) if j["job_id"] == "a"))
        assert f"cookie={cookie}," in flows("leaf0"), "job a's rules are not on leaf0"

        assert pings(record, "h0", "h2") and pings(record, "h2", "h0")  # across the leaves
        assert pings(record, "h1", "h3")

        for second in (["run", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "second"),
                        "--no-report"],
                       ["up", str(tmp_path / "spec.yaml"), "--wait", "--out",
                        str(tmp_path / "second")]):
            code, out = run(*second)
            line = out.strip().splitlines()[-1]
            assert code == 2 and "another fabriclab run is using this machine's fabric" in line
            assert f"pid {up.pid}: fabriclab up " in line and f"`kill {up.pid}`" in line, out
            assert "Traceback" not in out and not (tmp_path / "second").exists()
            assert up.poll() is None, "the second command disturbed the first"

        code, out = run("jobs", "remove", "a")
        assert code == 0 and out.strip() == "job a removed: h0, h2 free", out
        assert f"cookie={cookie}," not in flows("leaf0")
        code, out = run("jobs", "remove", "a")
        assert code == 2 and "no running job a" in out
    finally:
        up.send_signal(signal.SIGINT)
        out, _ = up.communicate(timeout=120)
    assert up.returncode == 0, out
    assert "Traceback" not in out and out.rstrip().endswith("fabric down: nothing left"), out
    assert_nothing_left(record, state)
    assert (Path(record.run_dir) / up_record.NAME).exists()  # the session's own record stays
    code, out = run("jobs", "list")
    assert code == 2 and "no `fabriclab up` is running on this machine" in out
    code, out = run("jobs", "list", "--run", record.run_dir)
    assert code == 2 and "is no longer running" in out


def test_sigterm_tears_down(tmp_path):
    up, record, state = start_up(tmp_path)
    up.send_signal(signal.SIGTERM)
    out, _ = up.communicate(timeout=120)
    assert up.returncode == 0 and "Traceback" not in out, out
    assert_nothing_left(record, state)


def test_clean_removes_what_a_killed_up_left(tmp_path):
    up, record, state = start_up(tmp_path)
    up.kill()  # SIGKILL: no teardown at all
    up.communicate(timeout=30)
    assert cleanup.leftovers(state) and record.registry_path.exists()
    code, out = run("jobs", "list")
    assert code == 2 and "1 record of a stopped one left: `fabriclab clean` removes them" in out
    code, out = run("clean")
    assert code == 0, out
    assert f"run {state.run_id}: removed" in out
    assert "removed the record of a stopped `fabriclab up`" in out
    assert_nothing_left(record, state)
