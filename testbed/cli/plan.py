"""`fabriclab plan` and `fabriclab model`: the Themis chunk planner and its predictive model.

Both take the network as ``--dims 4x4x4`` (hosts per group in each dimension) and
``--bw 200,100,50`` (Gbit/s per host in each dimension), or as ``--preset NAME`` (one of the
Themis paper's systems, :mod:`testbed.core.presets`: its shape, rates, dimension kinds, the
collective of each dimension and 64 chunks), and the collective as
``--size 256MiB --chunks 64``.
"""

from __future__ import annotations

import argparse
import json
import math

from rich.table import Table

from testbed.cli.progress import progress
from testbed.cli.terminal import out_console
from testbed.core.errors import FabricLabError
from testbed.core.limits import MAX_MODEL_SIZE_BYTES
from testbed.core.presets import DIM_ALGORITHM_OF_KIND, PRESETS
from testbed.core.registry import SCHEDULES
from testbed.core.units import format_size, parse_size
from workloads.model import (
    DEFAULT_SEMANTICS,
    ORDERS,
    SEMANTICS,
    Prediction,
    best_chunks_on_fabric,
    dim_collectives,
    dim_shares,
    predict_on_fabric,
)
from workloads.themis import bytes_sent_per_dim, plan

_SEMANTICS_HELP = (
    "astra-sim-1.0: reproduce ASTRA-sim 1.0's analytical backend (its FIFO/SCF queues, "
    "balanced chunks with a separate RS and AG on their last dimension); fabriclab: this "
    "project's earlier model (see docs/themis-semantics.md) (default astra-sim-1.0)"
)
_BW_HELP = (
    "bandwidth per host in each dimension, in Gbit/s, comma-separated in --dims order "
    "(e.g. 200,100,50; fractions allowed: 0.04 is 40 Mbit/s)"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plan",
        description="Split an All-Reduce into chunks and show each chunk's Reduce-Scatter "
        "dimension order (All-Gather is the reverse) and the traffic each dimension carries.",
    )
    _add_common(p)
    p.add_argument("--policy", choices=SCHEDULES.names(), default="themis",
                   help="themis: greedy per-chunk order; baseline: 0,1,...,D-1 (default themis)")
    p.add_argument("--align", type=int, default=1,
                   help="chunk sizes are multiples of this many bytes (default 1; 4 for float32)")
    p.add_argument("--semantics", choices=SEMANTICS, default=DEFAULT_SEMANTICS,
                   help=_SEMANTICS_HELP)
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=run_plan)

    m = subparsers.add_parser(
        "model",
        description="Event-driven α-β model of the chunked All-Reduce (α: the links' delay "
        "per step, β: their rates; loss caps a rate at the Mathis et al. TCP bound). Without "
        "--policy, baseline and themis are shown side by side with the speedup.",
    )
    _add_common(m)
    m.add_argument("--policy", choices=SCHEDULES.names(), default=None,
                   help="model one policy only (default: both, with the speedup)")
    m.add_argument("--order", choices=ORDERS, default="fifo",
                   help="which waiting chunk phase a dimension serves first: fifo (by readiness)"
                   " or scf (smallest first) (default fifo)")
    m.add_argument("--semantics", choices=SEMANTICS, default=DEFAULT_SEMANTICS,
                   help=_SEMANTICS_HELP)
    m.add_argument("--max-active", type=int, default=1,
                   help="chunk phases a dimension serves at once, each at full bandwidth "
                   "(ASTRA-sim's active-chunks-per-dimension; default 1)")
    m.add_argument("--dim-kinds", default=None, metavar="KIND[,KIND...]",
                   help="each dimension's kind, in --dims order: switch, ring or "
                   "fully_connected (default: switch, or the preset's)")
    m.add_argument("--dim-algorithm", default=None, metavar="NAME[,NAME...]",
                   help="the collective each dimension runs (one for all, or one per "
                   "dimension; default: ring, or with --preset each dimension kind's own)")
    m.add_argument("--delay-us", default=None, metavar="US[,US...]",
                   help="one-way delay of each link of each dimension in µs, in --dims order "
                   "(one value for all); a hop crosses two links of a switch dimension, one of "
                   "the others, and every step pays its hop's (default 0)")
    m.add_argument("--loss", default=None, metavar="P[,P...]",
                   help="fraction of packets each link of each dimension loses, in [0, 1); "
                   "caps the dimension at the Mathis et al. TCP rate (default 0)")
    m.add_argument("--best-chunks", action="store_true",
                   help="also find the chunk count (a power of two up to 256) the model "
                   "predicts fastest for each policy: link delays move it down")
    m.add_argument("--json", action="store_true",
                   help="print JSON (including the per-phase schedule) instead of tables")
    m.add_argument("--sim", action="store_true",
                   help="run the flow-level simulator (testbed.sim) instead of the model, on a "
                   "contention-free fabric of these dimensions: minutes for a full-size "
                   "preset (1024 hosts)")
    m.set_defaults(func=run_model)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", choices=list(PRESETS),
                   help="one of the Themis paper's six systems (its shape, GB/s per NPU, "
                   "dimension kinds and collectives, 64 chunks) instead of --dims/--bw")
    p.add_argument("--dims",
                   help="hosts per group in each dimension, separated by x (e.g. 4x4x4); "
                   "with --preset, a shape of as many dimensions (a scaled-down system)")
    p.add_argument("--bw", help=_BW_HELP)
    p.add_argument("--size", required=True,
                   help="bytes to all-reduce (e.g. 256MiB, 1GiB, 4096)")
    p.add_argument("--chunks", type=int,
                   help="number of chunks (e.g. 64; a preset's default is 64)")


