"""`fabriclab import-astra` and `fabriclab export-astra`: ASTRA-sim configuration files to a
fabriclab spec and back (the conversion itself: :mod:`testbed.core.astra_formats`)."""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import yaml

from testbed.core import astra_formats as af
from testbed.core.atomic import write_text
from testbed.core.errors import SpecError
from testbed.core.experiment import expand, load_experiments
from testbed.core.out_dir import FORCE_HELP, check_out_dir, check_out_file, clear_out_dir
from testbed.core.presets import PRESETS
from testbed.core.spec import (
    MAX_HOSTS,
    MultidimSpec,
    load_fabric_file,
    load_yaml,
    parse_fabric,
)
from testbed.core.units import parse_size

NETWORK_YAML, NETWORK_JSON, SYSTEM_TXT = "network.yml", "network.json", "system.txt"


def register(sub: argparse._SubParsersAction) -> None:
    i = sub.add_parser(
        "import-astra",
        description="Make a fabriclab spec from ASTRA-sim files: a 2.0 network YAML or a 1.0 "
        "network JSON, and optionally a system file (1.0 text or 2.0 JSON). With a system "
        "file the spec is an experiment with one Themis/baseline job, else a fabric file. "
        "Rates: ASTRA-sim GB/s (2^30 bytes/s) become Mbit/s (x8589.934592), real rates with "
        "the rate_scale that emulates the fastest dimension at 100 Mbit/s.")
    i.add_argument("network", type=Path, help="network.yml (ASTRA-sim 2.0) or network.json "
                   "(1.0 analytical)")
    i.add_argument("--system", type=Path, default=None,
                   help="system file (key: value text, or the 2.0 JSON)")
    i.add_argument("--out", type=Path, default=None,
                   help="write the spec to this file (default: print it); an existing file "
                   "is refused unless --force")
    i.add_argument("--force", action="store_true",
                   help="with --out: replace an existing file instead of refusing it")
    i.add_argument("--name", default=None,
                   help="the spec's name (default: the network file's name)")
    i.add_argument("--sizes", default="1MiB",
                   help="the job's All-Reduce sizes, comma-separated (default 1MiB)")
    i.add_argument("--scale-down", action="store_true",
                   help="halve the largest dimension until at most 16 hosts remain (as the "
                   "presets do), so the emulator can run it")
    i.set_defaults(func=run_import)

    e = sub.add_parser(
        "export-astra",
        description=f"Write ASTRA-sim files from a multidim fabric or experiment spec, or a "
        f"preset: {NETWORK_YAML} (2.0), {NETWORK_JSON} (1.0 analytical) and {SYSTEM_TXT} (1.0 "
        "system text: the first Themis/baseline job's chunks, order and collective). Rates "
        "are the spec's real ones, in GB/s.")
    e.add_argument("spec", nargs="?", type=Path, default=None,
                   help="YAML with a multidim fabric: block (an experiment or fabric file)")
    e.add_argument("--preset", choices=list(PRESETS), default=None,
                   help="a Themis paper system at full size instead of a spec")
    e.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="the directory to write the three files into: new or empty; an "
                   "existing non-empty one is refused unless --force")
    e.add_argument("--force", action="store_true", help=FORCE_HELP)
    e.set_defaults(func=run_export)


def _name(args: argparse.Namespace) -> str:
    if args.name is not None:
        return args.name
    stem = re.sub(r"[^A-Za-z0-9_.-]", "-", args.network.stem).strip("-._") or "astra"
    return stem[:40]


def run_import(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_out_file(args.out, args.force)
    dims = af.read_network(args.network)
    system = None
    if args.system is not None:
        system = af.parse_system(af.read_text(args.system), str(args.system), len(dims))
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    for s in sizes:
        parse_size(s)  # one sentence if a size is not one
    hosts = math.prod(d.size for d in dims)
    if hosts > MAX_HOSTS and not args.scale_down:
        raise SpecError(f"{args.network}: npus_count: {hosts} NPUs is more than this machine "
                        f"emulates (at most {MAX_HOSTS} hosts); add --scale-down, or use "
                        "fabriclab model/plan for the full size")
    spec, notes = af.to_spec(dims, system, _name(args), sizes, args.scale_down)
    source = f"the spec made from {args.network}"
    if system is None:
        parse_fabric({"fabric": spec["fabric"], "rate_scale": spec["rate_scale"]})
        spec.pop("name")
    else:
        expand(spec, source)  # one sentence if fabriclab cannot run it (e.g. too many hosts)
    text = "# made by fabriclab import-astra from " + ", ".join(
        str(p) for p in (args.network, args.system) if p is not None) + "\n"
    text += "".join(f"# note: {n}\n" for n in notes)
    text += yaml.safe_dump(spec, sort_keys=False, default_flow_style=None)
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_text(args.out, text)
        print(f"written {args.out}")
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    return 0


def run_export(args: argparse.Namespace) -> int:
    if (args.spec is None) == (args.preset is None):
        raise SpecError("give a spec file or --preset NAME (one of them)")
    check_out_dir(args.out, args.force)
    if args.preset is not None:
        dims, system = af.from_preset(PRESETS[args.preset])
    else:
        dims, system = _from_spec_file(args.spec)
    clear_out_dir(args.out)
    files = {NETWORK_YAML: af.network_yaml(dims), NETWORK_JSON: af.network_json(dims),
             SYSTEM_TXT: af.system_text(system, len(dims))}
    for name, text in files.items():
        write_text(args.out / name, text)
    print(f"written {', '.join(str(args.out / n) for n in files)}")
    return 0


def _from_spec_file(path: Path) -> tuple[tuple[af.AstraDim, ...], af.AstraSystem]:
    fabric = load_fabric_file(path).fabric
    if not isinstance(fabric, MultidimSpec):
        raise SpecError(f"{path}: fabric.kind: ASTRA-sim's hierarchical networks are "
                        f"multidim fabrics, not {fabric.kind}")
    data = load_yaml(path)
    job = None
    if isinstance(data, dict) and "jobs" in data:
        runs = load_experiments(path)
        # the first job whose schedule ASTRA-sim has a name for
        job = next((j for j in runs[0].jobs if j.algorithm in af.ASTRA_INTER), None)
    return af.from_spec(fabric, job)
