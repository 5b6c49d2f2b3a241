"""Link delay, jitter and loss on the emulator; BENCHMARKS.md "Link delay and loss on the emulator".

Three measurements on a 2-host leaf-spine (h0, h1 on leaf0), each repeated (root):

- **loss**: ``links: [{between: [h0, leaf0], loss: 0.01}]``; 20 000 UDP datagrams of 1000
  bytes at 10 Mbit/s each way (iperf3, 2 MB socket buffers): the fraction lost, against the
  1% specified. (At 20 Mbit/s with iperf3's default buffers, beside a busy VM, one direction
  of five runs lost 2.66%; where, was not measured.)
- **delay** (netem only): 5 ms one way on every host link, 1 ms jitter; 40 pings h0 -> h1:
  the median round trip against 20 ms, and its standard deviation against the 1.15 ms that
  four crossings of uniform ±1 ms jitter give.
- **tcp** (netem only): 100 Mbit/s host links, 2.5 ms one way each (a 10 ms round trip),
  0.5% loss on h0's link; one TCP flow h1 -> h0 for ``--seconds`` (iperf3, the kernel's
  default congestion control): its goodput against the Mathis et al. rate
  (``testbed.core.link_model.mathis_rate_bit_s``) for that round trip and loss.

Prints one line per repeat, then medians [min, max] with the mechanism that ran and whether
the machine is a software-emulated VM (its timing is not a real machine's).

    .venv/bin/python benchmarks/link_impairments.py [--repeats 5] [--seconds 10]   (as root)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from testbed.core.link_model import mathis_rate_bit_s
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.core.units import format_spread
from testbed.emulator.fabric import Fabric
from testbed.emulator.preflight import netem_available, virtualization

TWO_HOSTS = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
             "host_link_mbit_s": 50, "uplink_mbit_s": 50}


def fabric(tmp: Path, **extra) -> Fabric:
    return Fabric(build_plan(parse_fabric({"fabric": TWO_HOSTS | extra})), tmp / "run")


def iperf(fab: Fabric, src: str, dst: str, args: list[str]) -> dict:
    server = fab.popen(dst, ["iperf3", "-s", "-1", "-p", "5303"], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    client = fab.popen(src, ["iperf3", "-c", fab.plan.node(dst).ip(), "-p", "5303", "-J",
                             *args], stdout=subprocess.PIPE, text=True)
    out, _ = client.communicate(timeout=300)
    server.wait(timeout=30)
    return json.loads(out)["end"]


def loss_once(tmp: Path) -> tuple[float, float, str]:
    fab = fabric(tmp, links=[{"between": ["h0", "leaf0"], "loss": 0.01}])
    fab.start()
    try:
        udp = ["-u", "-b", "10M", "-w", "2M", "-l", "1000", "-k", "20000"]
        into = iperf(fab, "h1", "h0", udp)["sum"]
        out = iperf(fab, "h0", "h1", udp)["sum"]
        mechanism = fab.impairments[0].mechanism
    finally:
        fab.stop()
    return (into["lost_packets"] / into["packets"], out["lost_packets"] / out["packets"],
            mechanism)


def delay_once(tmp: Path) -> tuple[float, float]:
    fab = fabric(tmp, host_link_delay_us=5000, host_link_jitter_us=1000)
    fab.start()
    try:
        out = fab.host("h0").cmd(f"ping -n -c 40 -i 0.05 {fab.plan.node('h1').ip()}")
    finally:
        fab.stop()
    rtts = [float(x.split("time=")[1].split()[0]) for x in out.splitlines() if "time=" in x]
    return statistics.median(rtts), statistics.stdev(rtts)


def tcp_once(tmp: Path, seconds: int) -> float:
    fab = fabric(tmp, host_link_mbit_s=100, uplink_mbit_s=100, host_link_delay_us=2500,
                 links=[{"between": ["h0", "leaf0"], "loss": 0.005}])
    fab.start()
    try:
        end = iperf(fab, "h1", "h0", ["-t", str(seconds)])
    finally:
        fab.stop()
    return end["sum_received"]["bits_per_second"] / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    netem = netem_available()
    print(f"machine: {virtualization()}; netem {'present' if netem else 'absent'}")
    into, out, rtt, sd, tcp = [], [], [], [], []
    mechanism = "?"
    for k in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            a, b, mechanism = loss_once(Path(tmp))
        into.append(a * 100)
        out.append(b * 100)
        line = f"repeat {k + 1}: loss into h0 {a:.2%}, out of h0 {b:.2%} ({mechanism})"
        if netem:
            with tempfile.TemporaryDirectory() as tmp:
                m, s = delay_once(Path(tmp))
            with tempfile.TemporaryDirectory() as tmp:
                g = tcp_once(Path(tmp), args.seconds)
            rtt.append(m)
            sd.append(s)
            tcp.append(g)
            line += f"; RTT median {m:.2f} ms, sd {s:.2f} ms; TCP {g:.1f} Mbit/s"
        print(line, flush=True)
    print(f"loss % (spec 1%, {mechanism}): into h0 {format_spread(into, '.2f')}, "
          f"out of h0 {format_spread(out, '.2f')}")
    if netem:
        model = mathis_rate_bit_s(0.010, 0.005) / 1e6
        print(f"RTT ms (spec 20): {format_spread(rtt, '.2f')}; sd ms (spec 1.15): "
              f"{format_spread(sd, '.2f')}")
        print(f"TCP Mbit/s at 100 Mbit/s, 10 ms, 0.5% loss: {format_spread(tcp, '.1f')}; "
              f"Mathis {model:.1f}; ratio {format_spread([g / model for g in tcp], '.2f')}")


if __name__ == "__main__":
    main()
