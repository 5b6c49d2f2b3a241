"""Mininet node classes that record themselves in the run's state the moment they exist.

Injected into ``Mininet(host=..., switch=...)`` the way Mininet expects node classes to be:
a host pins its network namespace and records its shell; an OVS switch records its shell and
creates its bridge with the run's mark in the same ``ovs-vsctl`` transaction; a kernel bridge
lives in a namespace of its own, pinned like a host's. So a run killed
at any point of bring-up leaves nothing that ``fabriclab clean`` cannot prove is its own.
"""

from __future__ import annotations

from typing import Any

from mininet.node import Host, OVSSwitch, Switch

from testbed.core.topology import FabricPlan
from testbed.emulator.cleanup import RunState
from testbed.emulator.netns_batch import run_batch
from testbed.emulator.switch_kinds import bridge_fdb


class _Owned:
    """Mixin: the node belongs to ``state``; its shell is recorded as soon as it starts."""

    def __init__(self, name: str, state: RunState, **params: Any) -> None:
        self.run_state = state
        super().__init__(name, **params)  # type: ignore[call-arg]

    def startShell(self, mnopts: str | None = None) -> None:
        super().startShell(mnopts)  # type: ignore[misc]
        self.run_state.add_process(self.pid)  # type: ignore[attr-defined]
        self.started()

    def started(self) -> None:
        """Hook for what else a node records once its shell exists."""


class OwnedHost(_Owned, Host):
    """A host whose shell and pinned namespace belong to the run from the start."""

    def started(self) -> None:
        self.run_state.pin_netns(self.name, self.pid)


class OwnedSwitch(_Owned, OVSSwitch):
    """An OVS switch whose shell is recorded and whose bridge carries the run's mark."""

    def bridgeOpts(self) -> str:
        # run ids are [a-z0-9-] only (RunState.new): safe inside Mininet's shell command
        return super().bridgeOpts() + f" external_ids:{self.run_state.mark}"


class KernelBridge(_Owned, Switch):
    """A switch that is a Linux bridge in a network namespace of its own, for fabrics whose
    switches only forward by destination (no OpenFlow): the kernel forwards in the sender's
    softirq, with none of the userspace datapath's single forwarding thread.

    The namespace is pinned like a host's, so the bridge and its ports go with it. In there,
    bridged packets skip the firewall (``bridge-nf-call-*tables``, which is per namespace),
    ports neither learn nor flood, and each port's host MAC (from the plan) is a static entry:
    a frame goes only to the port of its destination, as the static OpenFlow rules send it.
    """

    def __init__(self, name: str, state: RunState, plan: FabricPlan, **params: Any) -> None:
        self.fdb = bridge_fdb(plan, name)  # (port interface, MAC of the host behind it)
        super().__init__(name, state, **{**params, "inNamespace": True})

    def started(self) -> None:
        self.run_state.pin_netns(self.name, self.pid)

    def start(self, _controllers: Any) -> None:
        # batches on standard input, not one command line (a shell's terminal cuts lines at
        # 4095 bytes) and not files (anyone able to swap one would run commands as root)
        ports = [i.name for i in self.intfList() if i.name.startswith(f"{self.name}-")]
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1; "
                 "for t in iptables ip6tables arptables; do "
                 "f=/proc/sys/net/bridge/bridge-nf-call-$t; [ ! -e $f ] || echo 0 > $f; done")
        problem = run_batch(self.pid, ["ip", "-batch", "-"], [
            f"link add name {self.name} type bridge stp_state 0",
            *(f"link set dev {p} master {self.name}" for p in ports),
            f"link set dev {self.name} up"]) or run_batch(self.pid, ["bridge", "-batch", "-"], [
                *(f"link set dev {p} learning off flood off mcast_flood off" for p in ports),
                *(f"fdb replace {mac} dev {p} master static" for p, mac in self.fdb)])
        if problem:
            raise RuntimeError(f"could not make the kernel bridge {self.name}: {problem}")

    def stop(self, deleteIntfs: bool = True) -> None:
        self.cmd(f"ip link del dev {self.name}")
        super().stop(deleteIntfs)
