"""Packets the fabric lost outside its shaped queues, and what the hosts' TCP resent.

Read at the start and end of every leg of a run (as the path counters are), each reading
cumulative, so a leg's figures are differences:

- Open vSwitch's own per-interface counters (``ovs-vsctl list Interface``: ``rx_dropped``,
  ``tx_dropped``, errors): a packet a switch could not hand to a port (on the userspace
  datapath, a full socket buffer in front of the port's qdisc) or could not take in;
- the datapath's ``lost`` packets (``ovs-appctl dpctl/show``: upcalls it could not queue);
- on the userspace datapath, what the kernel dropped in front of ovs-vswitchd's receiving
  socket of each port (``ss -0 -m -p``: the socket's buffer full), on this machine;
- each host's TCP: segments sent and resent, and retransmission timeouts
  (:func:`testbed.emulator.tcp_counters.segments`).

The shaped queues' own drops are in ``qdisc_samples.parquet``. ``drops.json`` keeps every
leg's figures; the loss invariant judges them (:mod:`analysis.loss_invariant`).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.emulator import tcp_counters
from testbed.emulator.preflight import ovs_env
from testbed.emulator.socket_buffers import packet_socket_table

OVS_TIMEOUT_S = 10
DROP_KEYS = ("rx_dropped", "tx_dropped", "rx_errors", "tx_errors")


def _ask_each(args: list[str], rundirs: Sequence[str | None]) -> list[str] | None:
    """The output of one Open vSwitch tool run against this machine's daemons (None in
    ``rundirs``) or each stand-in server's; None if any of them does not answer."""
    outs = []
    for rundir in rundirs:
        try:
            out = subprocess.run([args[0], f"--timeout={OVS_TIMEOUT_S}", *args[1:]],
                                 capture_output=True, text=True, timeout=OVS_TIMEOUT_S + 2,
                                 env=ovs_env(rundir))
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            return None
        outs.append(out.stdout)
    return outs


def port_drops(ports: Iterable[str], rundirs: Sequence[str | None] = (None,)
               ) -> dict[str, dict[str, int]] | None:
    """Per OVS interface of ``ports``: its drop and error counters so far, from this machine's
    Open vSwitch or each of ``rundirs`` (stand-in servers'); None if one cannot be read."""
    outs = _ask_each(["ovs-vsctl", "--format=json", "--columns=name,statistics", "list",
                      "Interface"], rundirs)
    if outs is None:
        return None
    wanted: set[str] = set(ports)
    return {k: v for out in outs for k, v in parse_interfaces(out, wanted).items()}


def parse_interfaces(text: str, ports: set[str]) -> dict[str, dict[str, int]]:
    """The drop and error counters of ``ports`` in ``ovs-vsctl --format=json list Interface``
    output (statistics as an OVSDB map)."""
    found = {}
    for name, stats in json.loads(text).get("data", []):
        if name not in ports or not isinstance(stats, list) or stats[0] != "map":
            continue
        values = dict(stats[1])
        found[name] = {k: int(values.get(k, 0)) for k in DROP_KEYS}
    return found


def kernel_drops(ports: Iterable[str]) -> dict[str, dict[str, int]]:
    """Per interface of ``ports`` (in this namespace): the kernel's own drop counters."""
    found = {}
    for port in ports:
        stats = {}
        for key in ("rx_dropped", "tx_dropped"):
            try:
                stats[f"kernel_{key}"] = int(
                    Path(f"/sys/class/net/{port}/statistics/{key}").read_text())
            except (OSError, ValueError):
                continue
        found[port] = stats
    return found


def socket_drops(ss_output: str) -> dict[str, int]:
    """Per port: packets the kernel dropped in front of ovs-vswitchd's receiving socket for it
    (its buffer full: ``d`` of ``skmem`` in ``ss -0 -m -p`` output, for the packet sockets
    the userspace datapath binds to each port, ``*:PORT``). Nothing else counts these."""
    found = {}
    for line in ss_output.splitlines():
        if "ovs-vswitchd" not in line:
            continue
        port = re.search(r"\s\*:(\S+)\s", line)
        drops = re.search(r"skmem:\([^)]*\bd(\d+)", line)
        if port and drops:
            found[port.group(1)] = found.get(port.group(1), 0) + int(drops.group(1))
    return found


def switch_socket_drops(ports: Iterable[str]) -> dict[str, int] | None:
    """:func:`socket_drops` of this machine's ovs-vswitchd for ``ports`` (None without
    ``ss``); a port without a receiving socket (kernel datapath) is left out."""
    table = packet_socket_table()
    if table is None:
        return None
    wanted = set(ports)
    return {p: n for p, n in socket_drops(table).items() if p in wanted}


def softnet_dropped() -> int | None:
    """Packets this machine's CPUs dropped from full input backlogs (``/proc/net/softnet_stat``,
    second column, summed): a veth hands every packet to its peer through that backlog."""
    try:
        lines = Path("/proc/net/softnet_stat").read_text().splitlines()
    except OSError:
        return None
    return sum(int(ln.split()[1], 16) for ln in lines if ln.strip())


def datapath_lost(rundirs: Sequence[str | None] = (None,)) -> int | None:
    """Packets the datapaths lost so far (``lost:`` of ``ovs-appctl dpctl/show``, summed over
    this machine's Open vSwitch or each of ``rundirs``)."""
    outs = _ask_each(["ovs-appctl", "dpctl/show"], rundirs)
    if outs is None:
        return None
    return sum(int(n) for out in outs for n in re.findall(r"\blost:(\d+)", out))


def reading(ports: Iterable[str] | None, host_pids: Mapping[str, int],
            hosts: Iterable[str], rundirs: Sequence[str | None] = (None,)) -> dict[str, Any]:
    """One reading: time, the ports' counters (None without Open vSwitch), the datapaths'
    lost packets and the hosts' TCP segment counters."""
    ports = list(ports) if ports is not None else None
    ovs = port_drops(ports, rundirs) if ports is not None else None
    if ovs is not None:
        for port, stats in kernel_drops(ports).items():
            ovs.setdefault(port, {}).update(stats)
        if list(rundirs) == [None]:  # a stand-in's sockets are in its own namespace: not read
            for port, n in (switch_socket_drops(ports) or {}).items():
                ovs.setdefault(port, {})["socket_rx_dropped"] = n
    return {"time": time.monotonic(), "ports": ovs, "softnet_dropped": softnet_dropped(),
            "datapath_lost": datapath_lost(rundirs) if ports is not None else None,
            "hosts": tcp_counters.segments(host_pids, hosts)}


def _diff(a: Mapping[str, Mapping[str, int]] | None, b: Mapping[str, Mapping[str, int]] | None
          ) -> dict[str, dict[str, int]] | None:
    if a is None or b is None:
        return None
    return {k: {c: b[k][c] - a.get(k, {}).get(c, 0) for c in b[k]} for k in b}


def leg_drops(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What one leg lost: the difference of two :func:`reading` s, ports and hosts whose
    counters did not move left out."""
    ports = _diff(before["ports"], after["ports"])
    hosts = _diff(before["hosts"], after["hosts"])
    lost = (None if None in (before["datapath_lost"], after["datapath_lost"])
            else after["datapath_lost"] - before["datapath_lost"])
    backlog = (None if None in (before["softnet_dropped"], after["softnet_dropped"])
               else after["softnet_dropped"] - before["softnet_dropped"])
    return {"start": before["time"], "end": after["time"],
            "ports": None if ports is None else {p: c for p, c in ports.items()
                                                 if any(c.values())},
            "datapath_lost": lost, "softnet_dropped": backlog, "hosts": hosts}
