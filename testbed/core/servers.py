"""The ``servers:`` file: the machines a fabric is spread over (issue #43), read and checked
once, pure (no SSH, nothing started).

```yaml
servers:                      # one or more; names and lan_ip unique
  - name: s0                  # [a-z][a-z0-9]{0,7}: it ends up in interface names
    ssh: root@192.0.2.1       # user@host (host: an IPv4 address or a DNS name)
    port: 22                  # ssh port, 1..65535
    lan_ip: 192.0.2.1         # the address its tunnels use, facing the other servers
    cores: 2                  # optional, >= 1: weights the placement when every server gives it
    identity: /path/key       # optional: the ssh private key
    netns: fls0               # optional, stand-ins only: the namespace its sshd is reached from
    ovs_rundir: /path         # optional: where its ovsdb/ovs-vswitchd sockets are
    workdir: /path            # optional: where it keeps its run records and outputs
known_hosts: /path            # optional: the ssh known_hosts file for every server
tunnel: vxlan                 # how links between servers are carried: only vxlan (no GRE here)
mtu: 1450                     # the emulated interfaces' MTU when links cross servers
```

Every value ends up on a command line run over SSH, so each is checked against a pattern that
holds nothing a shell would interpret; paths are absolute, without ``..``.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from testbed.core.spec import load_yaml, validate

DEFAULT_PORT = 22
DEFAULT_WORKDIR = "/var/lib/fabriclab/server"
DEFAULT_OVS_RUNDIR = "/var/run/openvswitch"
VXLAN_OVERHEAD_BYTES = 50  # outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8
DEFAULT_MTU = 1500 - VXLAN_OVERHEAD_BYTES  # VXLAN on a LAN of 1500-byte frames
MIN_MTU, MAX_MTU = 576, 9000 - VXLAN_OVERHEAD_BYTES  # IPv4's least datagram; jumbo frames

_NAME = re.compile(r"[a-z][a-z0-9]{0,7}")
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_DNS_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_PATH = re.compile(r"/[A-Za-z0-9._+@,:/-]*")


def _named(what: str) -> AfterValidator:
    """A check of a server's (or a stand-in's namespace's) name: short, as it ends up in
    interface names (at most 15 characters on Linux)."""

    def check(value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not {what}: use 1 to 8 lowercase letters or "
                             "digits, starting with a letter (it ends up in interface names)")
        return value

    return AfterValidator(check)


def _host(value: str) -> bool:
    """Whether ``value`` is an IPv4 address or a DNS name (letters, digits, dots, hyphens)."""
    if re.fullmatch(r"[0-9.]+", value):
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            return False
        return True
    labels = value.removesuffix(".").split(".")
    return len(value) <= 253 and all(_DNS_LABEL.fullmatch(label) for label in labels)


def _ssh(value: str) -> str:
    user, at, host = value.partition("@")
    if not at or not _USER.fullmatch(user) or not _host(host):
        raise ValueError(f"{value!r} is not user@host: the user lowercase letters, digits, '_' "
                         "or '-' (starting with a letter or '_'), the host an IPv4 address or a "
                         "DNS name of letters, digits, dots and hyphens")
    return value


def _lan_ip(value: str) -> str:
    try:
        address = ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 address (such as 192.0.2.1)") from None
    if (address.is_unspecified or address.is_multicast or address.is_loopback
            or address == ipaddress.IPv4Address("255.255.255.255")):
        raise ValueError(f"{value} cannot be a tunnel's end: give the address this server has "
                         "on the network the other servers reach it by")
    return str(address)


def _path(value: str) -> str:
    if not _PATH.fullmatch(value) or ".." in value.split("/"):
        raise ValueError(f"{value!r} is not an absolute path of letters, digits and . _ + @ , "
                         ": - / without '..' (nothing a shell would interpret)")
    return value


AbsPath = Annotated[str, AfterValidator(_path)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSpec(_Strict):
    """One server: how to reach it over SSH and the address its tunnels use."""

    name: Annotated[str, _named("a server name")]
    ssh: Annotated[str, AfterValidator(_ssh)]
    port: Annotated[int, Field(ge=1, le=65535)] = DEFAULT_PORT
    lan_ip: Annotated[str, AfterValidator(_lan_ip)]
    cores: Annotated[int, Field(ge=1)] | None = None
    identity: AbsPath | None = None
    netns: Annotated[str, _named("a namespace name")] | None = None
    ovs_rundir: AbsPath | None = None
    workdir: AbsPath = DEFAULT_WORKDIR

    @property
    def user(self) -> str:
        return self.ssh.partition("@")[0]

    @property
    def host(self) -> str:
        return self.ssh.partition("@")[2]


class ServersSpec(_Strict):
    """The servers a fabric is spread over, and how links between them are carried."""

    servers: Annotated[list[ServerSpec], Field(min_length=1)]
    known_hosts: AbsPath | None = None
    tunnel: Literal["vxlan"] = "vxlan"
    mtu: Annotated[int, Field(ge=MIN_MTU, le=MAX_MTU)] = DEFAULT_MTU

    @field_validator("tunnel", mode="before")
    @classmethod
    def _known_tunnel(cls, value: Any) -> Any:
        if value != "vxlan":
            raise ValueError(f"{value!r} is not a tunnel fabriclab makes: only vxlan for now "
                             "(this kernel has no GRE)")
        return value

    @model_validator(mode="after")
    def _unique(self) -> ServersSpec:
        for field in ("name", "lan_ip", "netns"):
            seen: dict[str, int] = {}
            for i, server in enumerate(self.servers):
                value = getattr(server, field)
                if value is None:
                    continue
                if value in seen:
                    raise ValueError(f"servers.{i}.{field}: {value} is also servers."
                                     f"{seen[value]}'s {field}: each server needs its own")
                seen[value] = i
        return self

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.servers]

    def by_name(self, name: str) -> ServerSpec:
        """The server called ``name`` (KeyError if none is)."""
        for server in self.servers:
            if server.name == name:
                return server
        raise KeyError(name)

    def weights(self) -> list[int]:
        """Each server's weight in the placement, in file order: its ``cores`` when every
        server gives them, else 1 each."""
        if all(s.cores is not None for s in self.servers):
            return [s.cores for s in self.servers]  # type: ignore[misc]
        return [1] * len(self.servers)

    def to_json(self) -> dict[str, Any]:
        """The file as read, every default filled in (what summary.json records)."""
        return self.model_dump(mode="json")


def parse_servers(data: Any, source: str = "servers") -> ServersSpec:
    """Validate an in-memory servers mapping; SpecError naming the field if it is wrong."""
    return validate(ServersSpec, data, source=source)


def load_servers(path: str | Path) -> ServersSpec:
    """The validated servers file at ``path``; SpecError (one sentence naming the field) if
    it cannot be read or is wrong."""
    return parse_servers(load_yaml(path), source=str(path))


def server_rundirs(spec: ServersSpec) -> dict[str, str]:
    """Server name → the run directory of its Open vSwitch (its ``ovs_rundir`` or the default)."""
    return {s.name: s.ovs_rundir or DEFAULT_OVS_RUNDIR for s in spec.servers}
