"""Fault injection on real fabrics (root): whatever happens to a run, nothing of it is left and
nothing that is not its own is touched.

Every test here runs with two canaries: a process in the caller's own network namespace and
one in an unrelated namespace, neither started by any run. Both must survive every fault.
Runs are the real CLI (``fabriclab run``) in a child process; faults are real signals, sent
by the run to itself at a named point (``testbed.emulator.failpoints``) or by the test to a
process the run recorded as its own, or to the OVS daemons.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from testbed.emulator import cleanup, procs
from testbed.emulator.failpoints import POINTS
from testbed.emulator.faults import (
    FABRIC,
    FABRICLAB,
    Canaries,
    fabriclab,
    fault_spec,
    ovs_daemons,
    recorded,
    residue,
    run_of,
    wait_until,
)
from testbed.emulator.preflight import ovs_running

pytestmark = [pytest.mark.root, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def spec_file(tmp_path: Path, iterations: int = 20, policy: str = "vclos") -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(fault_spec(iterations, policy)))
    return path


def summary(out: Path) -> dict:
    (path,) = out.glob("*/summary.json")
    return json.loads(path.read_text())


def assert_nothing_left(state: cleanup.RunState | None) -> None:
    if state is not None:
        assert cleanup.leftovers(state) == []
        assert not state.path.exists() and not state.pin_dir.exists()
    assert residue() == []


def wait_for(what: str, predicate, timeout_s: float = 60.0):
    value = wait_until(predicate, timeout_s, poll_s=0.2)
    if not value:
        pytest.fail(f"timed out waiting for {what}")
    return value


@pytest.fixture(autouse=True)
def canaries():
    """A process in our own namespace and one in an unrelated one: both must survive."""
    with Canaries() as c:
        yield c.ids
        assert c.alive(), "a canary was killed"


def signalled_pids(strace_log: str) -> set[int]:
    """PIDs that received a signal (other than the probe 0), by kill() or through a pidfd."""
    hits: set[int] = set()
    fds: dict[tuple[str, str], int] = {}
    for line in strace_log.splitlines():
        if m := re.match(r"(\d+)\s+pidfd_open\((\d+), \d+\)\s+= (\d+)", line):
            fds[(m[1], m[3])] = int(m[2])
        elif m := re.match(r"(\d+)\s+pidfd_send_signal\((\d+), (\w+)", line):
            hits.add(fds[(m[1], m[2])])
        elif (m := re.match(r"\d+\s+t?g?kill\((-?\d+), (?:-?\d+, )?(\w+)", line)) \
                and m[2] != "0":
            hits.add(int(m[1]))
    return hits


def clean_under_strace(tmp_path: Path) -> tuple[subprocess.CompletedProcess, set[int]]:
    log = tmp_path / "strace.log"
    out = subprocess.run(["strace", "-f", "-qq", "-o", str(log), "-e",
                          "trace=kill,tkill,tgkill,pidfd_open,pidfd_send_signal",
                          FABRICLAB, "clean"], capture_output=True, text=True, timeout=120)
    return out, signalled_pids(log.read_text())


@pytest.mark.parametrize("point", POINTS)
def test_kill_9_at_any_point_then_clean_signals_only_the_run_and_leaves_nothing(
        tmp_path, point, canaries):
    out = tmp_path / "out"
    run = fabriclab("run", str(spec_file(tmp_path)), "--out", str(out), "--no-report",
                    failpoint=f"{point}:KILL")
    log, _ = run.communicate(timeout=300)
    assert run.returncode == -signal.SIGKILL, log
    state = run_of(out)
    assert state is not None and cleanup.leftovers(state), "the killed run left nothing?"
    ours = {p.pid for p in cleanup.run_processes(state)}
    result, hit = clean_under_strace(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"run {state.run_id}: removed" in result.stdout
    assert hit <= ours, f"clean signalled {sorted(hit - ours)}, not processes of the run"
    assert not {c.pid for c in canaries} & hit
    assert_nothing_left(state)
    # and the machine is fit for the next run
    again = fabriclab("run", str(spec_file(tmp_path, iterations=2)), "--out",
                      str(tmp_path / "again"), "--no-report")
    log, _ = again.communicate(timeout=300)
    assert again.returncode == 0, log
    assert summary(tmp_path / "again")["status"] == "ok"
    assert_nothing_left(None)


@pytest.mark.parametrize("point", POINTS)
def test_ctrl_c_at_any_point_tears_everything_down_and_marks_the_run_incomplete(
        tmp_path, point):
    out = tmp_path / "out"
    run = fabriclab("run", str(spec_file(tmp_path)), "--out", str(out), "--no-report",
                    failpoint=f"{point}:INT")
    log, _ = run.communicate(timeout=300)
    assert run.returncode != 0, log
    assert "Traceback" not in log, log
    s = summary(out)
    if point == "teardown":  # the jobs were done: the interrupted teardown still finished
        assert s["status"] in ("ok", "incomplete")
    else:
        assert s["status"] == "incomplete" and s["error"] == "interrupted"
    assert_nothing_left(None)


def test_a_second_run_gets_one_sentence_and_the_first_is_untouched(tmp_path):
    first = fabriclab("run", str(spec_file(tmp_path, iterations=200)), "--out",
                      str(tmp_path / "first"), "--no-report")
    try:
        wait_for("the first run's workers", lambda: (s := run_of(tmp_path / "first"))
                 and len(s.procs) > 10)
        second = fabriclab("run", str(spec_file(tmp_path)), "--out", str(tmp_path / "second"),
                           "--no-report")
        log, _ = second.communicate(timeout=120)
        assert second.returncode == 2
        lines = [ln for ln in log.splitlines() if "another fabriclab run" in ln]
        assert lines and "Traceback" not in log, log
        assert first.poll() is None, "the first run was disturbed"
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
    assert summary(tmp_path / "first")["status"] == "incomplete"
    assert_nothing_left(None)


def start_ovs() -> None:
    subprocess.run(["bash", str(ROOT / "scripts" / "start-ovs.sh")], check=True,
                   capture_output=True, timeout=120)


def test_ovs_killed_mid_run_fails_in_one_sentence_and_clean_finishes_once_ovs_is_back(
        tmp_path):
    out = tmp_path / "out"
    run = fabriclab("run", str(spec_file(tmp_path, iterations=200)), "--out", str(out),
                    "--no-report")
    try:
        wait_for("collectives under way", lambda: list(out.glob("*/jobs/a/*rank0*parquet")))
        daemons = ovs_daemons()
        assert len(daemons) == 2
        procs.terminate(daemons, grace_s=0)  # SIGKILL, as a crash would
        log, _ = run.communicate(timeout=180)
        assert run.returncode == 1, log
        s = summary(out)
        assert s["status"] == "failed" and "Open vSwitch stopped" in s["error"]
        assert "\n" not in s["error"] and "Traceback" not in log
        assert list(out.glob("*/link_samples.parquet")), "the traces so far are kept"
        state = run_of(out)
        assert state is not None, "state forgotten although the bridges were not removed"
        assert s["leftovers"] == ["bridges unverified (Open vSwitch is not running)"]
        early = subprocess.run([FABRICLAB, "clean"], capture_output=True, text=True)
        assert early.returncode == 1 and "Open vSwitch is not running" in early.stdout
        assert state.path.exists()
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        start_ovs()
    assert ovs_running()
    late = subprocess.run([FABRICLAB, "clean"], capture_output=True, text=True)
    assert late.returncode == 0, late.stdout
    assert_nothing_left(state)


def test_controller_killed_mid_collective_is_restarted_and_the_jobs_finish(tmp_path):
    out = tmp_path / "out"
    run = fabriclab("run", str(spec_file(tmp_path, iterations=60)), "--out", str(out),
                    "--no-report")
    wait_for("collectives under way", lambda: list(out.glob("*/jobs/a/*rank0*parquet")))
    state = run_of(out)
    victim = wait_for("the controller", lambda: recorded(state, b"sdn_app.controller"))
    # stopped first, so that the run's once-a-second health check is waiting on it when it
    # dies: a request to a dead controller must not wait out its timeout (the listening socket
    # outlives it), or the jobs end before the run notices (CI once saw no restart)
    assert procs.send(victim, signal.SIGSTOP)
    time.sleep(1.5)
    assert procs.send(victim, signal.SIGKILL)
    log, _ = run.communicate(timeout=300)
    assert run.returncode == 0, log
    s = summary(out)
    assert s["status"] == "ok" and s["controller_restarts"] == 1
    assert all(j["correct"] for j in s["jobs"].values())
    ctl_log = next(out.glob("*/controller.log")).read_text()
    assert ctl_log.count("leaf0 programmed") >= 2, "the restarted controller did not " \
                                                  "reprogram the switches"
    assert_nothing_left(state)


# -- a fabric link going down mid-run --------------------------------------------------------


def fabric_of(tmp_path: Path, policy: str):
    from testbed.core.spec import parse_fabric
    from testbed.core.topology import build_plan
    from testbed.emulator.fabric import Fabric

    return Fabric(build_plan(parse_fabric({"fabric": FABRIC})), tmp_path / "run",
                  policy=policy)


def set_link(fab, leaf: int, spine: int, up: bool) -> None:
    """Bring one leaf-spine link down or up at the leaf's end (an interface of this run)."""
    name = f"leaf{leaf}-eth{1 + 2 + spine}"  # hosts_per_leaf = 2: uplinks are ports 3, 4
    assert cleanup.intf_alias(name) == fab.state.mark
    subprocess.run(["ip", "link", "set", "dev", name, "up" if up else "down"], check=True)


