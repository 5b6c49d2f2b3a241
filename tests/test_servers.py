"""The servers file (issue #43): a valid one loads with its defaults, and every wrong field is
refused with one sentence naming it."""

from __future__ import annotations

import pytest

from testbed.core.errors import SpecError
from testbed.core.servers import (
    DEFAULT_MTU,
    DEFAULT_WORKDIR,
    ServersSpec,
    load_servers,
    parse_servers,
)

EXAMPLE = "experiments/servers/example.yaml"
S0 = {"name": "s0", "ssh": "root@192.0.2.1", "lan_ip": "192.0.2.1"}
S1 = {"name": "s1", "ssh": "lab@node-1.example.org", "lan_ip": "192.0.2.2"}


def test_the_example_file_loads():
    spec = load_servers(EXAMPLE)
    assert isinstance(spec, ServersSpec)
    assert spec.names == ["s0", "s1"] and spec.tunnel == "vxlan" and spec.mtu == 1450
    s1 = spec.by_name("s1")
    assert (s1.ssh, s1.user, s1.host, s1.port, s1.lan_ip) == (
        "root@192.0.2.2", "root", "192.0.2.2", 22, "192.0.2.2")
    assert spec.weights() == [2, 2]
    with pytest.raises(KeyError):
        spec.by_name("s9")


def test_defaults_every_field_and_json():
    spec = parse_servers({"servers": [S0, S1]})
    assert spec.mtu == DEFAULT_MTU == 1450 and spec.tunnel == "vxlan"
    assert spec.known_hosts is None and spec.weights() == [1, 1]
    s0 = spec.servers[0]
    assert (s0.port, s0.cores, s0.identity, s0.netns, s0.ovs_rundir, s0.workdir) == (
        22, None, None, None, None, DEFAULT_WORKDIR)
    full = {**S0, "port": 2222, "cores": 4, "identity": "/root/.ssh/id_ed25519",
            "netns": "fls0", "ovs_rundir": "/run/fabriclab/s0/ovs",
            "workdir": "/var/lib/fabriclab/s0"}
    spec = parse_servers({"servers": [full, {**S1, "cores": 2}],
                          "known_hosts": "/etc/fabriclab/known_hosts", "mtu": 1400})
    assert spec.weights() == [4, 2]
    data = spec.to_json()
    assert data["servers"][0] == full and data["known_hosts"] == "/etc/fabriclab/known_hosts"
    assert data["mtu"] == 1400 and data["tunnel"] == "vxlan"
    assert parse_servers(data) == spec  # what summary.json records reads back


def test_cores_weigh_only_when_every_server_gives_them():
    assert parse_servers({"servers": [{**S0, "cores": 4}, S1]}).weights() == [1, 1]


BAD_SERVER = [
    ({"name": "S0"}, "servers.0.name: 'S0' is not a server name"),
    ({"name": "server123"}, "servers.0.name: 'server123' is not a server name"),
    ({"name": "0s"}, "servers.0.name"),
    ({"ssh": "192.0.2.1"}, "servers.0.ssh: '192.0.2.1' is not user@host"),
    ({"ssh": "root@192.0.2.1;reboot"}, "servers.0.ssh"),
    ({"ssh": "root@$(id)"}, "servers.0.ssh"),
    ({"ssh": "Root@host"}, "servers.0.ssh"),
    ({"ssh": "root@-host"}, "servers.0.ssh"),
    ({"ssh": "root@300.1.1.1"}, "servers.0.ssh"),
    ({"ssh": "root@host name"}, "servers.0.ssh"),
    ({"port": 0}, "servers.0.port: Input should be greater than or equal to 1"),
    ({"port": 65536}, "servers.0.port: Input should be less than or equal to 65535"),
    ({"lan_ip": "192.0.2"}, "servers.0.lan_ip: '192.0.2' is not an IPv4 address"),
    ({"lan_ip": "fe80::1"}, "servers.0.lan_ip"),
    ({"lan_ip": "127.0.0.1"}, "servers.0.lan_ip: 127.0.0.1 cannot be a tunnel's end"),
    ({"lan_ip": "0.0.0.0"}, "servers.0.lan_ip"),
    ({"lan_ip": "224.0.0.1"}, "servers.0.lan_ip"),
    ({"cores": 0}, "servers.0.cores: Input should be greater than or equal to 1"),
    ({"cores": 1.5}, "servers.0.cores"),
    ({"identity": "id_rsa"}, "servers.0.identity: 'id_rsa' is not an absolute path"),
    ({"identity": "/root/../etc/shadow"}, "servers.0.identity"),
    ({"identity": "/root/my key"}, "servers.0.identity"),
    ({"identity": "/root/key;rm"}, "servers.0.identity"),
    ({"identity": "/root/k\x00"}, "servers.0.identity"),
    ({"netns": "fl-s0"}, "servers.0.netns: 'fl-s0' is not a namespace name"),
    ({"ovs_rundir": "/run/$HOME"}, "servers.0.ovs_rundir"),
    ({"workdir": "/var/lib/`x`"}, "servers.0.workdir"),
    ({"workdir": "relative/dir"}, "servers.0.workdir"),
    ({"wokdir": "/x"}, "servers.0.wokdir: unknown key; did you mean workdir?"),
]


@pytest.mark.parametrize(("change", "expected"), BAD_SERVER)
def test_a_bad_server_field_is_one_sentence_naming_it(change, expected):
    with pytest.raises(SpecError) as exc:
        parse_servers({"servers": [{**S0, **change}]}, source="f.yaml")
    message = str(exc.value)
    assert message.startswith(f"f.yaml: {expected}"), message
    assert "\n" not in message


BAD_FILE = [
    ({"servers": []}, "servers: List should have at least 1 item"),
    ({"servers": [S0, {**S1, "name": "s0"}]}, "servers.1.name: s0 is also servers.0's name"),
    ({"servers": [S0, {**S1, "lan_ip": "192.0.2.1"}]}, "servers.1.lan_ip: 192.0.2.1 is also"),
    ({"servers": [{**S0, "netns": "a"}, {**S1, "netns": "a"}]}, "servers.1.netns: a is also"),
    ({"servers": [{k: v for k, v in S0.items() if k != "lan_ip"}]},
     "servers.0.lan_ip: Field required"),
    ({"servers": [S0], "tunnel": "gre"}, "tunnel: 'gre' is not a tunnel fabriclab makes"),
    ({"servers": [S0], "mtu": 68}, "mtu: Input should be greater than or equal to 576"),
    ({"servers": [S0], "mtu": 9001}, "mtu: Input should be less than or equal to"),
    ({"servers": [S0], "known_hosts": "~/.ssh/known_hosts"}, "known_hosts"),
    ({"servers": [S0], "sever": 1}, "sever: unknown key"),
    ({"server": [S0]}, "server: unknown key; did you mean servers?"),
]


@pytest.mark.parametrize(("data", "expected"), BAD_FILE)
def test_a_bad_file_is_one_sentence_naming_the_field(data, expected):
    with pytest.raises(SpecError, match=r"^f\.yaml: ") as exc:
        parse_servers(data, source="f.yaml")
    assert expected in str(exc.value) and "\n" not in str(exc.value)


def test_files_that_are_no_servers_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read spec"):
        load_servers(tmp_path / "missing.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- s0\n")
    with pytest.raises(SpecError, match="expected a mapping at the top level"):
        load_servers(path)
    path.write_text("servers: [\n")
    with pytest.raises(SpecError, match="is not valid YAML"):
        load_servers(path)
