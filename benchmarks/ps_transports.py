"""Parameter servers per transport; BENCHMARKS.md "The parameter-server pattern over the ladder".

The parameter-server pattern over three transports on an emulated path: one iteration's
gradients exchanged as TensorFlow does (``ps``: one tensor per variable, the model's layers,
pushed to round-robin servers and pulled back), zerocopy against rpc-lite (L3) and rpc-proto
(L5), on hosts of one kernel-bridge switch (root).

    sudo flock /tmp/fabriclab-roottests.lock .venv/bin/python benchmarks/ps_transports.py \\
        [--hosts 4] [--servers 2] [--mbit-s 1000] [--size 16MiB] [--runs 3]

The gradients are ``--size`` bytes split in proportion to each model's layers (ResNet-50: 54
variables; the Transformer, BERT-large: its layers), i.e. the model scaled down to that size
with its variables' proportions kept. Every run takes its median iteration (5 after 1 warm-up;
the slowest rank's time); prints the median [min, max] over ``--runs`` runs (transports
alternated, order rotated), the workers' CPU s per GB sent, and each transport's time over
zerocopy's within a run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from analysis.transport_costs import size_costs
from testbed.core.topology import one_switch_plan
from testbed.core.units import format_size, format_spread, parse_size

TRANSPORTS = ["zerocopy", "rpc-lite", "rpc-proto"]
MODELS = ["resnet50", "transformer"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--mbit-s", type=float, default=1000.0)
    p.add_argument("--size", type=parse_size, default="16MiB")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    from testbed.emulator.fabric import Fabric
    from testbed.emulator.workers import run_on_fabric

    plan = one_switch_plan(args.hosts, args.mbit_s, "multidim")
    hosts = [f"h{i}" for i in range(args.hosts)]
    got: dict[tuple[str, str], list] = {}
    with tempfile.TemporaryDirectory() as tmp, \
            Fabric(plan, Path(tmp) / "f", switches="kernel") as fab:
        for r in range(args.runs):
            for model in MODELS:
                order = TRANSPORTS[r % 3:] + TRANSPORTS[: r % 3]
                for t in order:
                    out = Path(tmp) / f"{model}-{t}-{r}"
                    run_on_fabric(fab, hosts, out_dir=out, algorithm="ps", transport=t,
                                  options={"ps": {"servers": args.servers, "model": model}},
                                  sizes=[args.size], iterations=5, warmup=1, timeout=120.0)
                    got.setdefault((model, t), []).append(size_costs(out)[args.size])
                print(f"# run {r + 1}/{args.runs}: {model} done", file=sys.stderr, flush=True)
    print(f"## ps, {args.hosts} hosts ({args.servers} servers among them), one kernel-bridge "
          f"switch at {args.mbit_s:g} Mbit/s, {format_size(args.size)} of gradients a "
          f"rank; median [min, max] of {args.runs} runs")
    print(f"{'model':>12} {'transport':>10} {'iteration ms':>24} {'CPU s/GB':>22} "
          f"{'÷ zerocopy':>20}")
    for model in MODELS:
        zc = got[(model, "zerocopy")]
        for t in TRANSPORTS:
            rows = got[(model, t)]
            ratio = [a[0] / b[0] for a, b in zip(rows, zc, strict=True)]
            print(f"{model:>12} {t:>10} {format_spread([x[0] * 1e3 for x in rows]):>24} "
                  f"{format_spread([x[1] for x in rows]):>22} {format_spread(ratio, '.2f'):>20}")
    print("(wire time of the busiest server link, push + pull, at the link rate: "
          f"{2 * (args.hosts - 1) * args.size / args.servers * 8 / (args.mbit_s * 1e6) * 1e3:.0f}"
          " ms with equal shares; the models' round-robin shares are unequal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
