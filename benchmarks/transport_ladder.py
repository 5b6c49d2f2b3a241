"""Each rung's cost; BENCHMARKS.md "The transport ladder: copies, serialisation, per-call cost".

The transport ladder, rung against rung: what each factor (copies, message, calls, framework;
each step up the ladder changes one) costs a tensor transfer (2 ranks, flat ring All-Reduce,
which sends S per rank). The rungs are the registered transports that declare one
(``workloads.transports.ladder``).

    python benchmarks/transport_ladder.py [--sizes 4KiB:64MiB] [--rounds 5]
    sudo flock /tmp/fabriclab-roottests.lock .venv/bin/python benchmarks/transport_ladder.py \\
        --mbit-s 1000       # 2 hosts on one kernel-bridge switch, links shaped to 1 Gbit/s

Every round runs every rung once (the order rotated from round to round), each with 1 warm-up
and ``--iters`` measured All-Reduces of every size (every 4x); a round's time is its median
iteration (an iteration takes its slower rank's time), its CPU and copies those of all its
iterations. Prints per size and rung the median [min, max] over the
rounds of the time, the workers' CPU seconds per GB sent, and the copies a byte as the
transport counted them; then each rung's time over zerocopy's (ratios taken within a round),
each one-factor step's cost and its share of the gap between the first and the last rung (in
time, and in CPU; the steps add up to the gap, and a step that takes a cost away is negative),
and the CPU check of the copy counts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from analysis.transport_costs import size_costs
from testbed.core.topology import one_switch_plan
from testbed.core.units import format_size, format_spread, parse_size_range
from workloads.transports.ladder import ladder as ladder_classes
from workloads.transports.ladder import step_label

CLASSES = ladder_classes()
RUNGS = [c.name for c in CLASSES]
# What each step changes (step i: from rung i - 1 to rung i).
STEPS = [step_label(lo, hi) for lo, hi in itertools.pairwise(CLASSES)]


def ladder(run: Callable[[str, list[int], Path], None], sizes: list[int], rounds: int,
           tmp: Path) -> dict[str, dict[int, list[tuple[float, float, float]]]]:
    """``rounds`` rounds of every rung (order rotated each round); ``run(transport, sizes,
    out)`` runs one job leaving its traces in ``out``."""
    got: dict[str, dict[int, list]] = {t: defaultdict(list) for t in RUNGS}
    for r in range(rounds):
        for t in RUNGS[r % len(RUNGS):] + RUNGS[: r % len(RUNGS)]:
            out = tmp / f"{t}-{r}"
            run(t, sizes, out)
            for size, fig in size_costs(out).items():
                got[t][size].append(fig)
            print(f"# round {r + 1}/{rounds}: {t} done", file=sys.stderr, flush=True)
    return got


def gap_shares(got: dict, sizes: list[int], where: str, col: int, what: str) -> None:
    """Per size, what each one-factor step costs in column ``col`` (the difference of the
    rungs' medians) and its share of the gap between the first and the last rung; the CPU's
    is the steadier on a busy machine (waiting costs no CPU)."""
    last = len(RUNGS) - 1
    scale, unit = (1e3, "ms") if col == 0 else (1.0, "s/GB")
    print(f"\n## {where}: each one-factor step's cost in {what} ({unit}, from the medians), "
          f"then its share of the L{last} - L0 gap; largest share marked *")
    for i, label in enumerate(STEPS, start=1):
        print(f"L{i - 1}→L{i} ({RUNGS[i - 1]} → {RUNGS[i]}) changes {label}")
    head = " ".join(f"{f'L{i - 1}→L{i}':>8}" for i in range(1, len(RUNGS)))
    print(f"{'size':>7} {'gap':>8} {head}   |  shares {head}")
    for s in sizes:
        med = [statistics.median(r[col] for r in got[t][s]) for t in RUNGS]
        gap = med[-1] - med[0]
        steps = [med[i] - med[i - 1] for i in range(1, len(RUNGS))]
        top = max(range(len(steps)), key=lambda i: steps[i] / gap if gap else 0.0)
        print(f"{format_size(s):>7} {gap * scale:8.3g} "
              + " ".join(f"{x * scale:8.3g}" for x in steps) + "   |         "
              + " ".join(f"{f'{x / gap:.0%}' + ('*' if i == top else ''):>8}" if gap else
                         f"{'-':>8}" for i, x in enumerate(steps)))


def report(got: dict, sizes: list[int], where: str) -> None:
    print(f"## {where}: time ms, CPU s/GB sent, copies/B (median [min, max] of "
          f"{len(got['zerocopy'][sizes[0]])} rounds)")
    for i, c in enumerate(CLASSES):
        print(f"L{i} {c.name}: " + ("; ".join(f"{k}: {v}" for k, v in c.factors.items())
                                    if i == 0 else f"changes {STEPS[i - 1]}"))
    print(f"{'size':>7} {'rung':>13} {'time ms':>26} {'CPU s/GB':>24} {'copies/B':>8}")
    for s in sizes:
        for t in RUNGS:
            rows = got[t][s]
            print(f"{format_size(s):>7} {t:>13} {format_spread([r[0] * 1e3 for r in rows]):>26} "
                  f"{format_spread([r[1] for r in rows]):>24} "
                  f"{statistics.median(r[2] for r in rows):8.2f}")
    print(f"\n## {where}: time ÷ zerocopy's, within a round (median [min, max])")
    print(f"{'size':>7} " + " ".join(f"{f'L{i}/L0':>20}" for i in range(1, len(RUNGS))))
    for s in sizes:
        z = [r[0] for r in got["zerocopy"][s]]
        print(f"{format_size(s):>7} " + " ".join(
            f"{format_spread([r[0] / zt for r, zt in zip(got[t][s], z, strict=True)], '.2f'):>20}"
            for t in RUNGS[1:]))
    for col, what in ((0, "time"), (1, "CPU s/GB")):
        gap_shares(got, sizes, where, col, what)
    print(f"\n## {where}: CPU check of the counted copies (largest size, median CPU s/GB)")
    big = sizes[-1]
    cpu = {t: statistics.median(r[1] for r in got[t][big]) for t in RUNGS}
    copies = {t: statistics.median(r[2] for r in got[t][big]) for t in RUNGS}
    per_copy = (cpu["staged"] - cpu["zerocopy"]) / (copies["staged"] - copies["zerocopy"])
    print(f"one copy of a byte sent costs {per_copy:.3g} CPU s/GB (from L1 - L0)")
    for t in RUNGS:
        want = cpu["zerocopy"] + copies[t] * per_copy
        print(f"{t:>13}: {copies[t]:.2f} copies/B predict {want:.3g} CPU s/GB, measured "
              f"{cpu[t]:.3g} (uncounted: {cpu[t] - want:+.3g})")


def save(path: Path | None, got: dict) -> None:
    if path is not None:
        path.write_text(json.dumps({t: {str(s): v for s, v in by.items()}
                                    for t, by in got.items()}))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4KiB:64MiB")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--mbit-s", type=float, default=0.0,
                   help="emulate 2 hosts on a kernel-bridge switch at this rate (root)")
    p.add_argument("--json", type=Path, help="also write every round's figures here")
    args = p.parse_args(argv)
    sizes = parse_size_range(args.sizes)[::2]  # every 4x
    with tempfile.TemporaryDirectory(prefix="fabriclab-ladder-") as tmp:
        if not args.mbit_s:
            from workloads.launcher import run_local

            def run(t: str, s: list[int], out: Path) -> None:
                run_local(ranks=2, sizes=s, transport=t, iterations=args.iters, warmup=1,
                          timeout=120.0, out_dir=out)

            got = ladder(run, sizes, args.rounds, Path(tmp))
            save(args.json, got)
            report(got, sizes, "loopback, 2 ranks")
            return 0
        from testbed.emulator.fabric import Fabric
        from testbed.emulator.workers import run_on_fabric

        plan = one_switch_plan(2, args.mbit_s, "multidim")
        with Fabric(plan, Path(tmp) / "fabric", switches="kernel") as fab:
            def run(t: str, s: list[int], out: Path) -> None:
                run_on_fabric(fab, ["h0", "h1"], out_dir=out, algorithm="ring", sizes=s,
                              transport=t, iterations=args.iters, warmup=1, timeout=120.0)

            got = ladder(run, sizes, args.rounds, Path(tmp))
        save(args.json, got)
        report(got, sizes, f"2 hosts, kernel-bridge switch, {args.mbit_s:g} Mbit/s links")
    return 0


if __name__ == "__main__":
    sys.exit(main())
