"""Stand-in servers and reaching servers over ssh (issue #43), without root: the ssh argv for
each kind of server, the netns proxy's socket passing, the servers file the stand-ins get, the
record and what ``stop`` makes of it, and bad input refused in one sentence."""

from __future__ import annotations

import itertools
import os
import shlex
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.core.errors import FabricLabError
from testbed.core.servers import load_servers, parse_servers
from testbed.emulator import preflight, procs, ssh, ssh_proxy, standins
from testbed.emulator.standins import Standin, StandinsState

ROOT = Path(__file__).resolve().parents[1]
PLAIN = {"name": "s0", "ssh": "lab@node-0.example.org", "lan_ip": "10.0.0.1"}
STANDIN = {"name": "s1", "ssh": "root@192.0.2.2", "lan_ip": "192.0.2.2", "netns": "fls1",
           "identity": "/var/lib/fabriclab/standins/key"}


def _option(argv: list[str], name: str) -> str | None:
    """The value of ``-o NAME=VALUE`` in ``argv`` (None if absent)."""
    for flag, value in itertools.pairwise(argv):
        if flag == "-o" and value.startswith(f"{name}="):
            return value[len(name) + 1:]
    return None


def test_ssh_command_of_a_plain_server_asks_nothing_and_trusts_the_defaults():
    spec = parse_servers({"servers": [PLAIN]})
    argv = ssh.ssh_command(spec.servers[0], spec)
    assert argv[0] == "ssh" and argv[-1] == "lab@node-0.example.org"
    assert _option(argv, "BatchMode") == "yes"
    assert argv[argv.index("-p") + 1] == "22"
    assert _option(argv, "ConnectTimeout") == str(ssh.CONNECT_TIMEOUT_S)
    assert _option(argv, "ServerAliveInterval") == str(ssh.ALIVE_INTERVAL_S)
    for absent in ("IdentitiesOnly", "UserKnownHostsFile", "StrictHostKeyChecking",
                   "ProxyCommand", "ProxyUseFdpass"):
        assert _option(argv, absent) is None
    assert "-i" not in argv and "-tt" not in argv and "-q" not in argv
    assert ssh.ssh_options(spec.servers[0], spec) == argv[:-1]


def test_ssh_command_with_key_known_hosts_netns_and_tty():
    spec = parse_servers({"servers": [{**STANDIN, "port": 2222}],
                          "known_hosts": "/var/lib/fabriclab/standins/known_hosts"})
    server = spec.servers[0]
    argv = ssh.ssh_command(server, spec, tty=True)
    assert argv[-1] == "root@192.0.2.2" and "-tt" in argv
    assert _option(argv, "IdentitiesOnly") == "yes"
    assert argv[argv.index("-i") + 1] == "/var/lib/fabriclab/standins/key"
    assert _option(argv, "UserKnownHostsFile") == "/var/lib/fabriclab/standins/known_hosts"
    assert _option(argv, "StrictHostKeyChecking") == "yes"
    assert argv[argv.index("-p") + 1] == "2222"
    assert _option(argv, "ProxyUseFdpass") == "yes"
    proxy = _option(argv, "ProxyCommand")
    assert shlex.split(proxy) == [sys.executable, "-I", str(ssh.PROXY), "fls1", "192.0.2.2",
                                  "2222"]
    assert ssh.PROXY.is_file()


