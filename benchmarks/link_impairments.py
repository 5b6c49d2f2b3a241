"""Link delay, jitter and loss on the emulator; BENCHMARKS.md "Link delay and loss on the emulator".

Three measurements on a 2-host leaf-spine (h0, h1 on leaf0), each repeated (root):

- **loss**: ``links: [{between: [h0, leaf0], loss: 0.01}]``; 20 000 UDP datagrams of 1000
  bytes at 10 Mbit/s each way (iperf3, 2 MB socket buffers): the fraction lost, against the
  1% specified. (At 20 Mbit/s with iperf3's default buffers, beside a busy VM, one direction
  of five runs lost 2.66%; where, was not measured.)
- **delay**: 5 ms one way on every host link, ``--jitter-us`` of jitter (1 ms); ``--pings``
  pings h0 -> h1 (40; ``ping -U``, user to user): the median round trip against 20 ms, and
  its standard deviation against what four crossings of uniform ±jitter give (2 j / √3:
  1.15 ms for 1 ms); then as many pings with the delay and no jitter (the spread the machine
  itself adds: in a software-emulated VM, late timers) and with no delay (the machine's own
  round trip). The spread the jitter added is the first less the second, in quadrature
  (independent sources of spread add their variances), per repeat and pooled over the
  repeats. ``--delay-only``: these alone.
- **paired** (``--paired``, alone): 4 hosts under one leaf, 5 ms one way on every host link,
  ``--jitter-us`` on h0's and h1's only; h0 pings h1 while h2 pings h3, ``--pings`` each:
  the jitter per crossing that h2's round trips, each with draws of it added, would need to
  spread as h0's do (``analysis.jitter``), per repeat and pooled; and both medians. Made for
  a machine whose own spread is as large as the jitter (a software-emulated VM).
- **one way** (``--one-way``, alone): the same fabric and jitter; h0 sends h1, and h2 sends
  h3, ``--pings`` UDP datagrams 20 ms apart, each stamped with the sender's clock and
  received with the kernel's stamp (``one_way_udp.py``): delays over two crossings, without
  the wake-up lateness of the processes that round trips carry; read as in ``--paired``, and
  their spreads beside the spec's; then ``ping`` h0 -> h1 without ``-U`` (the round trip to
  the kernel's receive stamp). Needs netem: a delay line holds packets after that stamp.
- **tcp**: 100 Mbit/s host links, 2.5 ms one way each (a 10 ms round trip), 0.5% loss on
  h0's link; one TCP flow h1 -> h0 for ``--seconds`` (iperf3) with each of reno, cubic and
  the kernel's default congestion control (bbr here, which does not back off on random
  loss): its goodput against the Mathis et al. rate
  (``testbed.core.link_model.mathis_rate_bit_s``, Reno's) for that round trip and loss.
- **rates** (``--rates``, Mbit/s): host links at each rate with 2.5 ms one way, no loss; one
  TCP flow h1 -> h0 for ``--seconds``: goodput ÷ rate, and where the delay line carries the
  delay (kernels without netem), how late it released packets (p99, max), the packets it
  held and the CPU it took; with segmentation offload on, and off (wire-sized packets, as
  on any fabric with loss). These are the fallback's limits.

Prints one line per repeat, then medians [min, max] with the mechanism that ran and whether
the machine is a software-emulated VM (its timing is not a real machine's).

    .venv/bin/python benchmarks/link_impairments.py [--repeats 5] [--seconds 10] [--delay-only]
        [--jitter-us 1000] [--pings 40] [--rates 100,400,1000] [--paired | --one-way]   (as root)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from analysis.jitter import fit_jitter_ms
from testbed.core.link_model import mathis_rate_bit_s
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.core.units import format_spread
from testbed.emulator import impairments
from testbed.emulator.fabric import Fabric
from testbed.emulator.preflight import netem_available, virtualization
from testbed.emulator.traffic import iperf_end

TWO_HOSTS = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
             "host_link_mbit_s": 50, "uplink_mbit_s": 50}


def fabric(tmp: Path, **extra) -> Fabric:
    return Fabric(build_plan(parse_fabric({"fabric": TWO_HOSTS | extra})), tmp / "run")


def iperf(fab: Fabric, src: str, dst: str, args: list[str]) -> dict:
    return iperf_end(fab, src, dst, args, port=5303)


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


def delay_once(tmp: Path, delay_us: float = 5000, jitter_us: float = 1000, pings: int = 40
               ) -> tuple[float, float]:
    """Median and standard deviation of ``pings`` round trips h0 -> h1 (ms) with ``delay_us`` and
    ``jitter_us`` on each host link. With neither: the machine's own round trip, which the
    delayed one includes; with the delay alone: the spread the machine adds to it."""
    delays = {k: v for k, v in (("host_link_delay_us", delay_us),
                                ("host_link_jitter_us", jitter_us)) if v}
    fab = fabric(tmp, **delays)
    fab.start()
    try:
        out = fab.host("h0").cmd(f"ping -n -U -c {int(pings)} -i 0.05 "
                                 f"{fab.plan.node('h1').ip()}")
    finally:
        fab.stop()
    rtts = impairments.parse_ping(out)["rtt_ms"]
    return statistics.median(rtts), statistics.stdev(rtts)


PAIRED_HOSTS = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 4,
                "host_link_mbit_s": 50, "uplink_mbit_s": 50}


def paired_fabric(tmp: Path, jitter_us: float, delay_us: float) -> Fabric:
    """4 hosts under one leaf, ``delay_us`` on every host link, ``jitter_us`` on h0's and h1's
    only: h0 -> h1 is jittered, h2 -> h3 is not, and both are measured at one moment."""
    links = [{"between": [h, "leaf0"], "delay_us": delay_us,
              "jitter_us": jitter_us if h in ("h0", "h1") else 0}
             for h in ("h0", "h1", "h2", "h3")]
    return Fabric(build_plan(parse_fabric({"fabric": PAIRED_HOSTS | {"links": links}})),
                  tmp / "run")


@dataclass
class Readings:
    """Jittered samples read beside jitter-free ones of the same moment, repeat by repeat:
    the jitter per crossing each repeat shows (:func:`analysis.jitter.fit_jitter_ms`), both
    paths' medians, and every sample for a pooled reading."""

    crossings: int
    jitter_us: float
    fits: list[float] = field(default_factory=list)
    medians: list[float] = field(default_factory=list)
    plain_medians: list[float] = field(default_factory=list)
    jittered: list[float] = field(default_factory=list)
    plain: list[float] = field(default_factory=list)

    def _fit(self, jittered: list[float], plain: list[float]) -> float:
        return fit_jitter_ms(jittered, plain, crossings=self.crossings,
                             most_ms=3 * self.jitter_us / 1000)

    def add(self, jittered: list[float], plain: list[float]) -> None:
        self.fits.append(self._fit(jittered, plain))
        self.medians.append(statistics.median(jittered))
        self.plain_medians.append(statistics.median(plain))
        self.jittered += jittered
        self.plain += plain

    def pooled(self) -> float:
        return self._fit(self.jittered, self.plain)


