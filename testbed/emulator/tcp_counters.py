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


def tcp_ext(netstat: str) -> dict[str, int]:
    """The ``TcpExt`` counters of a ``/proc/net/netstat`` text (pairs of header and value
    lines, each starting with its group's name)."""
    lines = netstat.splitlines()
    for keys, values in zip(lines[::2], lines[1::2], strict=False):
        names, numbers = keys.split(), values.split()
        if names and names[0] == "TcpExt:":
            return {k: int(v) for k, v in zip(names[1:], numbers[1:], strict=False)}
    return {}


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
