"""Training iterations per transport; BENCHMARKS.md "Whole training iterations per transport".

Whole training iterations per transport: data-parallel ResNet-50 and a Transformer
(BERT-large) replayed on an emulated 1 Gbit/s switch, their gradients sent per variable,
unbucketed, to parameter servers as TensorFlow sends them (root).

    sudo flock /tmp/fabriclab-roottests.lock .venv/bin/python benchmarks/dnn_transports.py \\
        [--hosts 4] [--servers 2] [--mbit-s 1000] [--scale 0.05] [--iterations 5] [--runs 3]

Every host is a worker and the first ``--servers`` are also parameter servers (the ``ps``
collective, ``bucket_cap_mb: 0``: one collective per layer, each layer pushed whole to the
server of its index and pulled back). As in every DNN replay, one collective runs at a time
(the communication thread is FIFO, as DDP's buckets), so one layer's server is busy at a time:
TensorFlow keeps many variables' RPCs in flight at once, so its servers share the load. The
models' gradients and compute are both shrunk by
``--scale`` (the iteration of the full model at this link rate, in ``scale`` of the time; the
per-call costs do not shrink, so they weigh more than at full size). Each run alternates the
transports (order rotated), each a job of 1 warm-up and ``--iterations`` iterations on one
kernel-bridge switch, sampled for the link invariant as ``fabriclab run`` judges it. A run's
iteration time is its median iteration's (an iteration takes its slowest rank's time).
Prints, per model and transport, the median [min, max] over ``--runs`` of the iteration time
and throughput (samples/s of the whole job, 32 samples a worker, the profiles' batch), each
over zerocopy's measured in the same run, and how many runs were faithful.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from testbed.core.topology import one_switch_plan
from testbed.core.traces import read_table
from testbed.core.units import format_spread

TRANSPORTS = ["zerocopy", "rpc-lite", "rpc-proto"]
MODELS = ["resnet50", "transformer"]
BATCH = 32  # samples per worker and iteration (workloads.dnn's compute figures)


def iteration_s(out: Path) -> float:
    """The run's median measured iteration, each taking its slowest rank's time."""
    its = read_table(out, "iterations").to_pandas()
    its = its[~its["warmup"]]
    if not its["correct"].all():
        raise SystemExit(f"{out}: a gradient came back wrong")
    return float(its.groupby("iteration")["time"].max().median())


def run_once(fab, hosts: list[str], out: Path, model: str, transport: str,
             args: argparse.Namespace) -> tuple[float, list[str]]:
    """One job: (its iteration seconds, the reasons it was not faithful)."""
    from testbed.emulator.fidelity import fidelity_record
    from testbed.emulator.sampler import LinkSampler
    from testbed.emulator.workers import run_on_fabric

    dnn = {"model": model, "scale": args.scale, "compute_scale": args.scale,
           "bucket_cap_mb": 0, "iterations": args.iterations, "warmup": 1}
    with LinkSampler(fab.plan, fab.namespace_pids()) as sampler:
        run_on_fabric(fab, hosts, out_dir=out, algorithm="ps", transport=transport,
                      options={"ps": {"servers": args.servers}}, dnn=dnn, timeout=300.0)
    record = fidelity_record(sampler.counters(), sampler.queues(), None)
    return iteration_s(out), record["reasons"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--mbit-s", type=float, default=1000.0)
    p.add_argument("--scale", type=float, default=0.05)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    from testbed.emulator.fabric import Fabric

    hosts = [f"h{i}" for i in range(args.hosts)]
    got: dict[tuple[str, str], list[tuple[float, list[str]]]] = {}
    with tempfile.TemporaryDirectory(prefix="fabriclab-dnn-transports-") as tmp, \
            Fabric(one_switch_plan(args.hosts, args.mbit_s, "multidim"), Path(tmp) / "f",
                   switches="kernel") as fab:
        for r in range(args.runs):
            for model in MODELS:
                for t in TRANSPORTS[r % 3:] + TRANSPORTS[: r % 3]:
                    got.setdefault((model, t), []).append(
                        run_once(fab, hosts, Path(tmp) / f"{model}-{t}-{r}", model, t, args))
                print(f"# run {r + 1}/{args.runs}: {model} done", file=sys.stderr, flush=True)
    print(f"## whole iterations, ps unbucketed (one message per layer), {args.hosts} hosts "
          f"({args.servers} servers among them), one kernel-bridge switch at "
          f"{args.mbit_s:g} Mbit/s, gradients and compute x{args.scale:g}; median [min, max] "
          f"of {args.runs} runs")
    print(f"{'model':>12} {'transport':>10} {'iteration ms':>24} {'samples/s':>24} "
          f"{'time ÷ zerocopy':>20} {'faithful':>8}")
    for model in MODELS:
        zc = [s for s, _ in got[(model, "zerocopy")]]
        for t in TRANSPORTS:
            rows = got[(model, t)]
            secs = [s for s, _ in rows]
            faithful = sum(not reasons for _, reasons in rows)
            print(f"{model:>12} {t:>10} {format_spread([s * 1e3 for s in secs], '.0f'):>24} "
                  f"{format_spread([args.hosts * BATCH / s for s in secs]):>24} "
                  f"{format_spread([s / z for s, z in zip(secs, zc, strict=True)], '.2f'):>20} "
                  f"{faithful:>4}/{len(rows):<3}")
            for reasons in {r for _, rs in rows for r in rs[:1]}:
                print(f"{'':>24} not faithful: {reasons}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