def paired_once(tmp: Path, jitter_us: float, pings: int, delay_us: float = 5000
                ) -> tuple[list[float], list[float]]:
    """Round trips (ms) h0 -> h1, whose host links have ``delay_us`` and ``jitter_us``, and at
    the same moment h2 -> h3, whose host links have the same delay and no jitter: the second
    carry the machine's own spread of that moment, which the first carry too."""
    fab = paired_fabric(tmp, jitter_us, delay_us)
    fab.start()
    try:
        procs = [fab.popen(src, ["ping", "-n", "-U", "-c", str(int(pings)), "-i", "0.05",
                                 fab.plan.node(dst).ip()], stdout=subprocess.PIPE, text=True)
                 for src, dst in (("h0", "h1"), ("h2", "h3"))]
        outs = [p.communicate(timeout=60 + pings)[0] for p in procs]
    finally:
        fab.stop()
    jittered, plain = (impairments.parse_ping(out)["rtt_ms"] for out in outs)
    return jittered, plain


ONE_WAY_PORT = 5304
ONE_WAY_PROBE = Path(__file__).with_name("one_way_udp.py")
WARM_UP = 5  # first datagrams of each flow, which may wait for ARP


def one_way_once(tmp: Path, jitter_us: float, datagrams: int, delay_us: float = 5000
                 ) -> tuple[list[float], list[float], list[float]]:
    """One-way delays (ms) h0 -> h1 and, at the same moment, h2 -> h3, on the fabric of
    :func:`paired_once`, each from the sender's clock to the receiving kernel's stamp
    (``one_way_udp.py``): two jittered crossings on the first, two jitter-free on the second,
    without the processes' wake-up lateness that round trips carry; then as many round trips
    h0 -> h1 of ``ping`` without ``-U`` (from its send to the kernel's receive stamp)."""
    fab = paired_fabric(tmp, jitter_us, delay_us)
    interval_s = 0.02
    fab.start()
    try:
        count = datagrams + WARM_UP
        python = [sys.executable, str(ONE_WAY_PROBE)]
        receivers = [fab.popen(dst, [*python, "recv", str(ONE_WAY_PORT), str(count), "5"],
                               stdout=subprocess.PIPE, text=True) for dst in ("h1", "h3")]
        for r in receivers:
            if r.stdout.readline().strip() != "ready":
                raise RuntimeError("a one-way receiver did not start")
        senders = [fab.popen(src, [*python, "send", fab.plan.node(dst).ip(), str(ONE_WAY_PORT),
                                   str(count), str(interval_s)])
                   for src, dst in (("h0", "h1"), ("h2", "h3"))]
        timeout_s = 30 + count * interval_s
        for p in senders:
            p.wait(timeout=timeout_s)
        outs = [r.communicate(timeout=timeout_s)[0] for r in receivers]
        # ping's own round trip: without -U it ends at the kernel's receive stamp, as above
        pings = fab.host("h0").cmd(f"ping -n -c {int(datagrams)} -i 0.05 "
                                   f"{fab.plan.node('h1').ip()}")
    finally:
        fab.stop()
    jittered, plain = ([float(x) for x in out.split()][WARM_UP:] for out in outs)
    return jittered, plain, impairments.parse_ping(pings)["rtt_ms"]


