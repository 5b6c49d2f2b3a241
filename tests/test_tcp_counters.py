"""The hosts' TCP retransmission-timeout counters (testbed.emulator.tcp_counters), read from a
namespace's /proc/PID/net/netstat; no root needed."""

from __future__ import annotations

import os

from testbed.emulator.tcp_counters import TIMEOUTS, tcp_ext, timeouts

NETSTAT = ("TcpExt: SyncookiesSent TCPTimeouts TCPLossProbes\n"
           "TcpExt: 0 7 3\n"
           "IpExt: InNoRoutes TCPTimeouts\n"
           "IpExt: 1 99\n")


def test_the_tcpext_group_is_read_and_no_other():
    assert tcp_ext(NETSTAT) == {"SyncookiesSent": 0, TIMEOUTS: 7, "TCPLossProbes": 3}
    assert tcp_ext("IpExt: InNoRoutes\nIpExt: 1\n") == {}


def test_a_namespace_s_counters_are_read_through_a_pid_in_it():
    me = os.getpid()
    with open(f"/proc/{me}/net/netstat") as f:
        mine = tcp_ext(f.read())[TIMEOUTS]
    assert timeouts({"h0": me}, ["h0"]) >= mine >= 0
    assert timeouts({"h0": me, "h1": me}, ["h0", "h1"]) >= 2 * mine
    assert timeouts({"h0": me}, []) == 0


def test_a_host_that_cannot_be_read_gives_none_not_a_wrong_sum():
    assert timeouts({}, ["h0"]) is None
    assert timeouts({"h0": 2 ** 22 + 1}, ["h0"]) is None  # above pid_max: no such process


def test_a_hosts_reading_has_what_it_dropped_on_input():
    import os

    from testbed.emulator.tcp_counters import IP_DISCARDS, RECEIVER_DROPS, segments

    (mine,) = segments({"me": os.getpid()}, ["me"]).values()
    assert {*RECEIVER_DROPS, *IP_DISCARDS} <= set(mine)
    assert all(isinstance(mine[k], int) for k in (*RECEIVER_DROPS, *IP_DISCARDS))
