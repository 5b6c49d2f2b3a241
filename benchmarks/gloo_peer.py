"""Ring All-Reduce against Gloo; BENCHMARKS.md "Ring All-Reduce against Gloo, on the same fabric".

fabriclab's ring All-Reduce against Gloo (``torch.distributed``, CPU build) on the same
shaped fabric, in one run (root).

One switch, ``--ranks`` hosts, every link at ``--mbps``. Each round measures, on the same
fabric one after another: iperf3 goodput of one flow (the most a TCP connection gets on a
link), then per size Gloo's All-Reduce and fabriclab's ring on each transport, the order
rotated from round to round. busbw (nccl-tests: algbw·2(n−1)/n) is what each link carries per
second on a bandwidth-optimal collective, so it is compared with that round's iperf3 goodput
and with that round's Gloo. Every figure is a median over ``--repeats`` rounds with min and max.

Needs the ``peers`` extra (the CPU build of torch): ``.venv/bin/pip install -e '.[peers]'``.

    .venv/bin/python benchmarks/gloo_peer.py [--mbps 50] [--sizes 8MiB,32MiB] [--repeats 5]
        [--ranks 8] [--iters 3] [--transports zerocopy,rpc]   (as root)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from testbed.core.formulas import bandwidths
from testbed.core.topology import one_switch_plan
from testbed.core.units import format_spread, parse_size
from testbed.emulator.fabric import Fabric
from testbed.emulator.tcp_counters import timeouts
from testbed.emulator.traffic import IperfFlow, run_flows
from testbed.emulator.workers import run_on_fabric

GLOO_RANK = Path(__file__).with_name("gloo_rank.py")
GLOO_PORT = 29500


def gloo_seconds(fab: Fabric, size_bytes: int, iters: int, port: int,
                 timeout_s: float = 600.0) -> float:
    """Gloo All-Reduce of ``size_bytes`` over every host: the slowest rank's mean seconds per
    measured iteration (as fabriclab's summary takes them). Raises if a sum was wrong."""
    hosts = fab.plan.hosts
    master = f"{hosts[0].ip()}:{port}"
    procs = [fab.popen(h.name, [sys.executable, str(GLOO_RANK), "--rank", str(r),
                                "--world", str(len(hosts)), "--master", master,
                                "--ifname", h.nic().intf, "--size-bytes", str(size_bytes),
                                "--iters", str(iters)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r, h in enumerate(hosts)]
    try:
        results = []
        for h, p in zip(hosts, procs, strict=True):
            out, err = p.communicate(timeout=timeout_s)
            if p.returncode != 0:
                raise SystemExit(f"gloo rank on {h.name} failed: {err.strip()[-400:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if not all(r["correct"] for r in results):
        raise SystemExit(f"Gloo's All-Reduce of {size_bytes} bytes gave a wrong sum")
    return max(statistics.mean(r["seconds"]) for r in results)


def fabriclab_seconds(fab: Fabric, out_dir: Path, size_bytes: int, iters: int,
                      transport: str) -> float:
    """fabriclab's ring All-Reduce of ``size_bytes``: seconds per measured iteration."""
    res = run_on_fabric(fab, [h.name for h in fab.plan.hosts], out_dir=out_dir,
                        algorithm="ring", sizes=[size_bytes], transport=transport,
                        iterations=iters, warmup=1, timeout=120)
    (row,) = res.rows
    return row.time_us / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mbps", type=float, default=50.0)
    ap.add_argument("--sizes", default="8MiB,32MiB")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--transports", default="zerocopy,rpc")
    args = ap.parse_args()
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        raise SystemExit("torch is not installed: .venv/bin/pip install -e '.[peers]' "
                         "(the CPU build of torch)") from None
    sizes = [(s, parse_size(s)) for s in args.sizes.split(",")]
    systems = ["gloo", *args.transports.split(",")]
    plan = one_switch_plan(args.ranks, args.mbps)
    busbw: dict[tuple[str, str], list[float]] = defaultdict(list)  # (system, size) -> bit/s
    goodput: list[float] = []
    rtos: dict[str, int] = defaultdict(int)
    hosts = [h.name for h in plan.hosts]
    with tempfile.TemporaryDirectory() as tmp, Fabric(plan, Path(tmp) / "fabric") as fab:
        h0, h1 = plan.hosts[0], plan.hosts[1]
        for r in range(args.repeats):
            flow = IperfFlow(h0.name, h1.name, h0.ip(), h1.ip())
            goodput.append(run_flows(fab, [flow], 8).goodput_bps[0])
            order = systems[r % len(systems):] + systems[:r % len(systems)]
            line = [f"round {r + 1}: iperf3 {goodput[-1] / 1e6:.2f} Mbit/s"]
            for label, size in sizes:
                for system in order:
                    before = timeouts(fab.host_pids(), hosts) or 0
                    if system == "gloo":
                        t = gloo_seconds(fab, size, args.iters, GLOO_PORT + r)
                    else:
                        t = fabriclab_seconds(fab, Path(tmp) / f"{system}-{label}-{r}", size,
                                              args.iters, system)
                    rtos[system] += (timeouts(fab.host_pids(), hosts) or 0) - before
                    busbw[system, label].append(bandwidths(size, t, args.ranks)[1] * 8)
                    line.append(f"{system} {label} {busbw[system, label][-1] / 1e6:.2f}")
            print(", ".join(line), flush=True)
    rate = args.mbps * 1e6
    print(f"\n{args.ranks} ranks, one switch, {args.mbps:g} Mbit/s; iperf3 goodput "
          f"{format_spread([g / rate for g in goodput], '.3f')} of the rate; medians [min, max] of "
          f"{args.repeats} rounds, ratios taken within each round")
    print(f"{'system':9} {'size':>6} {'busbw Mbit/s':>22} {'÷ rate':>6} {'÷ iperf3':>21} "
          f"{'÷ Gloo':>21} {'RTOs':>5}")
    for label, _ in sizes:
        gloo = busbw["gloo", label]
        for system in systems:
            b = busbw[system, label]
            print(f"{system:9} {label:>6} {format_spread([x / 1e6 for x in b], '.2f'):>22} "
                  f"{statistics.median(b) / rate:6.3f} "
                  f"{format_spread([x / g for x, g in zip(b, goodput, strict=True)], '.3f'):>21} "
                  f"{format_spread([x / g for x, g in zip(b, gloo, strict=True)], '.3f'):>21} "
                  f"{rtos[system]:5d}")


if __name__ == "__main__":
    main()