def one_way(repeats: int, jitter_us: float, datagrams: int) -> None:
    """Per repeat and pooled: the jitter per crossing the one-way delays show
    (analysis.jitter, two crossings), against ``jitter_us``; both paths' medians against the
    10 ms specified; and the spreads themselves beside the spec's."""
    got, rtts = Readings(crossings=2, jitter_us=jitter_us), []
    for k in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            a, b, trips = one_way_once(Path(tmp), jitter_us, datagrams)
        got.add(a, b)
        rtts.append(statistics.median(trips))
        print(f"repeat {k + 1}: {len(a)} and {len(b)} datagrams; jitter read "
              f"±{got.fits[-1]:.2f} ms per crossing (±{jitter_us / 1000:g} specified); one-way "
              f"median {got.medians[-1]:.2f} ms (sd {statistics.stdev(a):.3f}), without the "
              f"jitter {got.plain_medians[-1]:.2f} ms (sd {statistics.stdev(b):.3f}); ping RTT "
              f"median {rtts[-1]:.2f} ms", flush=True)
    pooled = got.pooled()
    spec_sd_ms = math.sqrt(2 / 3) * jitter_us / 1000
    print(f"one way, jitter per crossing, ±{jitter_us / 1000:g} ms specified: "
          f"{format_spread(got.fits, '.2f')} per repeat, pooled ±{pooled:.2f} ms "
          f"({pooled / (jitter_us / 1000):.2f} of the spec); sd pooled "
          f"{statistics.stdev(got.jittered):.3f} ms, without the jitter "
          f"{statistics.stdev(got.plain):.3f} (two crossings of the spec alone: "
          f"{spec_sd_ms:.3f}); median ms (spec 10): {format_spread(got.medians, '.2f')}, without "
          f"the jitter {format_spread(got.plain_medians, '.2f')}; ping RTT median ms (spec 20, "
          f"the kernel's receive stamp): {format_spread(rtts, '.2f')}")


def pooled_sd_ms(with_jitter: list[float], without: list[float]) -> float:
    """The spread the jitter added, over all the repeats: the root of the mean variance with
    jitter less the mean variance without (a steadier figure than any one repeat's, where
    the machine's own spread moves from one set of pings to the next)."""
    added = statistics.fmean(s * s for s in with_jitter) - statistics.fmean(
        s * s for s in without)
    return math.sqrt(max(0.0, added))


OFFLOAD = {True: "segmentation offload on", False: "wire-sized packets"}
CONGESTION_CONTROLS = ("reno", "cubic", "default")  # Mathis models reno's halving


def default_congestion_control() -> str:
    return Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()


def tcp_once(tmp: Path, seconds: int) -> dict[str, float]:
    """Goodput (Mbit/s) of one flow per congestion control, one after another on one fabric."""
    fab = fabric(tmp, host_link_mbit_s=100, uplink_mbit_s=100, host_link_delay_us=2500,
                 links=[{"between": ["h0", "leaf0"], "loss": 0.005}])
    fab.start()
    got = {}
    try:
        for cc in CONGESTION_CONTROLS:
            end = iperf(fab, "h1", "h0", ["-t", str(seconds)]
                        + ([] if cc == "default" else ["-C", cc]))
            got[cc] = end["sum_received"]["bits_per_second"] / 1e6
    finally:
        fab.stop()
    return got


