"""Sampler pieces that need no fabric: /proc net/dev parsing and the busy-process record."""

from __future__ import annotations

import os
import time

import psutil
import pytest

from testbed.emulator.sampler import BusyProcesses, cpu_seconds, read_cpu, read_net_dev


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
    busy = BusyProcesses(below_idle=1.01, keep=100_000)  # every second, every process
    time.sleep(0.2)
    t0 = time.monotonic()  # before the first tick: the sampler's second is inside [t0, now]
    busy.tick()
    cpu0 = time.process_time()
    while time.process_time() - cpu0 < 0.5:  # half a second of this process's CPU, however
        pass  # busy the rest of the machine is
    busy.tick()
    wall = time.monotonic() - t0
    last = busy.starved[-1]
    assert set(last["cpu"]) == {"user", "system", "softirq", "steal"}
    me = " ".join(psutil.Process().cmdline())[:80]
    mine = [b for b in last["busiest"] if b["process"] == me]
    assert mine and mine[0]["cpu"] >= 0.5 / wall - 0.01
    idle, total = read_cpu()
    assert 0 < idle < total


def test_cpu_seconds_count_steal_inside_the_total():
    idle, total, steal = cpu_seconds()
    assert 0 <= steal < total and 0 < idle < total
    assert (idle, total) == pytest.approx(read_cpu(), rel=1e-3)


def test_a_stretch_says_when_the_hypervisor_took_its_cpu():
    import pandas as pd

    from testbed.emulator.runner import _stolen_then
    from testbed.emulator.sampler import cpu_mean

    t = [100.0 + k / 10 for k in range(1, 41)]  # 4 s at 10 Hz
    steal = [0.0] * 20 + [0.25] * 10 + [0.0] * 10  # a quarter of both CPUs stolen for 1 s
    cpu = pd.DataFrame({"time": t, "idle": 0.7, "steal": steal})
    assert cpu_mean(cpu, 102.0, 103.0, "steal") == pytest.approx(0.25)
    assert _stolen_then(cpu, 102.0, 104.0) == ("; the hypervisor took 12% of the CPU time then "
                                               "(steal)")
    assert _stolen_then(cpu, 100.0, 102.0) == ""  # none stolen
    assert _stolen_then(cpu.drop(columns="steal"), 102.0, 104.0) == ""  # a run from before
    assert _stolen_then(None, 102.0, 104.0) == ""
