"""Stand-in servers for real (root): ``fabriclab servers local 2`` makes two that answer over
ssh, each with its own Open vSwitch and LAN address, reaching each other over the LAN;
``servers stop`` leaves no namespace, process or directory, and a second ``stop`` does
nothing; a ``servers local`` killed with SIGKILL at several points is cleaned by ``stop``.

It never touches stand-ins it did not start: if a record exists already, it is skipped. A
canary in the caller's namespace and one in an unrelated namespace must survive every test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.core.errors import FabricLabError
from testbed.core.servers import load_servers
from testbed.emulator import procs, ssh, standins
from testbed.emulator.faults import Canaries, wait_until
from testbed.emulator.preflight import is_root
from testbed.emulator.procs import ProcessId

ROOT = Path(__file__).resolve().parents[1]

# Not marked `root`: that mark also needs the machine's own Open vSwitch, which stand-ins
# do not use (each runs its own).
pytestmark = [
    pytest.mark.skipif(not is_root(), reason="needs root"),
    pytest.mark.skipif(not Path(standins.SSHD).is_file(),
                       reason="sshd is missing (apt-get install openssh-server)"),
]


@pytest.fixture(autouse=True)
def no_foreign_standins():
    if os.path.lexists(standins.BASE) or any(
            os.path.lexists(standins.NETNS_DIR / n) for n in ("fllan", "fls0", "fls1")):
        pytest.skip(f"stand-in servers exist already ({standins.BASE}): not ours to touch")
    with Canaries() as c:
        yield
        assert c.alive(), "a canary was killed"


def fabriclab(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def recorded() -> list[ProcessId]:
    state = standins.StandinsState.load()
    return [] if state is None else list(state.processes().values())


def residue() -> list[str]:
    """What any stand-in left: namespaces of their names, processes whose command line names
    the base directory, the directory."""
    left = [f"namespace {n}" for n in os.listdir(standins.NETNS_DIR)
            if n == "fllan" or n.startswith("fls")] if standins.NETNS_DIR.is_dir() else []
    for pid in procs.pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if str(standins.BASE).encode() in cmdline and pid != os.getpid():
            left.append(f"process {pid}: {cmdline.decode(errors='replace')[:80]}")
    if os.path.lexists(standins.BASE):
        left.append(str(standins.BASE))
    return left


def test_two_standins_answer_over_ssh_reach_each_other_and_stop_leaves_nothing(tmp_path):
    out = tmp_path / "servers.yaml"
    t0 = time.monotonic()
    started = fabriclab("servers", "local", "2", "--out", str(out))
    local_s = time.monotonic() - t0
    assert started.returncode == 0, started.stderr
    assert "s1: namespace fls1" in started.stderr  # progress on stderr
    spec = load_servers(out)
    assert spec.names == ["s0", "s1"]
    daemons = recorded()
    assert len(daemons) == 6 and all(p.alive() for p in daemons)
    for server in spec.servers:
        show = ssh.run(server, spec, ["sh", "-c", "ovs-vsctl show && ovs-vsctl get "
                                      "Open_vSwitch . external_ids:system-id && echo "
                                      "$OVS_RUNDIR && ip -4 -o addr show dev eth0"])
        assert show.returncode == 0, show.stderr
        assert f"fabriclab-{server.name}" in show.stdout  # its own OVS, not the machine's
        assert server.ovs_rundir in show.stdout
        assert f"inet {server.lan_ip}/24" in show.stdout
    ping = ssh.run(spec.servers[0], spec, ["ping", "-c", "1", "-W", "2", spec.servers[1].lan_ip])
    assert ping.returncode == 0, ping.stdout + ping.stderr
    again = fabriclab("servers", "local", "2", "--out", str(out))
    assert again.returncode == 0 and "running already" in again.stdout
    other = fabriclab("servers", "local", "3", "--out", str(out))
    assert other.returncode == 2 and "run `fabriclab servers stop` first" in other.stderr
    status = fabriclab("servers", "status")
    assert status.returncode == 0 and status.stdout.count("alive, reachable over ssh") == 2

    t0 = time.monotonic()
    stopped = fabriclab("servers", "stop")
    stop_s = time.monotonic() - t0
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not any(p.alive() for p in daemons)
    assert residue() == []
    twice = fabriclab("servers", "stop")
    assert twice.returncode == 0 and "nothing to stop" in twice.stdout
    print(f"servers local 2: {local_s:.1f} s, servers stop: {stop_s:.1f} s")


def _recorded_item(item: str) -> bool:
    """Whether the record being written names ``item``: "state" (it exists), a namespace or
    a daemon label."""
    try:
        data = json.loads(standins.StandinsState.path().read_text())
    except (OSError, ValueError):
        return False
    return item == "state" or item in data["netns"] or item in data["procs"]


@pytest.mark.parametrize("point", ["state", "fls0", "s0/ovs-vswitchd", "s1/sshd"])
def test_stop_cleans_a_start_killed_at(point, tmp_path):
    start = subprocess.Popen(
        [sys.executable, "-m", "testbed.cli", "servers", "local", "2", "--out",
         str(tmp_path / "servers.yaml")], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert wait_until(lambda: _recorded_item(point), timeout_s=30, poll_s=0.005), point
    finally:
        start.send_signal(signal.SIGKILL)
        start.wait()
    daemons = recorded()
    stopped = fabriclab("servers", "stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not any(p.alive() for p in daemons)
    assert residue() == []
    assert "nothing to stop" in fabriclab("servers", "stop").stdout


def test_a_start_that_fails_removes_what_it_made(tmp_path, monkeypatch):
    real = standins._start_sshd

    def failing(state, s, base):
        if s.index == 1:
            raise FabricLabError("s1's sshd would not start (a test fault)")
        real(state, s, base)

    monkeypatch.setattr(standins, "_start_sshd", failing)
    lines: list[str] = []
    with pytest.raises(FabricLabError, match="a test fault"):
        standins.start(2, tmp_path / "servers.yaml", lines.append)
    assert lines[-1] == "could not finish: removing what was made"
    assert residue() == []
    assert not (tmp_path / "servers.yaml").exists()
