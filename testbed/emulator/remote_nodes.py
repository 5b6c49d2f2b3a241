"""Hosts, switches and links on other servers (issue #43), built on Mininet's Cluster Edition
(``mininet.examples.cluster``, shipped with Debian's mininet package).

The Cluster Edition runs each remote node's shell over SSH (``RemoteMixin``: the shell's PID
is the remote one, read back with ``echo $$``), starts Open vSwitch bridges in per-server
batches (``RemoteOVSSwitch``) and makes a link's veth pair on the server of its two ends. What
is changed here, and why:

- **How a server is reached.** Every command goes through :func:`testbed.emulator.ssh.
  ssh_command` (the servers file's key, known hosts and, for stand-ins, the namespace proxy)
  as one quoted word list, never through ``sudo`` (fabriclab logs in as root) and never with
  agent forwarding. ``RemoteMixin.__init__`` is skipped: it registers an exit hook that runs
  ``mn -c`` on every server, which would remove other people's fabrics.
- **Records.** A node records its remote shell and its local ``ssh`` the moment they exist,
  and a host pins its namespace, as :mod:`testbed.emulator.mn_nodes` does on one machine.
  Stand-in servers share this machine's kernel, so those records are this machine's
  (``ServerSpec.netns`` set); the engine refuses other servers until each keeps its own.
- **Links between servers** are VXLAN devices (:class:`CrossLink`): the kernel here has no
  GRE, so the Cluster Edition's ``RemoteGRELink`` cannot work, and its ``RemoteSSHLink`` puts
  every packet through an ssh process. Each end is made on its server with the run's mark as
  its alias, and shaped like any other link.
- **Each server's own Open vSwitch**: ``OVS_RUNDIR`` names it in the remote shell's
  environment, so ``ovs-vsctl`` there talks to that server's daemons.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from itertools import groupby
from operator import attrgetter
from typing import Any

from mininet.examples.cluster import RemoteMixin, RemoteOVSSwitch
from mininet.node import Host, OVSSwitch

from testbed.core.servers import ServerSpec, ServersSpec
from testbed.emulator.mn_nodes import _Owned
from testbed.emulator.shaping import ShapedLink
from testbed.emulator.ssh import ssh_command

VXLAN_PORT = 4789  # IANA's VXLAN port
SSH_EXIT_S = 5.0  # how long a node's ssh gets to end after the hangup


class _OverSsh(RemoteMixin):
    """Mixin: a Cluster Edition node whose commands run on ``server`` over fabriclab's ssh."""

    def __init__(self, name: str, server: ServerSpec, servers: ServersSpec,
                 **params: Any) -> None:
        # what RemoteMixin.__init__ sets, without its `mn -c` exit hook or sudo
        self.server, self.serverIP, self.user = server.name, server.lan_ip, server.user
        self.server_spec, self.servers = server, servers
        self.dest, self.isRemote = server.ssh, True
        self.controlPath, self.splitInit = False, False
        self.sshcmd = ssh_command(server, servers, tty=True)
        self.shell, self.pid = None, None
        super(RemoteMixin, self).__init__(name, **params)

    def startShell(self, mnopts: str | None = None) -> None:
        """The Cluster Edition's remote shell (its own options: no detaching from ssh's tty)."""
        RemoteMixin.startShell(self)

    def _popen(self, cmd: list[str] | str, sudo: bool = True, tt: bool = True,
               **params: Any) -> Any:
        """``cmd`` run on the server: ssh sends one string, so every word is quoted here."""
        if isinstance(cmd, str):
            cmd = cmd.split()
        if self.server_spec.ovs_rundir:
            cmd = ["env", f"OVS_RUNDIR={self.server_spec.ovs_rundir}", *cmd]
        full = [*ssh_command(self.server_spec, self.servers, tty=tt), shlex.join(cmd)]
        params.update(preexec_fn=_own_group)
        return super(RemoteMixin, self)._popen(full, **params)

    def terminate(self) -> None:
        """End the node's ssh as Mininet does (SIGHUP), and for certain: Mininet then waits
        for it, and an ssh that outlives the hangup would hold the teardown forever."""
        shell = self.shell
        if shell is not None and shell.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGHUP)
            try:
                shell.wait(timeout=SSH_EXIT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(shell.pid, signal.SIGKILL)
        super().terminate()


def _own_group() -> None:
    """In the child before ssh runs: a process group of its own (as the Cluster Edition: no
    terminal signals), and the hangup at its default, whatever the runner inherited (under
    ``nohup`` it is ignored, and an ssh started so would ignore Mininet's hangup)."""
    os.setpgrp()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class _RecordsSsh:
    """Mixin after :class:`_Owned`: also record the local ssh that carries the shell."""

    run_state: Any
    shell: Any

    def started(self) -> None:
        self.run_state.add_process(self.shell.pid)
        super().started()  # type: ignore[misc]


class RemoteOwnedHost(_RecordsSsh, _Owned, _OverSsh, Host):
    """A host on a server: its shell and pinned namespace belong to the run from the start."""

    def started(self) -> None:
        super().started()
        self.run_state.pin_netns(self.name, self.pid)


class RemoteOwnedSwitch(_RecordsSsh, _Owned, _OverSsh, RemoteOVSSwitch):
    """An Open vSwitch bridge on a server's own OVS, carrying the run's mark."""

    def bridgeOpts(self) -> str:
        # run ids are [a-z0-9-] only (RunState.new): safe inside the shell command
        return OVSSwitch.bridgeOpts(self) + f" external_ids:{self.run_state.mark}"

    def __init__(self, name: str, **params: Any) -> None:
        super().__init__(name, **{**params, "batch": True})

    @classmethod
    def setup(cls) -> None:
        """Mininet checks the local OVS here; each server's is checked before the run."""

    @classmethod
    def batchStartup(cls, switches: list[Any], **_kwargs: Any) -> list[Any]:
        """Start the bridges in one batch per server, as the Cluster Edition does, but with
        each batch sent as ssh's command (ARG_MAX) rather than typed into the first switch's
        shell: a terminal cuts a line at 4095 bytes, and the batch of a server with 48 ports
        is longer, so its bridges were silently never made."""
        for _server, group in groupby(sorted(switches, key=attrgetter("server")),
                                      attrgetter("server")):
            group = list(group)
            first = group[0]

            def run(cmd: str, shell: bool = False, node: Any = first) -> None:
                code, out = _server_run(node, cmd)  # ovs-vsctl prints what it creates
                if code != 0:
                    raise RuntimeError(f"could not start the bridges on {node.server}: "
                                       f"{out.strip()[:300]}")

            OVSSwitch.batchStartup(group, run=run)
        return switches


class CrossLink(ShapedLink):
    """A shaped link whose two ends are on different servers: a VXLAN device on each, with
    ``vni`` and the servers' LAN addresses, marked with the run's alias. An end on a host is
    made on its server and moved into the host's namespace (the device keeps its underlay
    in the server's)."""

    def __init__(self, node1: Any, node2: Any, vni: int, mtu: int, **params: Any) -> None:
        self.vni, self.mtu = vni, mtu
        super().__init__(node1, node2, **params)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None,
                     node1=None, node2=None, deleteIntfs=True):
        q = shlex.quote
        ends = ((node1, intfname1, addr1, node2), (node2, intfname2, addr2, node1))
        for node, name, addr, other in ends:
            mac = f" address {addr}" if addr else ""
            make = (f"ip link add name {name}{mac} mtu {self.mtu} type vxlan id {self.vni} "
                    f"local {node.serverIP} remote {other.serverIP} dstport {VXLAN_PORT} "
                    f"nolearning && ip link set dev {name} alias {q(self.mark or '')}")
            if node.inNamespace:
                make += f" && ip link set dev {name} netns {node.pid}"
                out = _server_run(node, make)[1]
            else:
                out = node.cmd(make)
            if out.strip():
                raise RuntimeError(f"could not make the VXLAN end {name} on {node.server}: "
                                   f"{out.strip()}")
        return None


def _server_run(node: Any, script: str) -> tuple[int, str]:
    """Run ``script`` in the server's own namespace (not the host's): its exit status and
    its output."""
    proc = node.rpopen(["sh", "-c", script], tt=False)
    out, _ = proc.communicate()
    return proc.returncode, out.decode() if isinstance(out, bytes) else out
