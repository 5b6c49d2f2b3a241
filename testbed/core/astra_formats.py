"""ASTRA-sim's configuration files, read and written: pure text in, text or mappings out
(:func:`read_text` and :func:`read_network` read a file first).

Three formats (the public ASTRA-sim inputs and the Themis artifact's):

- **2.0 network YAML**: ``topology: [Ring, FullyConnected, Switch]``, ``npus_count``,
  ``bandwidth`` (GB/s per link and direction), ``latency`` (ns per link).
- **1.0 network JSON** (analytical backend): ``topologies-per-dim``, ``units-count``,
  ``links-count`` (links per NPU), ``link-bandwidth`` (GB/s per link), ``link-latency`` (ns).
- **1.0 system text**: whitespace-separated ``key: value`` pairs (``scheduling-policy``,
  ``preferred-dataset-splits``, ``intra-dimension-scheduling``,
  ``inter-dimension-scheduling``, ``active-chunks-per-dimension``,
  ``all-reduce-implementation`` as ``ring_direct_halvingDoubling``...); the 2.0 system JSON,
  the same keys with lists, is read too.

Units. ASTRA-sim counts GB/s of 2**30 bytes/s (:mod:`testbed.core.astra_units` quotes its
code); fabriclab's YAML Mbit/s (1 GB/s = 8589.934592 Mbit/s, ``G`` below) and its CLI Gbit/s.
A fabriclab dimension's ``mbit_s`` is the bandwidth a host has in it, which is what the model
uses: on a switch or ring dimension the rate of the one link the collective sends on, on a
fully connected one the host's total over its ``n-1`` links. So a 2.0 ``bandwidth`` (per
link) is ``mbit_s / G`` on a switch or ring dimension and ``mbit_s / G / (n-1)`` on a fully
connected one; a 1.0 dimension's NPU has ``links-count × link-bandwidth`` GB/s, written with
``links-count`` 1 (switch), 2 (ring of 3 or more), 1
(ring of 2) or ``n-1`` (fully connected).

A dimension's link latency (2.0 ``latency``, 1.0 ``link-latency``, ns per link) is the
dimension's ``delay_us`` (µs per link, one way) and back: a hop crosses one link of a ring or
fully connected dimension and two of a switch dimension, as in ASTRA-sim's analytical
network. What fabriclab does not model is read and dropped (``endpoint-delay``, the
RS/AG/all-to-all implementations, ``scheduling-policy`` between collectives) and written as
neutral values (``nic-latency``, ``router-latency`` 0). What it cannot run is
refused in one sentence naming the file and the key: ``active-chunks-per-dimension`` other
than 1, ``collective-optimization: baseline``, scheduling or collectives it has no
counterpart for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testbed.core.algorithms import dim_algorithms, ring_dimension_error
from testbed.core.astra_units import ASTRA_GBYTE_S_IN_MBIT_S
from testbed.core.errors import SpecError
from testbed.core.presets import (
    ASTRA_TOPOLOGY,
    DIM_ALGORITHM_OF_KIND,
    emulation_scale,
    scaled_sizes,
)
from testbed.core.registry import COLLECTIVES

KIND_OF_TOPOLOGY = {name.lower(): kind for kind, name in ASTRA_TOPOLOGY.items()}
# fabriclab collective <-> ASTRA-sim per-dimension implementation
ASTRA_COLLECTIVE = {"ring": "ring", "direct": "direct", "halving-doubling": "halvingDoubling"}
COLLECTIVE_OF_ASTRA = {v: k for k, v in ASTRA_COLLECTIVE.items()}
# chunk order within a dimension: fabriclab <-> ASTRA-sim 1.0 (the 2.0 README's names read too)
ASTRA_INTRA = {"fifo": "FIFO", "scf": "smallestFirst"}
INTRA_OF_ASTRA = {"FIFO": "fifo", "smallestFirst": "scf", "SCF": "scf"}
# chunk schedule across dimensions: a name in registry.SCHEDULES <-> ASTRA-sim 1.0 (2.0 README:
# baseline/themis)
ASTRA_INTER = {"baseline": "ascending", "themis": "offlineGreedy"}
INTER_OF_ASTRA = {"ascending": "baseline", "baseline": "baseline", "offlineGreedy": "themis",
                  "offlineGreedyFlex": "themis", "themis": "themis"}
# ASTRA-sim system keys read and dropped: nothing in fabriclab corresponds to them
IGNORED_SYSTEM_KEYS = frozenset({
    "scheduling-policy", "endpoint-delay", "local-reduction-delay", "boost-mode", "L", "o",
    "g", "G", "model-shared-bus", "reduce-scatter-implementation", "all-gather-implementation",
    "all-to-all-implementation", "seprate-log", "local-mem-bw", "peak-perf",
    "roofline-enabled", "trace-enabled", "replay-only",
})
SYSTEM_KEYS = IGNORED_SYSTEM_KEYS | {
    "preferred-dataset-splits", "intra-dimension-scheduling", "inter-dimension-scheduling",
    "active-chunks-per-dimension", "all-reduce-implementation", "collective-optimization"}


def _tidy(x: float) -> float:
    """``x`` to 12 significant digits, so unit conversions round-trip exactly."""
    return float(f"{x:.12g}")


@dataclass(frozen=True)
class AstraDim:
    """One dimension: ``gbyte_s`` is an NPU's bandwidth in it (``mbit_s`` / 8589.934592),
    ``latency_ns`` each of its links' one-way latency (``delay_us`` × 1000)."""

    kind: str  # switch | ring | fully_connected
    size: int
    gbyte_s: float
    latency_ns: float = 0.0

    @property
    def mbit_s(self) -> float:
        return _tidy(self.gbyte_s * ASTRA_GBYTE_S_IN_MBIT_S)

    @property
    def links_per_npu(self) -> int:
        """Links an NPU has in this dimension, as the 1.0 ``links-count`` counts them."""
        if self.kind == "fully_connected":
            return max(1, self.size - 1)
        if self.kind == "ring":
            return 2 if self.size > 2 else 1
        return 1

    @property
    def link_gbyte_s(self) -> float:
        """The 2.0 ``bandwidth`` of one link (fully connected: the NPU's share per peer)."""
        share = self.size - 1 if self.kind == "fully_connected" and self.size > 2 else 1
        return _tidy(self.gbyte_s / share)


