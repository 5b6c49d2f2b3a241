"""Checks the root tests make on a live fabric."""

from __future__ import annotations

import json
import re
import subprocess
import time

from testbed.emulator.calibrate import TCP_WIRE_FACTOR
from testbed.emulator.sampler import LinkSampler, window_rates


def iperf_rates(fab, src: str, dst: str, leaf: str, seconds: int = 4) -> tuple[float, float]:
    """(wire-equivalent Mbit/s of ``src``'s link into ``leaf``, iperf3 goodput Mbit/s) while
    one TCP flow from ``src`` to ``dst`` saturates it (middle of the flow, by the counters)."""
    server = fab.popen(dst, ["iperf3", "-s", "-1", "-p", "5301"], stdout=subprocess.DEVNULL)
    fab.wait_listening(dst, 5301)
    with LinkSampler(fab.plan, fab.host_pids()) as sampler:
        client = fab.popen(src, ["iperf3", "-c", fab.plan.node(dst).ip(), "-p", "5301",
                                 "-t", str(seconds), "-J"], stdout=subprocess.PIPE, text=True)
        start = time.monotonic()
        out, _ = client.communicate(timeout=30)
    server.wait(timeout=10)
    rates = window_rates(sampler.counters(), start + 1, start + seconds - 0.3)
    counted = rates.set_index(["src", "dst"]).loc[(src, leaf), "achieved_mbit_s"]
    goodput = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    return counted * TCP_WIRE_FACTOR, goodput  # wire-equivalent: testbed.emulator.calibrate


def htb_class_counts(tc_output: str) -> dict[str, tuple[int, int]]:
    """(bytes, packets) each HTB class sent, by class id (``5:20``), from ``tc -s class
    show`` (which has no JSON here)."""
    return {c: (int(b), int(p)) for c, b, p in
            re.findall(r"class htb (\w+:\w+) .*\n Sent (\d+) bytes (\d+) pkt", tc_output)}