def test_the_proxy_command_quotes_for_the_shell_and_escapes_ssh_tokens(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/opt/my python/100%/python3")
    server = parse_servers({"servers": [STANDIN]}).servers[0]
    text = ssh.proxy_command(server)
    assert "%%" in text and "%/" not in text.replace("%%", "")
    assert shlex.split(text.replace("%%", "%"))[0] == "/opt/my python/100%/python3"


def test_run_sends_the_command_as_one_quoted_string(monkeypatch):
    seen = {}

    def fake(argv, **kwargs):
        seen.update(argv=argv, **kwargs)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(ssh.subprocess, "run", fake)
    spec = parse_servers({"servers": [PLAIN]})
    ssh.run(spec.servers[0], spec, ["echo", "a b", "$HOME;", "it's"], timeout_s=7)
    assert seen["argv"][:-1] == ssh.ssh_command(spec.servers[0], spec)
    assert shlex.split(seen["argv"][-1]) == ["echo", "a b", "$HOME;", "it's"]
    assert seen["timeout"] == 7 and seen["stdin"] == subprocess.DEVNULL and seen["text"]


def test_the_proxy_passes_a_connected_socket_on_its_stdout():
    """The namespace step left out (it needs root): the socket ssh gets is connected to the
    listener."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    ours, theirs = socket.socketpair()
    code = ("import sys; import testbed.emulator.ssh_proxy as p; p.enter_netns = lambda n: None;"
            f" sys.exit(p.main(['fls0', '127.0.0.1', '{port}']))")
    done = subprocess.run([sys.executable, "-c", code], stdout=theirs, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=30)
    theirs.close()
    assert done.returncode == 0
    _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    conn, _ = listener.accept()
    with socket.socket(fileno=fds[0]) as passed:
        passed.sendall(b"hello")
        assert conn.recv(5) == b"hello"
    for s in (conn, listener, ours):
        s.close()


def test_the_proxy_refuses_bad_words_and_says_why_it_cannot_enter(capsys):
    assert ssh_proxy.main(["fls0", "192.0.2.1"]) == 2
    assert ssh_proxy.main(["../x", "192.0.2.1", "22"]) == 2
    assert ssh_proxy.main(["nosuch9", "192.0.2.1", "22"]) == 1
    assert "cannot enter network namespace nosuch9" in capsys.readouterr().err


# -- the stand-ins' files -------------------------------------------------------------------


def test_the_servers_file_written_is_the_one_load_servers_reads(tmp_path):
    base = tmp_path / "standins"
    spec = standins.servers_spec(standins.layout(3, base), base)
    out = tmp_path / "servers.yaml"
    out.write_text(standins.servers_yaml(spec))
    assert load_servers(out) == spec
    assert spec.names == ["s0", "s1", "s2"]
    s2 = spec.servers[2]
    assert (s2.ssh, s2.lan_ip, s2.netns, s2.port) == ("root@192.0.2.3", "192.0.2.3", "fls2", 22)
    assert s2.identity == str(base / "key") and spec.known_hosts == str(base / "known_hosts")
    assert s2.ovs_rundir == str(base / "s2" / "ovs") and s2.workdir == str(base / "s2" / "work")


def test_layout_names_and_addresses():
    s = Standin(7)
    assert (s.name, s.netns, s.lan_ip, s.lan_veth) == ("s7", "fls7", "192.0.2.8", "lan7")
    assert s.dir == standins.BASE / "s7"
    assert s.ovs_env() == {k: str(standins.BASE / "s7" / "ovs")
                           for k in ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR")}


@pytest.mark.parametrize("n", [0, -1, 9, 100])
def test_a_bad_count_is_one_sentence(n):
    with pytest.raises(FabricLabError, match="give 1 to 8 stand-in servers"):
        standins.layout(n)


def test_the_cli_refuses_a_bad_count_before_anything_else(tmp_path, capsys):
    assert main(["servers", "local", "9", "--out", str(tmp_path / "s.yaml")]) == 2
    assert "N is 9: give 1 to 8" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["servers", "local", "two", "--out", str(tmp_path / "s.yaml")])
    assert "'two' is not a whole number" in capsys.readouterr().err
    assert not (tmp_path / "s.yaml").exists()


@pytest.mark.parametrize("args", [["local", "2", "--out", "x.yaml"], ["stop"], ["status"]])
def test_the_cli_needs_root(args, capsys, monkeypatch):
    monkeypatch.setattr(preflight, "is_root", lambda: False)
    assert main(["servers", *args]) == 2
    assert "fabriclab needs root to" in capsys.readouterr().err


def test_a_servers_file_path_others_could_swap_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by others, no sticky bit
    with pytest.raises(FabricLabError, match="writable by other users"):
        standins.check_out_file(shared / "servers.yaml")
    with pytest.raises(FabricLabError, match="No such file or directory"):
        standins.check_out_file(tmp_path / "missing" / "servers.yaml")
    standins.check_out_file(tmp_path / "servers.yaml")  # fine


def test_known_hosts_lines_and_sshd_config():
    pub = "ssh-ed25519 AAAAC3Nza fabriclab-s0\n"
    assert standins.known_hosts_line("192.0.2.1", 22, pub) == "192.0.2.1 ssh-ed25519 AAAAC3Nza\n"
    assert standins.known_hosts_line("192.0.2.1", 2222, pub).startswith("[192.0.2.1]:2222 ")
    s = Standin(0)
    lines = standins.sshd_config(s).splitlines()
    for line in ("ListenAddress 192.0.2.1", f"HostKey {s.host_key}",
                 f"AuthorizedKeysFile {s.ssh_dir / 'authorized_keys'}",
                 "PermitRootLogin prohibit-password", "PasswordAuthentication no", "UsePAM no",
                 f"PidFile {s.ssh_dir / 'sshd.pid'}",
                 f"SetEnv OVS_RUNDIR={s.ovs_dir} OVS_DBDIR={s.ovs_dir} OVS_LOGDIR={s.ovs_dir}"):
        assert line in lines


# -- the record -----------------------------------------------------------------------------


@pytest.fixture
def base(tmp_path):
    b = tmp_path / "fl" / "standins"
    b.mkdir(parents=True, mode=0o700)
    return b


def test_the_record_round_trips_privately_and_a_bad_one_is_one_sentence(base):
    assert StandinsState.load(base) is None
    state = StandinsState.new(2)
    state.netns["fllan"] = [4, 4026533415]
    state.procs["s0/sshd"] = [123, 456]
    state.save(base)
    path = StandinsState.path(base)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert StandinsState.load(base) == state
    assert state.owner == procs.identify(os.getpid()).as_list()
    path.write_text("{not json")
    with pytest.raises(FabricLabError, match="not a stand-in record this version reads"):
        StandinsState.load(base)


def test_only_namespaces_whose_inode_still_matches_are_ours(monkeypatch):
    now = {"fls0": (4, 100), "fls1": (4, 200), "fllan": (4, 300)}
    monkeypatch.setattr(standins, "netns_id", now.get)
    state = StandinsState([1, 1], 2, netns={"fls0": [4, 100], "fls1": [4, 199],
                                            "fllan": None, "fls2": [4, 400]})
    # fls1 was replaced by another namespace of that name; fls2 is gone; fllan was being made
    assert standins.owned_netns(state) == {"fls0": (4, 100), "fllan": (4, 300)}


def _dead_process() -> list[int]:
    child = subprocess.Popen(["true"])
    ident = procs.identify(child.pid)
    child.wait()
    return ident.as_list()


def test_remove_signals_recorded_processes_and_leaves_nothing(base, monkeypatch):
    monkeypatch.setattr(standins, "netns_id", lambda name: None)
    sleeper = subprocess.Popen(["sleep", "60"])
    state = StandinsState.new(1)
    state.netns = {"fls0": [4, 1]}
    state.procs = {"s0/sshd": procs.identify(sleeper.pid).as_list(),
                   "s0/ovsdb-server": _dead_process()}
    state.save(base)
    (base / "s0" / "ovs").mkdir(parents=True)
    (base / "key").write_text("x")
    left = standins.leftovers(state, base)
    assert f"process {sleeper.pid} (s0/sshd)" in left
    assert str(base / "s0") in left and str(base / "key") in left
    assert not any("ovsdb-server" in item or "namespace" in item for item in left)
    assert standins.remove(state, base, grace_s=1) == []
    assert sleeper.wait(timeout=5) == -15  # SIGTERM
    assert not base.exists() and not base.parent.exists()


def test_remove_keeps_the_record_of_what_it_could_not_remove(base, monkeypatch):
    monkeypatch.setattr(standins, "netns_id", lambda name: None)
    survivor = subprocess.Popen(["sleep", "60"])
    ident = procs.identify(survivor.pid)
    monkeypatch.setattr(procs, "terminate", lambda ps, grace_s: list(ps))  # outlives SIGKILL
    state = StandinsState([1, 1], 1, procs={"s0/sshd": ident.as_list(),
                                            "s0/ovsdb-server": _dead_process()})
    state.save(base)
    try:
        assert standins.remove(state, base) == [f"process {survivor.pid} (s0/sshd)"]
        kept = StandinsState.load(base)
        assert kept is not None and kept.procs == {"s0/sshd": ident.as_list()}
    finally:
        survivor.kill()
        survivor.wait()


def test_a_base_without_a_record_is_removed_only_if_it_holds_a_partial_record(base):
    (base / ".state.json.abc.partial").write_text("{")
    standins._remove_unrecorded(base)
    assert not base.exists()
    base.mkdir()
    (base / "key").write_text("x")
    with pytest.raises(FabricLabError, match="without a stand-in record"):
        standins._remove_unrecorded(base)
    assert (base / "key").exists()


def test_a_health_line_says_what_is_gone_and_why_ssh_fails():
    ok = standins.Health(Standin(0), (), None)
    assert ok.line() == "s0  fls0  192.0.2.1  alive, reachable over ssh"
    bad = standins.Health(Standin(1), ("sshd",), "no sshd")
    assert bad.line() == ("s1  fls1  192.0.2.2  not alive (sshd gone), not reachable over "
                          "ssh (no sshd)")


def test_why_ssh_failed_prefers_the_proxys_sentence():
    def done(code, err):
        return subprocess.CompletedProcess([], code, "", err)

    proxy = ("ssh_proxy: cannot connect to 192.0.2.2:22 in namespace fls1: Connection refused\n"
             "proxy dialer did not pass back a connection\n")
    assert ssh.why_failed(done(255, proxy)).startswith("ssh_proxy: cannot connect")
    assert ssh.why_failed(done(255, "a\nHost key verification failed.\n")) == (
        "Host key verification failed.")
    assert ssh.why_failed(done(3, "")) == "exit status 3"