@dataclass(frozen=True)
class AstraSystem:
    """The system-file settings fabriclab runs: chunks, chunk order, schedule, per-dimension
    collectives (empty: not given)."""

    chunks: int = 64
    order: str = "fifo"  # fifo | scf
    policy: str = "themis"  # themis | baseline
    dim_algorithms: tuple[str, ...] = ()


def _fail(source: str, key: str, why: str) -> SpecError:
    return SpecError(f"{source}: {key}: {why}")


def _list(data: dict, key: str, source: str, n: int | None = None) -> list:
    if key not in data:
        raise _fail(source, key, "missing")
    value = data[key]
    if not isinstance(value, list) or not value:
        raise _fail(source, key, f"must be a list with one value per dimension, not {value!r}")
    if n is not None and len(value) != n:
        raise _fail(source, key, f"has {len(value)} values for {n} dimensions")
    return value


def _positive(values: list, key: str, source: str, integer: bool = False,
              zero: bool = False) -> list:
    out = []
    for v in values:
        ok = isinstance(v, int | float) and not isinstance(v, bool) and (
            v >= 0 if zero else v > 0) and (not integer or float(v).is_integer())
        if not ok:
            kind = ("non-negative " if zero else "positive ") + (
                "whole numbers" if integer else "numbers")
            raise _fail(source, key, f"{v!r} is not one of the {kind} it must hold")
        out.append(int(v) if integer else float(v))
    return out


def _kinds(names: list, key: str, source: str) -> list[str]:
    out = []
    for name in names:
        kind = KIND_OF_TOPOLOGY.get(str(name).lower())
        if kind is None:
            raise _fail(source, key, f"{name!r} is not a topology fabriclab builds (Ring, Switch "
                        "or FullyConnected)")
        out.append(kind)
    return out


def _mapping(text: str, source: str, what: str) -> dict:
    try:
        data = yaml.safe_load(text)  # YAML reads JSON too
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(f"{source} is not valid {what}{where}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping of {what} keys at the top level")
    return data


# -- network files ---------------------------------------------------------------------------


def parse_network_yaml(text: str, source: str = "network.yml") -> tuple[AstraDim, ...]:
    """The dimensions of an ASTRA-sim 2.0 network YAML."""
    data = _mapping(text, source, "ASTRA-sim network YAML")
    kinds = _kinds(_list(data, "topology", source), "topology", source)
    n = len(kinds)
    sizes = _positive(_list(data, "npus_count", source, n), "npus_count", source, integer=True)
    link = _positive(_list(data, "bandwidth", source, n), "bandwidth", source)
    latency = (_positive(_list(data, "latency", source, n), "latency", source, zero=True)
               if "latency" in data else [0.0] * n)
    dims = []
    for kind, size, bw, lat in zip(kinds, sizes, link, latency, strict=True):
        share = size - 1 if kind == "fully_connected" and size > 2 else 1
        dims.append(AstraDim(kind, size, _tidy(bw * share), lat))
    return tuple(dims)