def group_ports(switch: str, group_id: int) -> list[str]:
    dump = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-groups", switch],
                          capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in dump.splitlines() if f"group_id={group_id}," in ln)
    return re.findall(r"actions=output:(\d+)", line)


def test_ecmp_moves_every_flow_off_a_link_that_goes_down(tmp_path):
    """Four TCP flows in both directions between the leaves; leaf0-spine0 goes down after
    2 s. OVS's select group skips a bucket whose watched port is down (leaf0's own uplink),
    and the controller re-sends leaf1's group without spine0, whose way down to leaf0 is
    gone. Every flow keeps moving to the end; every pair still pings."""
    fab = fabric_of(tmp_path, "ecmp")
    with fab:
        plan = fab.plan
        pairs = [("h0", "h2"), ("h1", "h3"), ("h2", "h0"), ("h3", "h1")]
        servers, clients = [], []
        for k, (_src, dst) in enumerate(pairs):
            servers.append(fab.popen(dst, ["iperf3", "-s", "-1", "-p", str(5400 + k)],
                                     stdout=subprocess.DEVNULL))
        time.sleep(0.5)
        for k, (src, dst) in enumerate(pairs):
            clients.append(fab.popen(src, ["iperf3", "-c", plan.node(dst).ip(), "-p",
                                           str(5400 + k), "-t", "7", "-i", "1", "-J"],
                                     stdout=subprocess.PIPE, text=True))
        time.sleep(2)
        set_link(fab, 0, 0, up=False)
        health = wait_for("the controller to see the link down",
                          lambda: (h := fab.controller.get("/health"))["links_down"] and h)
        assert health["links_down"] == ["leaf0-spine0"] and health["broken_jobs"] == {}
        assert group_ports("leaf1", 1) == ["4"]  # leaf1 -> leaf0 only through spine1
        assert group_ports("leaf0", 2) == ["4"]
        for (src, dst), c in zip(pairs, clients, strict=True):
            out, _ = c.communicate(timeout=60)
            intervals = [i["sum"]["bits_per_second"] for i in json.loads(out)["intervals"]]
            assert min(intervals[-3:]) > 1e6, f"{src}->{dst} stalled after the failure: " \
                                              f"{[round(b / 1e6, 1) for b in intervals]}"
        for s in servers:
            s.wait(timeout=10)
        for a, b in (("h0", "h2"), ("h1", "h3"), ("h2", "h1"), ("h3", "h0")):
            assert " 0% packet loss" in fab.host(a).cmd(f"ping -c1 -W2 {plan.node(b).ip()}")
        set_link(fab, 0, 0, up=True)
        wait_for("the link back up", lambda: fab.controller.get("/health")["links_down"] == [])
        assert sorted(group_ports("leaf1", 1)) == ["3", "4"]


def test_vclos_reports_a_broken_path_in_one_sentence(tmp_path):
    fab = fabric_of(tmp_path, "vclos")
    with fab:
        job = fab.controller.create_job("a", hosts=["h0", "h2"])
        (spine,) = job["spines"]
        assert fab.health() is None
        set_link(fab, 1, spine, up=False)
        reason = wait_for("the broken path", fab.health)
        assert reason.startswith(f"job a: link leaf1-spine{spine} is down") and "\n" not in reason
        assert "0% packet loss" not in fab.host("h0").cmd(
            f"ping -c1 -W1 {fab.plan.node('h2').ip()}").replace("100% packet loss", "")