def _network(args: argparse.Namespace) -> dict:
    """The dimension kinds and collectives of ``--preset`` (empty: switch dimensions and the
    model's default collective); with a preset ``--dims``, ``--bw`` and ``--chunks`` are
    filled in from it unless given."""
    if args.preset is None:
        missing = [f"--{k}" for k in ("dims", "bw", "chunks") if getattr(args, k) is None]
        if missing:
            raise FabricLabError(f"give {', '.join(missing)} (or --preset NAME, one of "
                                 f"{', '.join(PRESETS)})")
        return {}
    preset = PRESETS[args.preset]
    if args.dims is None:
        args.dims = preset.shape
    if args.bw is None:
        args.bw = ",".join(repr(b / 1e9) for b in preset.bandwidths_bps)  # exact: ties hold
    if args.chunks is None:
        args.chunks = preset.chunks
    if len(parse_dims(args.dims)) != len(preset.sizes):
        raise FabricLabError(f"--dims {args.dims} does not have the {len(preset.sizes)} "
                             f"dimensions of preset {preset.name} ({preset.shape}); leave "
                             "--dims out or give as many")
    return {"dim_algorithm": list(preset.dim_algorithms), "dim_kinds": list(preset.kinds)}


def parse_dims(text: str) -> tuple[int, ...]:
    """'4x4x4' -> (4, 4, 4)."""
    parts = text.lower().split("x")
    if not all(part.strip().isdigit() and int(part) >= 1 for part in parts):
        raise FabricLabError(
            f"--dims {text!r} must be host counts of at least 1 separated by x, e.g. 4x4x4"
        )
    return tuple(int(part) for part in parts)


def parse_bw(text: str, dims: tuple[int, ...]) -> tuple[float, ...]:
    """'200,100,50' (Gbit/s) -> bit/s per dimension, checked against --dims."""
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise FabricLabError(
                f"--bw {text!r} must be positive Gbit/s values separated by commas, e.g. 200,100,50"
            )
        values.append(value * 1e9)
    if len(values) != len(dims):
        raise FabricLabError(
            f"--bw has {len(values)} values but --dims has {len(dims)} dimensions"
        )
    return tuple(values)