def network_yaml(dims: Sequence[AstraDim]) -> str:
    """An ASTRA-sim 2.0 network YAML for ``dims``."""
    def row(values: list) -> str:
        return "[ " + ", ".join(str(v) for v in values) + " ]"

    return "\n".join([
        "# ASTRA-sim 2.0 analytical network, written by fabriclab export-astra",
        f"topology: {row([ASTRA_TOPOLOGY[d.kind] for d in dims])}",
        f"npus_count: {row([d.size for d in dims])}",
        "# GB/s per link and direction (a fully connected NPU's bandwidth split over n-1 links)",
        f"bandwidth: {row([d.link_gbyte_s for d in dims])}",
        "# ns per link (fabriclab models bandwidth only)",
        f"latency: {row([d.latency_ns for d in dims])}",
        "",
    ])


def parse_network_json(text: str, source: str = "network.json") -> tuple[AstraDim, ...]:
    """The dimensions of an ASTRA-sim 1.0 analytical network JSON."""
    data = _mapping(text, source, "ASTRA-sim network JSON")
    kinds = _kinds(_list(data, "topologies-per-dim", source), "topologies-per-dim", source)
    n = len(kinds)
    if "dimensions-count" in data and data["dimensions-count"] != n:
        raise _fail(source, "dimensions-count", f"is {data['dimensions-count']!r} but "
                    f"topologies-per-dim lists {n} dimensions")
    sizes = _positive(_list(data, "units-count", source, n), "units-count", source,
                      integer=True)
    links = _positive(_list(data, "links-count", source, n), "links-count", source,
                      integer=True)
    link = _positive(_list(data, "link-bandwidth", source, n), "link-bandwidth", source)
    latency = (_positive(_list(data, "link-latency", source, n), "link-latency", source,
                         zero=True) if "link-latency" in data else [0.0] * n)
    return tuple(AstraDim(k, size, _tidy(count * bw), lat) for k, size, count, bw, lat
                 in zip(kinds, sizes, links, link, latency, strict=True))


