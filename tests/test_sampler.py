"""Sampler pieces that need no fabric: /proc net/dev parsing and the busy-process record."""

from __future__ import annotations

import os
import time

from testbed.emulator.sampler import BusyProcesses, read_cpu, read_net_dev


def test_read_net_dev_gives_rx_and_tx_bytes(tmp_path):
    f = tmp_path / "dev"
    f.write_text(
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets\n"
        "    lo:  1000      10    0    0    0     0          0         0   2000      20 0 0 0"
        " 0 0 0\n"
        "leaf0-eth1: 123 1 0 0 0 0 0 0 456 2 0 0 0 0 0 0\n"
    )
    assert read_net_dev(str(f)) == {"lo": (1000, 2000), "leaf0-eth1": (123, 456)}
    assert "lo" in read_net_dev(f"/proc/{os.getpid()}/net/dev")


def test_busy_processes_name_what_used_the_cpu():
    busy = BusyProcesses(below_idle=1.01)  # record every second, busy or not
    time.sleep(0.2)
    busy.tick()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # burn half a second of CPU in this process
        pass
    busy.tick()
    last = busy.starved[-1]
    assert set(last["cpu"]) == {"user", "system", "softirq", "steal"}
    mine = [b for b in last["busiest"] if "pytest" in b["process"] or "python" in b["process"]]
    assert mine and mine[0]["cpu"] > 0.3
    idle, total = read_cpu()
    assert 0 < idle < total
