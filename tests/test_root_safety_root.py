"""Issue 27 on real fabrics (root, Open vSwitch): a fabric refuses a run directory another
user planted, and configures its hosts and kernel bridges with batches on standard input, so
nothing root later runs is ever a file in the run directory."""

from __future__ import annotations

import os
import pwd

import pytest

from testbed.core.errors import FabricLabError
from testbed.core.spec import one_switch_fabric, parse_fabric
from testbed.core.topology import build_plan, ring_neighbours
from testbed.emulator import cleanup, runlock
from testbed.emulator.fabric import Fabric

pytestmark = [pytest.mark.root]

ONE_SWITCH = one_switch_fabric(2, 50)
MULTIDIM = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                         {"size": 3, "mbit_s": 20, "kind": "ring"}]}


def plan_of(fabric: dict):
    return build_plan(parse_fabric({"fabric": fabric}))


def refused(run_dir, match: str) -> None:
    with pytest.raises(FabricLabError, match=match):
        Fabric(plan_of(ONE_SWITCH), run_dir).start()
    assert runlock.holder() is None  # the lock was released


def test_a_fabric_refuses_a_run_directory_another_user_planted(tmp_path):
    planted = tmp_path / "run"
    planted.mkdir()
    os.chown(planted, pwd.getpwnam("nobody").pw_uid, -1)
    refused(planted, "belongs to uid")
    assert list(planted.iterdir()) == []


def test_a_fabric_refuses_a_symlinked_run_directory(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "run").symlink_to(target)
    refused(tmp_path / "run", "symlink")
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("switches", ["ovs", "kernel"])
def test_hosts_and_kernel_bridges_are_configured_from_stdin_not_files(tmp_path, switches):
    plan = plan_of(MULTIDIM)
    with Fabric(plan, tmp_path / "run", switches=switches) as fab:
        state = cleanup.RunState(**vars(fab.state))
        nxt, _ = ring_neighbours(0, 1, plan.spec.sizes)  # a route and ARP entry from the batch
        for ip in (plan.hosts[1].nic(0).ip, plan.hosts[nxt].nic(1, "prev").ip):
            assert " 0% packet loss" in fab.host("h0").cmd(f"ping -c1 -W2 {ip}")
        written = {p.relative_to(tmp_path / "run").as_posix()
                   for p in (tmp_path / "run").rglob("*")}
    assert not any(p.startswith("setup") for p in written), written
    assert cleanup.leftovers(state) == []


def test_a_run_whose_buffers_would_not_fit_is_refused_before_anything_starts(
        tmp_path, monkeypatch, capsys):
    import yaml

    from testbed.cli import main
    from testbed.emulator import preflight

    spec = tmp_path / "big.yaml"
    spec.write_text(yaml.safe_dump({"name": "big", "fabric": ONE_SWITCH, "jobs": [
        {"name": "a", "hosts_wanted": 2,
         "workload": {"kind": "allreduce", "sizes": ["1GiB"]}}]}))
    monkeypatch.setattr(preflight, "mem_available_bytes", lambda: 1024**3)
    assert main(["run", str(spec), "--out", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert "8.0 GiB of buffers" in err and "Traceback" not in err
    assert not (tmp_path / "results").exists()


# -- the controller's sockets (Medium 4 and 5) ------------------------------------------------

NOBODY = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]
OFP_HELLO, OFP_FEATURES_REQUEST, OFP_FEATURES_REPLY = 0, 5, 6
# Play a switch: hello, then answer the features request with DPID argv[3]; print whether
# the controller then ended the connection (it refuses) or kept it (it took the switch).
FAKE_SWITCH = """
import socket, struct, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
s.sendall(struct.pack("!BBHI", 4, 0, 8, 1))
buf, deadline = b"", time.monotonic() + 15
while time.monotonic() < deadline:
    try:
        data = s.recv(65536)
    except (ConnectionResetError, socket.timeout) as exc:
        print("closed" if isinstance(exc, ConnectionResetError) else "kept"); sys.exit()
    if not data:
        print("closed"); sys.exit()
    buf += data
    while len(buf) >= 8:
        version, kind, length, xid = struct.unpack("!BBHI", buf[:8])
        buf = buf[length:]
        if kind == 5:
            s.sendall(struct.pack("!BBHIQIBB2xII", 4, 6, 32, xid, int(sys.argv[3]), 0, 254, 0,
                                  0, 0))
print("kept")
"""


def fake_switch(fab: Fabric, as_nobody: bool) -> str:
    import subprocess
    import sys

    host, port = fab.controller.address
    dpid = int(fab.net.switches[0].dpid, 16)  # a switch that is connected
    argv = [sys.executable, "-c", FAKE_SWITCH, host, str(port), str(dpid)]
    out = subprocess.run([*NOBODY, *argv] if as_nobody else argv, capture_output=True,
                         text=True, timeout=60, cwd="/")
    return out.stdout.strip() or out.stderr


def raw_api(path: str, request: bytes) -> bytes:
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.sendall(request)
        return s.recv(65536)


def test_the_controller_refuses_nobody_and_a_second_switch_for_a_dpid(tmp_path):
    import stat
    import subprocess
    import sys

    with Fabric(plan_of(ONE_SWITCH), tmp_path / "run", policy="ecmp") as fab:
        api = fab.controller.api_socket
        assert stat.S_IMODE(os.stat(api).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(api)).st_mode) == 0o700
        probe = subprocess.run(
            [*NOBODY, sys.executable, "-c", "import socket, sys; "
             "socket.socket(socket.AF_UNIX).connect(sys.argv[1])", api],
            capture_output=True, text=True, timeout=30, cwd="/")
        assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe.stderr
        rebound = raw_api(api, b"DELETE /jobs/x HTTP/1.1\r\nHost: evil.example\r\n"
                               b"Content-Length: 0\r\n\r\n")
        assert rebound.startswith(b"HTTP/1.1 421"), rebound
        form = raw_api(api, b"POST /jobs HTTP/1.1\r\nHost: fabriclab-controller\r\n"
                            b"Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}")
        assert form.startswith(b"HTTP/1.1 415"), form
        assert fake_switch(fab, as_nobody=True) == "closed"
        assert fake_switch(fab, as_nobody=False) == "closed"
        health = fab.controller.get("/health")
        assert health["ok"] and health["connected"] == len(fab.plan.switches)
        ip = fab.plan.hosts[1].nics[0].ip
        assert " 0% packet loss" in fab.host("h0").cmd(f"ping -c1 -W2 {ip}")
        log = (tmp_path / "run" / "controller.log").read_text()
        assert "from a process of uid 65534" in log and "a second connection" in log
