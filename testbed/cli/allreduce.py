"""``fabriclab allreduce``: run a local All-Reduce job and print its results as nccl-tests'
all_reduce_perf does (:mod:`testbed.cli.nccl_table`), or as JSON, and optionally as CSV.

Sizes come from ``--size`` (fabriclab's units, a doubling range) or from nccl-tests' flags
``-b``/``-e``/``-f`` (1024-based K/M/G, any whole factor of 2 or more); giving both is refused.
The job's knobs (``--algo``, ``--dim-algo``, ``--chunks``, ``--order``, ``--transport``) are a
spec job's :class:`~testbed.core.experiment.CollectiveOptions`, with its defaults.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.cli.nccl_table import COLUMNS, avg_busbw, out_of_bounds, record, table_lines
from testbed.cli.progress import progress
from testbed.core.algorithms import algorithm_names, default_dims, is_flat
from testbed.core.atomic import check_writable, write_csv
from testbed.core.errors import FabricLabError
from testbed.core.experiment import CollectiveOptions
from testbed.core.out_dir import FORCE_HELP, check_out_dir, clear_out_dir
from testbed.core.registry import COLLECTIVES, TRANSPORTS
from testbed.core.spec import validate
from testbed.core.units import format_size, nccl_size_range, parse_size_range

if TYPE_CHECKING:
    from workloads.launcher import SizeResult

DEFAULT_SIZE = "1KiB:1MiB"
# flag -> the CollectiveOptions knob it sets (its default is the spec's)
KNOBS = {"algo": "algorithm", "dim_algo": "dim_algorithm", "chunks": "chunks",
         "order": "order", "transport": "transport"}


def _default(knob: str) -> Any:
    return CollectiveOptions.model_fields[knob].default


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
        "and print the results as nccl-tests' all_reduce_perf does (out of place, then in "
        "place; GB/s = 1e9 bytes/s).",
    )
    p.add_argument("--ranks", type=int, default=8, help="number of worker processes")
    p.add_argument("--size", help=f"size or doubling range, e.g. 1KiB:256MiB (default "
                   f"{DEFAULT_SIZE}); not together with -b/-e/-f")
    p.add_argument("-b", "--minbytes", help="smallest size, nccl-tests style: bytes or a "
                   "1024-based K, M or G suffix (default 1K)")
    p.add_argument("-e", "--maxbytes", help="largest size, as -b (default 1M)")
    p.add_argument("-f", "--stepfactor", help="each size is the previous one times this "
                   "(default 2)")
    p.add_argument("--algo", choices=algorithm_names(), default=_default("algorithm"),
                   help="a collective over all ranks, or a chunk schedule over --dims "
                   "(default %(default)s)")
    p.add_argument("--dim-algo", choices=COLLECTIVES.names(), default=_default("dim_algorithm"),
                   help="the collective each dimension of a chunk schedule runs "
                   "(default %(default)s)")
    p.add_argument("--dims", help="dimension sizes, e.g. 2x4 (default: one group of all "
                   "ranks for a collective, a 2-D split for a chunk schedule)")
    p.add_argument("--chunks", type=int, default=_default("chunks"),
                   help="chunks per collective (hierarchical; default %(default)s)")
    p.add_argument("--order", choices=["fifo", "scf"], default=_default("order"),
                   help="order of chunk phases within a dimension (default %(default)s)")
    p.add_argument("--max-active", type=int, default=1,
                   help="chunk phases a dimension runs at once")
    p.add_argument("--transport", choices=TRANSPORTS.names(), default=_default("transport"),
                   help="how ranks move data (default %(default)s)")
    p.add_argument("-n", "--iters", type=int, default=5,
                   help="measured iterations per size and placement")
    p.add_argument("-w", "--warmup", "--warmup_iters", type=int, default=1,
                   help="unmeasured iterations per size and placement")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds any single wait (rendezvous, transfer) may take")
    p.add_argument("--out", help="directory to keep the configs, traces and logs in: new or "
                   "empty, an existing non-empty one is refused unless --force (default: a "
                   "temporary directory, removed at the end)")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON document (the "
                   "parameters, the rows and the trace directory) instead of the table")
    p.add_argument("--csv", metavar="FILE", help="also write the rows to FILE as CSV")
    p.set_defaults(func=run)


def sizes_of(args: argparse.Namespace) -> list[int]:
    """The sizes in bytes, from --size or from -b/-e/-f, rounded down to whole float32s."""
    steps = (args.minbytes, args.maxbytes, args.stepfactor)
    if args.size is not None and any(v is not None for v in steps):
        raise FabricLabError("give the sizes either as --size or as -b/-e/-f, not both")
    if any(v is not None for v in steps):
        sizes = nccl_size_range(args.minbytes or "1K", args.maxbytes or "1M",
                                args.stepfactor or "2")
        flag = "-b/--minbytes"
    else:
        sizes = parse_size_range(args.size or DEFAULT_SIZE)
        flag = "--size"
    if sizes[0] < 4:
        raise FabricLabError(f"{flag} gives {sizes[0]} bytes, below one float32 (4 bytes)")
    return [s - s % 4 for s in sizes]


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
    sizes = sizes_of(args)
    if args.csv is not None:
        if not args.csv:
            raise FabricLabError("--csv is empty; give the file to write the rows to")
        check_writable(Path(args.csv))
    if args.out is not None:
        check_out_dir(args.out, args.force)
    knobs = validate(CollectiveOptions, {knob: getattr(args, flag)
                                         for flag, knob in KNOBS.items()}, "allreduce")
    from workloads.launcher import run_local  # numpy, pyarrow: not for --help

    if args.out:
        clear_out_dir(args.out)  # --force: no trace of an earlier run is read as this one's
    # every size runs out of place, then in place, warm-up iterations included
    total = len(sizes) * 2 * (args.warmup + args.iters)
    with progress("allreduce", total, "collectives, at {size}", size="-") as update:
        result = run_local(
            ranks=args.ranks, sizes=sizes, dims=dims, iterations=args.iters,
            warmup=args.warmup, max_active=args.max_active, timeout=args.timeout,
            collective_timeout=max(600.0, 10 * args.timeout),
            out_dir=args.out and Path(args.out).absolute(),  # workers run from the checkout
            out_of_place=True, on_progress=lambda done, size: update(
                done, size=format_size(size)), **knobs.model_dump(),
        )
    records = [record(r) for r in result.rows]
    if args.csv:
        write_csv(Path(args.csv), records, COLUMNS)
    dims = dims or default_dims(args.ranks, args.algo)
    if args.json:
        print(json.dumps(document(args, dims, sizes, result.rows, result.out_dir), indent=2))
    else:
        print("\n".join(title_lines(args, dims, sizes, result.out_dir)
                        + table_lines(result.rows)))
    return 1 if out_of_bounds(result.rows) else 0


def title_lines(args: argparse.Namespace, dims: list[int], sizes: list[int],
                out_dir: Path | None) -> list[str]:
    """The header lines above the column headers."""
    kept = (f"traces in {out_dir}" if out_dir is not None
            else "traces not kept (pass --out DIR to keep them)")
    algo = args.algo if is_flat(args.algo) else f"{args.algo}/{args.dim_algo}"
    factor = int(args.stepfactor) if args.stepfactor else 2
    return [
        f"# fabriclab allreduce: {args.ranks} ranks, algo {algo}, dims "
        f"{'x'.join(map(str, dims))}, transport {args.transport}, {kept}",
        f"# nRanks {args.ranks} minBytes {sizes[0]} maxBytes {sizes[-1]} step: "
        f"{factor}(factor) warmup iters: {args.warmup} iters: {args.iters} validation: 1",
        "# Columns as nccl-tests' all_reduce_perf; GB/s = 1e9 bytes/s; #wrong = measured "
        "results (rank x iteration) not the exact sum.",
        "# Out of place: the input is copied to a second buffer and reduced there in place; "
        "the copy is timed.",
        "#",
    ]


def document(args: argparse.Namespace, dims: list[int], sizes: list[int],
             rows: list[SizeResult], out_dir: Path | None) -> dict[str, Any]:
    """The --json document: the run's parameters, its rows, the footer's two numbers and
    where the traces are (None when they were not kept)."""
    params = {"ranks": args.ranks, "algo": args.algo, "dim_algo": args.dim_algo, "dims": dims,
              "chunks": args.chunks, "order": args.order, "max_active": args.max_active,
              "transport": args.transport, "iters": args.iters, "warmup": args.warmup,
              "timeout_s": args.timeout, "sizes_bytes": sizes, "type": "float",
              "redop": "sum"}
    return {"params": params, "rows": [record(r) for r in rows],
            "out_of_bounds": out_of_bounds(rows), "avg_busbw_gbyte_s": avg_busbw(rows),
            "trace_dir": None if out_dir is None else str(out_dir)}
