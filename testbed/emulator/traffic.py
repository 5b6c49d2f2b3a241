"""Bulk TCP flows between fabric hosts with iperf3 (one server and one client per flow)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass

from testbed.core.errors import FabricLabError

BASE_PORT = 5201


@dataclass(frozen=True)
class IperfFlow:
    src: str
    dst: str
    src_ip: str
    dst_ip: str


@dataclass(frozen=True)
class FlowResults:
    start: float  # time.monotonic() when the clients were started
    goodput_bps: list[float]  # receiver-side goodput per flow, in the order given


def run_flows(fab, flows: list[IperfFlow], seconds: float) -> FlowResults:
    """Run every flow at once for ``seconds``; return when all are done."""
    servers, clients = [], []
    try:
        for k, f in enumerate(flows):
            servers.append(fab.popen(f.dst, ["iperf3", "-s", "-1", "-B", f.dst_ip,
                                             "-p", str(BASE_PORT + k)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        start = time.monotonic()
        for k, f in enumerate(flows):
            clients.append(fab.popen(f.src, [
                "iperf3", "-c", f.dst_ip, "-B", f.src_ip, "-p", str(BASE_PORT + k),
                "-t", f"{seconds:g}", "-J", "--connect-timeout", "3000",
            ], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        goodput = []
        for f, c in zip(flows, clients, strict=True):
            out, _ = c.communicate(timeout=seconds + 15)
            goodput.append(_goodput(out, f))
        return FlowResults(start, goodput)
    finally:
        for p in servers + clients:
            if p.poll() is None:
                p.kill()
                p.wait()


def _goodput(iperf_json: str, f: IperfFlow) -> float:
    try:
        return float(json.loads(iperf_json)["end"]["sum_received"]["bits_per_second"])
    except (ValueError, KeyError) as exc:
        raise FabricLabError(f"iperf3 {f.src} -> {f.dst} produced no result "
                             "(is the path up?)") from exc