def read_text(path: Path) -> str:
    """A configuration file's text, or one sentence naming the file."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path} is not UTF-8 text") from None


def read_network(path: Path) -> tuple[AstraDim, ...]:
    """The dimensions of a 2.0 network YAML or 1.0 network JSON file, told apart by their
    keys."""
    text = read_text(path)
    if "topologies-per-dim" in text:
        return parse_network_json(text, str(path))
    return parse_network_yaml(text, str(path))


def network_json(dims: Sequence[AstraDim]) -> str:
    """An ASTRA-sim 1.0 analytical network JSON for ``dims`` (no HBM or NIC costs)."""
    n = len(dims)
    doc = {
        "topology-name": "Hierarchical",
        "topologies-per-dim": [ASTRA_TOPOLOGY[d.kind] for d in dims],
        "dimension-type": ["N"] * n,
        "dimensions-count": n,
        "units-count": [d.size for d in dims],
        "links-count": [d.links_per_npu for d in dims],
        "link-latency": [d.latency_ns for d in dims],
        "link-bandwidth": [_tidy(d.gbyte_s / d.links_per_npu) for d in dims],
        "nic-latency": [0] * n,
        "router-latency": [0] * n,
        "hbm-latency": [0] * n,  # hbm-scale 0: no memory cost (fabriclab models none)
        "hbm-bandwidth": [1] * n,
        "hbm-scale": [0] * n,
    }
    return json.dumps(doc, indent=2) + "\n"


# -- system file ---------------------------------------------------------------------------


def system_pairs(text: str, source: str) -> dict[str, Any]:
    """The ``key: value`` pairs of an ASTRA-sim 1.0 system text (or the 2.0 system JSON's
    mapping), keys without their colon; one sentence if the text is not such pairs."""
    if text.lstrip().startswith("{"):  # the 2.0 system JSON
        return _mapping(text, source, "ASTRA-sim system JSON")
    tokens = text.split()
    if len(tokens) % 2:
        raise SpecError(f"{source}: {tokens[-1]} has no value (the system file is "
                        "'key: value' pairs)")
    pairs: dict[str, Any] = {}
    for key, value in zip(tokens[::2], tokens[1::2], strict=True):
        if not key.endswith(":"):
            raise SpecError(f"{source}: {key!r} is not a key (the system file is 'key: value' "
                            "pairs, each key ending in ':')")
        pairs[key[:-1]] = value
    return pairs


def _int(value: Any, key: str, source: str) -> int:
    try:
        out = int(str(value))
    except ValueError:
        raise _fail(source, key, f"{value!r} is not a whole number") from None
    if out < 1:
        raise _fail(source, key, f"{out} must be at least 1")
    return out


def parse_system(text: str, source: str = "system.txt",
                 n_dims: int | None = None) -> AstraSystem:
    """The settings fabriclab runs from an ASTRA-sim 1.0 system text (or 2.0 system JSON)."""
    pairs = system_pairs(text, source)
    for key in pairs:
        if key not in SYSTEM_KEYS:
            raise _fail(source, key, "is not an ASTRA-sim system key")
    if (active := _int(pairs.get("active-chunks-per-dimension", 1),
                       "active-chunks-per-dimension", source)) != 1:
        raise _fail(source, "active-chunks-per-dimension",
                    f"{active}: fabriclab runs one chunk per dimension at a time (1)")
    if (opt := str(pairs.get("collective-optimization", "localBWAware"))) != "localBWAware":
        raise _fail(source, "collective-optimization", f"{opt!r}: fabriclab runs "
                    "localBWAware (Reduce-Scatter down, All-Reduce on the last, All-Gather back)")
    intra = str(pairs.get("intra-dimension-scheduling", "FIFO"))
    if intra not in INTRA_OF_ASTRA:
        raise _fail(source, "intra-dimension-scheduling",
                    f"{intra!r} has no fabriclab counterpart (FIFO or smallestFirst/SCF)")
    inter = str(pairs.get("inter-dimension-scheduling", "ascending"))
    if inter not in INTER_OF_ASTRA:
        raise _fail(source, "inter-dimension-scheduling", f"{inter!r} has no fabriclab "
                    "counterpart (ascending/baseline or offlineGreedy/themis)")
    algorithms: tuple[str, ...] = ()
    if "all-reduce-implementation" in pairs:
        raw = pairs["all-reduce-implementation"]
        names = raw if isinstance(raw, list) else str(raw).split("_")
        bad = [x for x in names if x not in COLLECTIVE_OF_ASTRA]
        if bad:
            raise _fail(source, "all-reduce-implementation", f"{bad[0]!r} has no fabriclab "
                        f"collective ({', '.join(COLLECTIVE_OF_ASTRA)})")
        if n_dims is not None and len(names) != n_dims:
            raise _fail(source, "all-reduce-implementation",
                        f"names {len(names)} collectives for {n_dims} network dimensions")
        algorithms = tuple(COLLECTIVE_OF_ASTRA[x] for x in names)
    return AstraSystem(
        chunks=_int(pairs.get("preferred-dataset-splits", 1), "preferred-dataset-splits",
                    source),
        order=INTRA_OF_ASTRA[intra], policy=INTER_OF_ASTRA[inter], dim_algorithms=algorithms)


def system_text(system: AstraSystem, n_dims: int) -> str:
    """An ASTRA-sim 1.0 system text (what its ``Sys::parse_var`` reads) for ``system``."""
    algorithms = system.dim_algorithms or ("ring",) * n_dims
    impl = "_".join(ASTRA_COLLECTIVE[a] for a in algorithms)
    lines = {
        "scheduling-policy": "LIFO",
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": system.chunks,
        "all-reduce-implementation": impl,
        "reduce-scatter-implementation": impl,
        "all-gather-implementation": impl,
        "all-to-all-implementation": "_".join(["direct"] * len(algorithms)),
        "collective-optimization": "localBWAware",
        "intra-dimension-scheduling": ASTRA_INTRA[system.order],
        "inter-dimension-scheduling": ASTRA_INTER[system.policy],
    }
    return "".join(f"{k}: {v}\n" for k, v in lines.items())


# -- fabriclab specs -------------------------------------------------------------------------


def job_collective(kinds: Sequence[str], sizes: Sequence[int],
                   system: AstraSystem) -> tuple[str, str]:
    """``(dim_algorithm, note)``: the one collective a fabriclab job runs on every dimension
    (of ``kinds`` and ``sizes``). ASTRA-sim's own when it names one for all; otherwise the
    first that every dimension carries of: direct (if there is a mesh, so that it uses all its
    links), ASTRA-sim's others in order, ring; with a note saying what ASTRA-sim ran."""
    algorithms = list(dict.fromkeys(system.dim_algorithms))
    if len(algorithms) <= 1:
        return (algorithms[0] if algorithms else "ring"), ""
    mesh = ["direct"] if "fully_connected" in kinds else []
    for name in [*mesh, *algorithms, "ring"]:
        if all(_carries(name, k, n) for k, n in zip(kinds, sizes, strict=True)):
            break
    impl = "_".join(ASTRA_COLLECTIVE[a] for a in system.dim_algorithms)
    return name, (f"ASTRA-sim ran {impl} (one collective per dimension); a fabriclab job runs "
                  f"one on every dimension, {name} here (fabriclab model --preset and the "
                  "model API take one per dimension)")


