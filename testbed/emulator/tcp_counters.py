"""The hosts' own TCP counters: retransmission timeouts, read from each host's network namespace.

A timeout stalls a flow for at least 200 ms (Linux's minimum RTO), enough to cost a job on a
10 Mbit/s link several percent of an iteration; so a run records how many its jobs' hosts
counted, beside the job invariant's verdict. The counters are per network namespace:
``/proc/PID/net/netstat`` of a process inside a host's namespace (the host's shell, which the
fabric started) reads that host's, without entering it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

TIMEOUTS = "TCPTimeouts"  # TcpExt: retransmission timeouts
SEGMENTS = ("OutSegs", "RetransSegs")  # Tcp (/proc/net/snmp): segments sent, resent
# TcpExt: a receiver's duplicate segments (it answers each with a D-SACK), a sender's D-SACKs
# received (a retransmission that was not needed: ``TCPDSACKRecv`` counts D-SACK blocks, one
# per resent TSO packet however many segments it held, ``TCPDSACKRecvSegs`` the segments)
# and its RTOs found spurious
DUPLICATES = ("TCPDSACKOldSent", "TCPDSACKOfoSent", "TCPDSACKRecv", "TCPDSACKRecvSegs",
              "TCPSpuriousRTOs")
# TcpExt: recoveries from a hole the receiver SACKed (a segment lost, not late), and the
# segments resent by fast retransmit
RECOVERIES = ("TCPSackRecovery", "TCPFastRetrans")
# TcpExt: segments a receiver's own TCP dropped (its receive queue full, its out-of-order
# queue pruned or full, its socket backlog full, a zero window); Ip: datagrams its IP layer
# discarded on input. Losses at the receiving host, not on the wire.
RECEIVER_DROPS = ("TCPRcvQDrop", "TCPOFODrop", "TCPBacklogDrop", "TCPRcvPruned",
                  "TCPZeroWindowDrop")
IP_DISCARDS = ("InDiscards",)


def group_counters(text: str, group: str) -> dict[str, int]:
    """The counters of ``group`` (``TcpExt``, ``Tcp``) in a ``/proc/net/netstat`` or
    ``/proc/net/snmp`` text (pairs of header and value lines, each starting with its group's
    name)."""
    lines = text.splitlines()
    for keys, values in zip(lines[::2], lines[1::2], strict=False):
        names, numbers = keys.split(), values.split()
        if names and names[0] == f"{group}:":
            return {k: int(v) for k, v in zip(names[1:], numbers[1:], strict=False)}
    return {}


def tcp_ext(netstat: str) -> dict[str, int]:
    """The ``TcpExt`` counters of a ``/proc/net/netstat`` text."""
    return group_counters(netstat, "TcpExt")


def timeouts(host_pids: Mapping[str, int], hosts: Iterable[str]) -> int | None:
    """Retransmission timeouts counted so far by the TCP of every host in ``hosts``
    (``host_pids``: host → a PID in its namespace), or None if one cannot be read."""
    total = 0
    for host in hosts:
        pid = host_pids.get(host)
        if pid is None:
            return None
        try:
            text = Path(f"/proc/{pid}/net/netstat").read_text()
        except OSError:
            return None
        total += tcp_ext(text).get(TIMEOUTS, 0)
    return total


def segments(host_pids: Mapping[str, int], hosts: Iterable[str]
             ) -> dict[str, dict[str, int]] | None:
    """Per host of ``hosts``: segments its TCP sent (``OutSegs``) and resent
    (``RetransSegs``) so far, its retransmission timeouts, the D-SACK counters that tell
    a needless retransmission from a lost segment, and what the host itself dropped on input
    (:data:`RECEIVER_DROPS`, :data:`IP_DISCARDS`); None if one cannot be read."""
    out = {}
    for host in hosts:
        pid = host_pids.get(host)
        if pid is None:
            return None
        try:
            snmp_text = Path(f"/proc/{pid}/net/snmp").read_text()
            ext = tcp_ext(Path(f"/proc/{pid}/net/netstat").read_text())
        except OSError:
            return None
        snmp, ip = group_counters(snmp_text, "Tcp"), group_counters(snmp_text, "Ip")
        out[host] = ({k: snmp.get(k, 0) for k in SEGMENTS}
                     | {k: ext.get(k, 0) for k in (TIMEOUTS, *DUPLICATES, *RECOVERIES,
                                                   *RECEIVER_DROPS)}
                     | {k: ip.get(k, 0) for k in IP_DISCARDS})
    return out