def _parse_common(args: argparse.Namespace) -> tuple[tuple[int, ...], tuple[float, ...], int]:
    # the size first, so a bad one is named before any missing flag; no buffer is
    # allocated here, so the bound is the model's, not a rank's
    try:
        size = parse_size(args.size, MAX_MODEL_SIZE_BYTES)
    except FabricLabError as exc:
        raise FabricLabError(f"--{exc}") from None  # "--size '12XB' is not a size ..."
    args.network = _network(args)
    dims = parse_dims(args.dims)
    if math.prod(dims) < 2:
        raise FabricLabError(f"--dims {args.dims} is a single host: there is nothing to "
                             "all-reduce; give at least two hosts, e.g. 4x4")
    bw = parse_bw(args.bw, dims)
    if size < 1:
        raise FabricLabError(f"--size {args.size!r} must be at least 1 byte")
    if args.chunks < 1:
        raise FabricLabError(f"--chunks is {args.chunks} but must be at least 1")
    if args.chunks > size:
        raise FabricLabError(f"--chunks is {args.chunks} but --size has only {size} bytes")
    return dims, bw, size


def _gbit_s(bps: float) -> str:
    return f"{bps / 1e9:g}"


def _order(order: tuple[int, ...]) -> str:
    return "→".join(str(d) for d in order) or "-"


def run_plan(args: argparse.Namespace) -> int:
    dims, bw, size = _parse_common(args)
    if args.align < 1:
        raise FabricLabError(f"--align is {args.align} but must be at least 1")
    plans = plan(dims, _usable(bw, dims, args.network), size, args.chunks,
                 policy=args.policy, align=args.align, semantics=args.semantics)
    sent = bytes_sent_per_dim(plans, dims)
    load_s = [s / (b / 8) for s, b in zip(sent, bw, strict=True)]
    if args.json:
        print(json.dumps({
            "dims": list(dims),
            "bw_gbit_s": [b / 1e9 for b in bw],
            "total_bytes": size,
            "policy": args.policy,
            "semantics": args.semantics,
            "chunks": [
                {"index": p.index, "size_bytes": p.size, "rs_order": list(p.rs_order),
                 "ag_order": list(p.ag_order)}
                for p in plans
            ],
            "dimensions": [
                {"dim": d, "hosts": n, "bw_gbit_s": bw[d] / 1e9, "sent_per_host_bytes": sent[d],
                 "busy_s": load_s[d]}
                for d, n in enumerate(dims)
            ],
        }, indent=2))
        return 0

    console = out_console()
    if args.preset:
        console.print(f"preset {args.preset}: {_kinds_line(args.network)}")
    rates = ",".join(_gbit_s(b) for b in bw)
    console.print(f"{args.policy} plan: {format_size(size, exact=True)} in {len(plans)} "
                  f"chunks over {'x'.join(map(str, dims))} at {rates} Gbit/s")
    table = Table()
    table.add_column("chunk", justify="right")
    table.add_column("size", justify="right")
    table.add_column("RS order")
    table.add_column("AG order")
    for p in plans:
        table.add_row(str(p.index), format_size(p.size), _order(p.rs_order),
                      _order(p.ag_order))
    console.print(table)

    console.print("per-dimension load: bytes each host sends (RS+AR+AG), time at that rate, "
                  "and how many chunks start there")
    loads = Table()
    loads.add_column("dim", justify="right")
    loads.add_column("hosts", justify="right")
    loads.add_column("Gbit/s", justify="right")
    loads.add_column("sent/host", justify="right")
    loads.add_column("busy", justify="right")
    loads.add_column("chunks first", justify="right")
    for d, n in enumerate(dims):
        first = sum(1 for p in plans if p.rs_order and p.rs_order[0] == d)
        loads.add_row(str(d), str(n), _gbit_s(bw[d]), format_size(sent[d]),
                      _fmt_time(load_s[d]), str(first))
    console.print(loads)
    return 0


def _usable(bw: tuple[float, ...], dims: tuple[int, ...], network: dict) -> list[float]:
    """Each dimension's bandwidth as its collective can use it (a mesh: its links at once)."""
    if not network:
        return list(bw)
    collectives = dim_collectives(network["dim_algorithm"], len(dims))
    return [b * float(s) for b, s in zip(bw, dim_shares(network["dim_kinds"], dims,
                                                         collectives), strict=True)]