def _carries(name: str, kind: str, n: int) -> bool:
    """Whether a dimension of ``kind`` and ``n`` hosts can run the collective ``name``."""
    if n < 2:
        return True
    if COLLECTIVES.get(name).group_size_error(n):
        return False
    return kind != "ring" or ring_dimension_error(name, n) is None


def to_spec(dims: Sequence[AstraDim], system: AstraSystem | None, name: str,
            sizes: Sequence[str] = ("1MiB",), scale_down: bool = False
            ) -> tuple[dict[str, Any], list[str]]:
    """``(spec mapping, notes)``: a fabriclab experiment (a fabric file without ``system``) at
    the real rates, with the ``rate_scale`` that emulates the fastest host bandwidth at 100
    Mbit/s; ``scale_down`` halves dimensions as the presets do (testbed.core.presets)."""
    notes = []
    sizes_of = [d.size for d in dims]
    if scale_down:
        sizes_of = scaled_sizes(sizes_of)
        notes.append(f"scaled down from {'x'.join(str(d.size) for d in dims)} to "
                     f"{'x'.join(map(str, sizes_of))} hosts")
    fabric = {"kind": "multidim", "dims": [
        {"size": n, "mbit_s": d.mbit_s, "kind": d.kind,
         **({"delay_us": _tidy(d.latency_ns / 1000)} if d.latency_ns else {})}
        for n, d in zip(sizes_of, dims, strict=True)]}
    spec: dict[str, Any] = {"name": name, "fabric": fabric,
                            "rate_scale": emulation_scale(max(d.mbit_s for d in dims))}
    if system is None:
        return spec, notes
    if system.dim_algorithms and len(system.dim_algorithms) != len(dims):
        raise SpecError(f"the system file names {len(system.dim_algorithms)} collectives for "
                        f"a network of {len(dims)} dimensions")
    dim_algorithm, note = job_collective([d.kind for d in dims], sizes_of, system)
    if note:
        notes.append(note)
    spec["policy"] = "shortest"
    spec["jobs"] = [{
        "name": "allreduce", "hosts_wanted": _prod(sizes_of), "algorithm": system.policy,
        "order": system.order, "chunks": system.chunks, "dim_algorithm": dim_algorithm,
        "workload": {"kind": "allreduce", "sizes": list(sizes)}}]
    return spec, notes


def from_spec(fabric: Any, job: Any | None = None) -> tuple[tuple[AstraDim, ...], AstraSystem]:
    """The ASTRA-sim view of a validated multidim fabric (real rates) and, if given, its
    hierarchical job (its chunks, order, schedule and collective on every dimension)."""
    dims = tuple(AstraDim(d.kind, d.size, _tidy(d.mbit_s / ASTRA_GBYTE_S_IN_MBIT_S),
                          _tidy(d.delay_us * 1000))
                 for d in fabric.dims)
    if job is None:
        return dims, AstraSystem(dim_algorithms=tuple(
            DIM_ALGORITHM_OF_KIND[d.kind] for d in dims))
    return dims, AstraSystem(chunks=job.chunks, order=job.order, policy=job.algorithm,
                             dim_algorithms=tuple(dim_algorithms(job.dim_algorithm,
                                                                 [d.kind for d in dims])))


def from_preset(preset: Any) -> tuple[tuple[AstraDim, ...], AstraSystem]:
    """The ASTRA-sim view of a preset (testbed.core.presets) at full size: Themis, SCF."""
    dims = tuple(AstraDim(d.kind, d.size, d.gbyte_s) for d in preset.dims)
    return dims, AstraSystem(chunks=preset.chunks, order="scf", policy="themis",
                             dim_algorithms=preset.dim_algorithms)


def _prod(values: Sequence[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out
