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


# iperf3's UDP test opens its stream with one datagram each way and no retransmission: where
# either is lost, the client stops with this error and measures nothing (esnet/iperf#862). On
# a link that loses 1%, two datagrams crossing it make that about one test in fifty.
UDP_SETUP_LOST = "unable to read from stream socket"


def iperf_end(fab, src: str, dst: str, args: list[str], port: int = BASE_PORT,
              timeout_s: float = 300, tries: int = 3) -> dict:
    """One iperf3 test from ``src`` to ``dst`` (a server started on ``dst`` for it; ``args``
    after ``-c IP -p PORT -J``): the ``end`` of its JSON. A UDP test whose stream setup was
    lost is run again, up to ``tries`` in all; any other failure is a FabricLabError."""
    for _ in range(tries):
        server = fab.popen(dst, ["iperf3", "-s", "-1", "-p", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            fab.wait_listening(dst, port)
            client = fab.popen(src, ["iperf3", "-c", fab.plan.node(dst).ip(), "-p", str(port),
                                     "-J", *args], stdout=subprocess.PIPE, text=True)
            out, _ = client.communicate(timeout=timeout_s)
        finally:
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:  # it still waits for the test that failed
                server.kill()
                server.wait()
        try:
            result = json.loads(out)
        except ValueError as exc:
            raise FabricLabError(f"iperf3 {src} -> {dst} printed no JSON") from exc
        if result.get("end"):
            return result["end"]
        if UDP_SETUP_LOST not in str(result.get("error", "")):
            break
    raise FabricLabError(f"iperf3 {src} -> {dst} measured nothing: {result.get('error')}")