def _kinds_line(network: dict) -> str:
    return ", ".join(f"dim {d} {k} ({a})" for d, (k, a) in enumerate(
        zip(network["dim_kinds"], network["dim_algorithm"], strict=True)))


def _prediction_json(p: Prediction, with_schedule: bool = True) -> dict:
    out = {
        "policy": p.policy,
        "order": p.order,
        "semantics": p.semantics,
        "max_active": p.max_active,
        "time_s": p.time_s,
        "ideal_time_s": p.ideal_time_s,
        "utilisation": p.utilisation,
        "dimensions": [
            {"dim": d.index, "hosts": d.size, "bw_gbit_s": d.bandwidth_bps / 1e9,
             "sent_per_host_bytes": d.sent_bytes, "busy_s": d.busy_s,
             "utilisation": d.utilisation}
            for d in p.dims
        ],
        "rs_orders": [list(c.rs_order) for c in p.plans],
    }
    if with_schedule:
        out["schedule"] = [
            {"chunk": r.chunk, "dim": r.dim, "op": r.op, "input_bytes": r.bytes,
             "sent_bytes": r.sent, "start_s": r.start, "end_s": r.end}
            for r in p.schedule
        ]
    return out


def run_model(args: argparse.Namespace) -> int:
    dims, bw, size = _parse_common(args)
    policies = [args.policy] if args.policy else ["baseline", "themis"]
    if args.max_active < 1:
        raise FabricLabError(f"--max-active is {args.max_active} but must be at least 1")
    if args.sim:
        return _run_sim(args, dims, bw, size, policies)
    kinds = _dim_kinds(args, len(dims))
    delays = _per_dim_values(args.delay_us, "--delay-us", len(dims), top=None)
    losses = _per_dim_values(args.loss, "--loss", len(dims), top=1.0)
    fabric = [{"size": n, "mbit_s": b / 1e6, "kind": k, "delay_us": d, "loss": p}
              for n, b, k, d, p in zip(dims, bw, kinds, delays, losses, strict=True)]
    algorithm = args.network.get("dim_algorithm") or (None if args.dim_kinds else "ring")
    if args.dim_algorithm:
        names = args.dim_algorithm.split(",")
        algorithm = names * len(dims) if len(names) == 1 else names
        if args.network:
            args.network = {**args.network, "dim_algorithm": algorithm}
    results = [predict_on_fabric(fabric, size, args.chunks, policy=pol, order=args.order,
                                 dim_algorithm=algorithm, semantics=args.semantics,
                                 max_active=args.max_active)
               for pol in policies]
    speedup = results[0].time_s / results[1].time_s if len(results) == 2 else None
    best = ({pol: best_chunks_on_fabric(fabric, size, policy=pol, order=args.order,
                                        dim_algorithm=algorithm, semantics=args.semantics,
                                        max_active=args.max_active)
             for pol in policies} if args.best_chunks else {})
    if args.json:
        doc = {
            "dims": list(dims),
            "bw_gbit_s": [b / 1e9 for b in bw],
            "total_bytes": size,
            "chunks": args.chunks,
            "order": args.order,
            "semantics": args.semantics,
            "predictions": [_prediction_json(r) for r in results],
        }
        if speedup is not None:
            doc["speedup"] = speedup
        if any(delays) or any(losses):
            doc["delay_us"], doc["loss"] = delays, losses
        if best:
            doc["best_chunks"] = {pol: {"chunks": c, "time_s": t} for pol, (c, t) in
                                  best.items()}
        print(json.dumps(doc, indent=2))
        return 0

    console = out_console()
    shape = "x".join(map(str, dims))
    if args.preset:
        console.print(f"preset {args.preset}: {_kinds_line(args.network)}")
    console.print(
        f"All-Reduce {format_size(size, exact=True)} in {args.chunks} chunks, {shape} at "
        f"{','.join(_gbit_s(b) for b in bw)} Gbit/s per host, {args.order} order, "
        f"{args.semantics} semantics"
    )
    table = Table()
    table.add_column("")
    for r in results:
        table.add_column(r.policy, justify="right")
    table.add_row("time", *[_fmt_time(r.time_s) for r in results])
    table.add_row("ideal time", *[_fmt_time(r.ideal_time_s) for r in results])
    table.add_row("utilisation", *[f"{r.utilisation:.3f}" for r in results])
    for d, n in enumerate(dims):
        table.add_row(f"dim {d} ({n} hosts, {_gbit_s(bw[d])} Gbit/s)",
                      *[f"{r.dims[d].utilisation:.3f}" for r in results])
    console.print(table)
    if speedup is not None:
        console.print(f"themis speedup over baseline: {speedup:.3f}x")
    if any(delays) or any(losses):
        console.print(f"links: {','.join(f'{d:g}' for d in delays)} µs one way, loss "
                      f"{','.join(f'{p:g}' for p in losses)} (per dimension)")
    for pol, (chunks, t) in best.items():
        console.print(f"{pol}: fastest at {chunks} chunks ({_fmt_time(t)})")
    return 0


