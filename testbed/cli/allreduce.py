"""``fabriclab allreduce``: run a local All-Reduce job and print nccl-tests style rows."""

from __future__ import annotations

import argparse
import json

from testbed.core.algorithms import algorithm_names, is_flat
from testbed.core.errors import FabricLabError
from testbed.core.registry import COLLECTIVES, TRANSPORTS
from testbed.core.units import format_size, parse_size_range
from workloads.launcher import run_local


def parse_dims(text: str) -> list[int]:
    """'2x4' -> [2, 4]."""
    try:
        dims = [int(x) for x in text.lower().split("x")]
    except ValueError:
        dims = []
    if not dims or any(n < 1 for n in dims):
        raise FabricLabError(f"dims {text!r} are not dimension sizes; write e.g. 2x4")
    return dims


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "allreduce",
        description="Run a real chunked All-Reduce across local worker processes on loopback "
        "and print nccl-tests style results.",
    )
    p.add_argument("--ranks", type=int, default=8, help="number of worker processes")
    p.add_argument("--size", default="1KiB:1MiB", help="size or doubling range, e.g. 1KiB:256MiB")
    p.add_argument("--algo", choices=algorithm_names(), default="ring",
                   help="a collective over all ranks, or a chunk schedule over --dims "
                   "(default ring)")
    p.add_argument("--dim-algo", choices=COLLECTIVES.names(), default="ring",
                   help="the collective each dimension of a chunk schedule runs (default ring)")
    p.add_argument("--dims", help="dimension sizes, e.g. 2x4 (default: one group of all "
                   "ranks for a collective, a 2-D split for a chunk schedule)")
    p.add_argument("--chunks", type=int, default=8, help="chunks per collective (hierarchical)")
    p.add_argument("--order", choices=["fifo", "scf"], default="fifo",
                   help="order of chunk phases within a dimension")
    p.add_argument("--max-active", type=int, default=1,
                   help="chunk phases a dimension runs at once")
    p.add_argument("--transport", choices=TRANSPORTS.names(), default="zerocopy")
    p.add_argument("--iters", type=int, default=5, help="measured iterations per size")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured iterations per size")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds any single wait (rendezvous, transfer) may take")
    p.add_argument("--out", help="directory to keep the configs, traces and logs in "
                   "(default: a temporary directory, removed at the end)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    dims = parse_dims(args.dims) if args.dims else None
    if args.ranks < 1:
        raise FabricLabError("--ranks must be at least 1")
    for flag, value, low in (("--chunks", args.chunks, 1), ("--iters", args.iters, 1),
                             ("--warmup", args.warmup, 0), ("--max-active", args.max_active, 1)):
        if value < low:
            raise FabricLabError(f"{flag} is {value}; it must be at least {low}")
    if not args.timeout > 0:
        raise FabricLabError(f"--timeout is {args.timeout}; it must be more than 0 seconds")
    sizes = parse_size_range(args.size)
    if sizes[0] < 4:
        raise FabricLabError(f"size {args.size!r} is below one float32 (4 bytes)")
    result = run_local(
        ranks=args.ranks, sizes=sizes, algorithm=args.algo, dim_algorithm=args.dim_algo,
        dims=dims, chunks=args.chunks,
        transport=args.transport, iterations=args.iters, warmup=args.warmup,
        order=args.order, max_active=args.max_active, timeout=args.timeout,
        collective_timeout=max(600.0, 10 * args.timeout), out_dir=args.out,
    )
    if args.json:
        print(json.dumps(result.as_dicts()))
        return 0 if all(r.correct for r in result.rows) else 1
    kept = (f"traces in {result.out_dir}" if result.out_dir is not None
            else "traces not kept (pass --out DIR to keep them)")
    algo = args.algo if is_flat(args.algo) else f"{args.algo}/{args.dim_algo}"
    print(f"# fabriclab allreduce: {args.ranks} ranks, algo {algo}, "
          f"transport {args.transport}, {kept}")
    print(f"#{'size':>11} {'count':>12} {'time(us)':>12} {'algbw(GB/s)':>12} "
          f"{'busbw(GB/s)':>12} {'correct':>8}")
    for r in result.rows:
        print(f"{format_size(r.size):>12} {r.count:>12} {r.time_us:>12.1f} {r.algbw:>12.3f} "
              f"{r.busbw:>12.3f} {'yes' if r.correct else 'NO':>8}")
    return 0 if all(r.correct for r in result.rows) else 1