def cpu_s(pids: list[int]) -> float:
    """User plus system CPU seconds of ``pids`` so far."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def rate_once(tmp: Path, mbit_s: int, seconds: int, offload: bool) -> dict:
    """One TCP flow at ``mbit_s`` with a 10 ms round trip: goodput ÷ rate, and the delay
    lines' lateness, packets and CPU. Without ``offload`` hosts send wire-sized packets (as
    on any fabric with loss), which the line handles one by one."""
    # past MAX_DELAY_LINE_WIRE_MBIT_S the emulator refuses the fabric: measuring that limit is
    # what this does, so the refusal is lifted for it here
    impairments.MAX_DELAY_LINE_WIRE_MBIT_S = math.inf
    fab = fabric(tmp, host_link_mbit_s=mbit_s, uplink_mbit_s=mbit_s, host_link_delay_us=2500,
                 segmentation_offload=offload)
    fab.start()
    try:
        pids = [p.pid for p in fab.delay_lines.values()]
        cpu0 = cpu_s(pids)
        end = iperf(fab, "h1", "h0", ["-t", str(seconds)])
        cpu = cpu_s(pids) - cpu0
        time.sleep(1.2)  # the lines write their statistics every second
        lines = fab.impairment_record().get("delay_lines", {})
    finally:
        fab.stop()
    into = lines.get("h0", {})
    return {"ratio": end["sum_received"]["bits_per_second"] / 1e6 / mbit_s,
            "p99_us": (into.get("late_us") or {}).get("p99"),
            "max_us": (into.get("late_us") or {}).get("max"),
            "packets": sum(v.get("packets", 0) for v in lines.values()),
            "cpu_s": cpu, "dropped": sum(sum((v.get("kernel_dropped") or {}).values())
                                         for v in lines.values())}


def paired(repeats: int, jitter_us: float, pings: int) -> None:
    """Per repeat and pooled: the jitter per crossing the round trips show (analysis.jitter),
    against ``jitter_us``; the medians of both paths against the 20 ms specified."""
    got = Readings(crossings=4, jitter_us=jitter_us)
    for k in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = paired_once(Path(tmp), jitter_us, pings)
        got.add(a, b)
        print(f"repeat {k + 1}: {len(a)} and {len(b)} round trips; jitter read "
              f"±{got.fits[-1]:.2f} ms per crossing (±{jitter_us / 1000:g} specified); RTT "
              f"median {got.medians[-1]:.2f} ms, without the jitter "
              f"{got.plain_medians[-1]:.2f} ms", flush=True)
    pooled = got.pooled()
    print(f"jitter per crossing, ±{jitter_us / 1000:g} ms specified: "
          f"{format_spread(got.fits, '.2f')} per repeat, pooled ±{pooled:.2f} ms "
          f"({pooled / (jitter_us / 1000):.2f} of the spec); RTT median ms (spec 20): "
          f"{format_spread(got.medians, '.2f')}, without the jitter "
          f"{format_spread(got.plain_medians, '.2f')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rates", default="", help="host link rates (Mbit/s) for the limits")
    ap.add_argument("--delay-only", action="store_true",
                    help="only the round trips (no loss, no TCP)")
    ap.add_argument("--jitter-us", type=float, default=1000,
                    help="jitter on each host link for the round trips (µs, below 5000)")
    ap.add_argument("--pings", type=int, default=40, help="round trips per measurement")
    ap.add_argument("--paired", action="store_true",
                    help="only the jitter, read beside jitter-free round trips taken at the "
                         "same moment (analysis.jitter)")
    ap.add_argument("--one-way", action="store_true",
                    help="only the jitter, from one-way delays of UDP datagrams stamped by "
                         "the receiving kernel, beside jitter-free ones of the same moment")
    args = ap.parse_args()
    if not 0 < args.jitter_us < 5000 or args.pings < 2:
        ap.error("--jitter-us must be above 0 and below the 5000 µs delay, --pings at least 2")
    if (args.paired or args.one_way) and args.pings < 10:
        ap.error("--paired and --one-way read the jitter from quantiles: --pings at least 10")
    spec_sd_ms = 2 * args.jitter_us / 1000 / math.sqrt(3)
    netem = netem_available()
    print(f"machine: {virtualization()}; netem {'present' if netem else 'absent'}")
    into, out, rtt, sd, base, plain_sd, added_sd = [], [], [], [], [], [], []
    tcp: dict[str, list[float]] = {cc: [] for cc in CONGESTION_CONTROLS}
    rates = [int(r) for r in args.rates.split(",") if r]
    limits: dict[tuple[int, bool], list[dict]] = {
        (r, o): [] for r in rates for o in (True, False)}
    mechanism = "?"
    if args.paired:
        paired(args.repeats, args.jitter_us, args.pings)
        return
    if args.one_way:
        if not netem:
            ap.error("--one-way reads the receiving kernel's stamp, which a delay line (no "
                     "netem here) holds packets after: use --paired")
        one_way(args.repeats, args.jitter_us, args.pings)
        return
    for k in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            m, s = delay_once(Path(tmp), jitter_us=args.jitter_us, pings=args.pings)
        with tempfile.TemporaryDirectory() as tmp:
            plain_sd.append(delay_once(Path(tmp), jitter_us=0, pings=args.pings)[1])
        with tempfile.TemporaryDirectory() as tmp:
            base.append(delay_once(Path(tmp), delay_us=0, jitter_us=0, pings=args.pings)[0])
        rtt.append(m)
        sd.append(s)
        added_sd.append(math.sqrt(max(0.0, s * s - plain_sd[-1] ** 2)))
        trips = (f"RTT median {m:.2f} ms, sd {s:.2f} ms (no jitter: sd {plain_sd[-1]:.2f} ms; "
                 f"added by the jitter {added_sd[-1]:.2f} ms; no delay: {base[-1]:.3f} ms)")
        if args.delay_only:
            print(f"repeat {k + 1}: {trips}", flush=True)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            a, b, mechanism = loss_once(Path(tmp))
        with tempfile.TemporaryDirectory() as tmp:
            g = tcp_once(Path(tmp), args.seconds)
        into.append(a * 100)
        out.append(b * 100)
        for cc, mbit_s in g.items():
            tcp[cc].append(mbit_s)
        flows = ", ".join(f"{cc} {v:.1f}" for cc, v in g.items())
        print(f"repeat {k + 1}: loss into h0 {a:.2%}, out of h0 {b:.2%} ({mechanism}); "
              f"{trips}; TCP Mbit/s {flows}", flush=True)
        for r, offload in limits:
            with tempfile.TemporaryDirectory() as tmp:
                got = rate_once(Path(tmp), r, args.seconds, offload)
            limits[r, offload].append(got)
            print(f"  {r} Mbit/s, {OFFLOAD[offload]}, 10 ms RTT: goodput "
                  f"{got['ratio']:.3f} of the rate; delay line late p99 {got['p99_us']} µs, "
                  f"max {got['max_us']} µs; "
                  f"{got['packets']} packets, {got['cpu_s']:.1f} CPU s, "
                  f"{got['dropped']} dropped", flush=True)
    delay = "netem" if netem else "delay-line"
    print(f"RTT ms (spec 20, {delay}): {format_spread(rtt, '.2f')}; sd ms (spec "
          f"{spec_sd_ms:.2f} for ±{args.jitter_us / 1000:g} ms jitter): "
          f"{format_spread(sd, '.2f')}; sd with no jitter {format_spread(plain_sd, '.2f')}; "
          f"added by the jitter {format_spread(added_sd, '.2f')} (÷ spec "
          f"{format_spread([a / spec_sd_ms for a in added_sd], '.2f')}; pooled over the "
          f"repeats {pooled_sd_ms(sd, plain_sd):.2f}, ÷ spec "
          f"{pooled_sd_ms(sd, plain_sd) / spec_sd_ms:.2f}); "
          f"RTT with no delay {format_spread(base, '.3f')}")
    if args.delay_only:
        return
    print(f"loss % (spec 1%, {mechanism}): into h0 {format_spread(into, '.2f')}, "
          f"out of h0 {format_spread(out, '.2f')}")
    model = mathis_rate_bit_s(0.010, 0.005) / 1e6
    for cc, runs in tcp.items():
        name = f"default ({default_congestion_control()})" if cc == "default" else cc
        print(f"TCP {name} Mbit/s at 100 Mbit/s, 10 ms, 0.5% loss: "
              f"{format_spread(runs, '.1f')}; Mathis {model:.1f}; ratio "
              f"{format_spread([g / model for g in runs], '.2f')}")
    for (r, offload), runs in limits.items():
        late = [x["p99_us"] for x in runs if x["p99_us"] is not None]
        print(f"{r} Mbit/s, {OFFLOAD[offload]}, 10 ms RTT ({delay}): goodput ÷ rate "
              f"{format_spread([x['ratio'] for x in runs], '.3f')}"
              + (f"; late p99 µs {format_spread(late, '.0f')}; CPU s per s "
                 f"{format_spread([x['cpu_s'] / args.seconds for x in runs], '.2f')}"
                 if late else ""))

if __name__ == "__main__":
    main()