def _per_dim_values(text: str | None, flag: str, n_dims: int, top: float | None
                    ) -> list[float]:
    """``--delay-us`` or ``--loss``: one number for every dimension or one per dimension,
    each >= 0 (and below ``top``); 0 for all when not given."""
    if text is None:
        return [0.0] * n_dims
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) == 1:
        values *= n_dims
    if len(values) != n_dims or not all(0 <= v < (top if top is not None else math.inf)
                                        for v in values):
        bound = f" and below {top:g}" if top is not None else ""
        raise FabricLabError(f"{flag} {text!r} must give one number >= 0{bound}, or one per "
                             f"dimension ({n_dims})")
    return values


def _dim_kinds(args: argparse.Namespace, n_dims: int) -> list[str]:
    """``--dim-kinds``, else the preset's kinds, else every dimension a switch."""
    if not args.dim_kinds:
        return list(args.network.get("dim_kinds") or ["switch"] * n_dims)
    kinds = args.dim_kinds.split(",")
    bad = next((k for k in kinds if k not in DIM_ALGORITHM_OF_KIND), None)
    if bad is not None or len(kinds) != n_dims:
        raise FabricLabError(f"--dim-kinds {args.dim_kinds!r} must name {n_dims} kinds, one "
                             f"per dimension, each one of {', '.join(DIM_ALGORITHM_OF_KIND)}")
    return kinds


def _fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.3f} µs"


def _run_sim(args: argparse.Namespace, dims: tuple[int, ...], bw: tuple[float, ...], size: int,
             policies: list[str]) -> int:
    """`fabriclab model --sim`: the simulator's time and utilisation per policy."""
    from testbed.sim.collectives import themis_allreduce  # the simulator only when asked

    ideal = 2 * size * (1 - 1 / math.prod(dims)) / (sum(b for b, n in zip(bw, dims,
                                                                           strict=True)
                                                          if n > 1) / 8)
    rows = []
    # minutes at full size: a bar on a terminal, a line as each policy ends in a log
    with progress("model --sim", len(policies), "policies simulated, now {policy}",
                  policy=policies[0]) as update:
        for k, pol in enumerate(policies):
            update(k, policy=pol)
            r = themis_allreduce(dims, bw, size, args.chunks, policy=pol, order=args.order,
                                 **args.network)
            update(k + 1, policy="done" if k + 1 == len(policies) else policies[k + 1])
            rows.append({"policy": pol, "time_s": r.time_s, "ideal_time_s": ideal,
                         "utilisation": ideal / r.time_s})
    if args.json:
        print(json.dumps({"dims": list(dims), "bw_gbit_s": [b / 1e9 for b in bw],
                          "total_bytes": size, "chunks": args.chunks, "order": args.order,
                          "backend": "sim", "results": rows}, indent=2))
        return 0
    console = out_console()
    console.print(f"simulated All-Reduce {format_size(size, exact=True)} in {args.chunks} chunks, "
                  f"{'x'.join(map(str, dims))}, {args.order} order")
    table = Table()
    for col in ("policy", "time", "ideal time", "utilisation"):
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(row["policy"], _fmt_time(row["time_s"]), _fmt_time(row["ideal_time_s"]),
                      f"{row['utilisation']:.3f}")
    console.print(table)
    return 0
