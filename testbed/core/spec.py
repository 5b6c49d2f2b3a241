"""Fabric specs: parse YAML, validate with pydantic, and explain mistakes in one sentence.

Three fabric kinds share one ``fabric:`` block shape (other spec files embed it unchanged):

- ``leaf_spine``: one link between every leaf and every spine;
- ``ocs_leaf_spine``: leaves and spines wired to a layer of optical circuit switches instead;
- ``multidim``: N = prod(size) hosts, one NIC per dimension, each dimension a switch per group,
  a ring of point-to-point links, or a full mesh of them (``fully_connected``: one link per
  pair of peers, the dimension's ``mbit_s`` per host split evenly over its ``size - 1`` links,
  as ASTRA-sim's FullyConnected gives each NPU).
"""

from __future__ import annotations

import difflib
import math
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from testbed.core.errors import SpecError
from testbed.core.limits import MAX_SPEC_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES
from testbed.core.scaling import UNSCALED, emulated_delay_us, emulated_rate

# What one 2-core machine shapes faithfully (shared/DESIGN.md, BENCHMARKS.md): Mininet's HTB
# shaping accepts at most 1000 Mbit/s per link, and the userspace datapath forwards about
# 1 Gbit/s in total, so faster links could never be saturated anyway. The limit is on the
# emulated rate: a spec with ``rate_scale`` (testbed.core.scaling) states faster real rates.
MAX_LINK_MBIT_S = 1000
RATE_FIELDS = ("host_link_mbit_s", "uplink_mbit_s")  # a leaf-spine fabric's rates
# ... and its delays and jitters (µs), scaled the other way
DELAY_FIELDS = ("host_link_delay_us", "uplink_delay_us", "host_link_jitter_us",
                "uplink_jitter_us")
# The 4x4x4 fabric (64 hosts, 48 switches) builds in seconds; twice that is still carried.
MAX_HOSTS = 128
MAX_SWITCHES = 128
# The simulator (``shaped`` False) builds no network: a fabric of the Themis paper's 1024 NPUs
# and more is only a plan.
MAX_SIM_HOSTS = 16384


# Keys spelled before every key named its unit (Mbit/s was ``mbps``): still read, never written.
FABRIC_OLD_NAMES = {"host_link_mbps": "host_link_mbit_s", "uplink_mbps": "uplink_mbit_s"}
DIM_OLD_NAMES = {"mbps": "mbit_s"}


def _renamed(data: Any, old_names: dict[str, str]) -> Any:
    """``data`` with every old key renamed; both names of one field is a mistake."""
    if not isinstance(data, dict) or not old_names.keys() & data.keys():
        return data
    out = dict(data)
    for old, new in old_names.items():
        if old in out:
            if new in out:
                raise ValueError(f"{new} is also given as {old} (its old name): keep only {new}")
            out[new] = out.pop(old)
    return out


def upgrade_fabric(fabric: Any) -> Any:
    """A ``fabric:`` mapping (unvalidated, e.g. from an old run directory) with the current
    key names."""
    out = _renamed(fabric, FABRIC_OLD_NAMES)
    if isinstance(out, dict) and isinstance(out.get("dims"), list):
        out = {**out, "dims": [_renamed(d, DIM_OLD_NAMES) for d in out["dims"]]}
    return out


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    OLD_NAMES: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return _renamed(data, cls.OLD_NAMES)


def _shapeable(mbit_s: float, info: ValidationInfo) -> float:
    """A real rate whose emulated rate (× the ``rate_scale`` in the validation context, set
    by :func:`validate`; None when that is itself invalid) this machine shapes faithfully."""
    context = info.context or {}
    scale = context.get("rate_scale", UNSCALED)
    if (not context.get("shaped", True) or scale is None
            or emulated_rate(mbit_s, scale) <= MAX_LINK_MBIT_S):
        return mbit_s
    if scale == UNSCALED:
        raise ValueError(f"{mbit_s:g} Mbit/s is more than this machine shapes faithfully (at "
                         f"most {MAX_LINK_MBIT_S} Mbit/s); to state a faster real rate, set "
                         "rate_scale (emulated ÷ real rate) so it is emulated slower, or "
                         "simulate it (--backend sim)")
    raise ValueError(f"{mbit_s:g} Mbit/s at rate_scale {scale:g} is emulated at "
                     f"{emulated_rate(mbit_s, scale):g} Mbit/s, more than this machine shapes "
                     f"faithfully (at most {MAX_LINK_MBIT_S} Mbit/s): lower rate_scale")


# Rates in Mbit/s; real rates when the file sets rate_scale, emulated at rate × rate_scale.
MbitS = Annotated[float, Field(gt=0), AfterValidator(_shapeable)]


def _congestion_name(name: str) -> str:
    """A name the kernel could know as a TCP congestion control (``cubic``, ``reno``,
    ``bbr``, ...); whether it does is checked at bring-up (testbed.emulator.host_tcp)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,15}", name):
        raise ValueError(f"{name!r} is not a TCP congestion control's name (such as cubic, "
                         "reno or bbr: up to 16 lowercase letters, digits or '_')")
    return name


# A link's one-way propagation delay and its jitter in µs (real, like the rates: emulated at
# delay ÷ rate_scale, testbed.core.scaling), and the fraction of packets it loses, in [0, 1).
DelayUs = Annotated[float, Field(ge=0, allow_inf_nan=False)]
LossFraction = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1)]
# Emulated rate ÷ real rate (testbed.core.scaling); 1: the rates are emulated as written.
RateScale = Annotated[float, Field(gt=0, le=1, strict=True)]


class LinkOverride(_Strict):
    """The delay, jitter or loss of the links ``between`` two nodes (``[h0, leaf0]``), in
    place of their link class's; a field left out keeps the class's value."""

    between: Annotated[list[Annotated[str, Field(min_length=1, max_length=40)]],
                       Field(min_length=2, max_length=2)]
    delay_us: DelayUs | None = None
    jitter_us: DelayUs | None = None
    loss: LossFraction | None = None

    @model_validator(mode="after")
    def _two_nodes(self) -> LinkOverride:
        if self.between[0] == self.between[1]:
            raise ValueError(f"between names {self.between[0]} twice; name the two ends of a "
                             "link")
        return self


class _Links(_Strict):
    """Per-link overrides of a fabric's delays, jitter and loss (``links:``), each naming
    two nodes a link of the fabric joins (checked when the plan is built:
    :func:`testbed.core.topology.build_plan`)."""

    links: Annotated[list[LinkOverride], Field(max_length=4096)] = []
    # Hosts hand their interfaces 64 KiB TSO/GSO segments (true: the kernel's default) or
    # wire-sized packets (false). A shaped queue sends a whole segment on credit, so with
    # offload a transfer of one or two segments onto an idle link arrives at 0.55-0.66 of the
    # time its rate allows (BENCHMARKS.md, "Training on the emulator ... per dimension");
    # without it every packet waits for its rate, at some 45x the packets through the switch
    # (16 hosts at 100 Mbit/s then starved a 2-core machine's workers of CPU: BENCHMARKS.md).
    segmentation_offload: bool = True
    # With offload on: each host segment at most this many ms of the slowest link it may cross
    # (testbed.emulator.segmentation), which bounds that credit to this much per transfer at
    # a fraction of wire-sized packets' cost. None: the kernel's 64 KiB.
    segment_max_ms: Annotated[float, Field(gt=0, le=100)] | None = None
    # Each host's input links as wires: every packet arriving over a link takes its length at
    # that link's rate after the one before it (testbed.emulator.delay_line's Wire, in the
    # host's delay line; a multidim host has one per dimension's link), so a segment the
    # shaped queues let through on credit arrives when the wire would have carried it. Costs
    # a userspace hop per packet (each host's delay line sees every packet it receives).
    wire_serialization: bool = False
    # Each shaped link's data queue: one drop-tail FIFO ("fifo"), or per-flow fair queueing
    # ("fair": flows hashed into buckets served in turn, testbed.emulator.fair_queue), the
    # split of a link between its flows that the simulator's max-min rates assume.
    link_queue: Literal["fifo", "fair"] = "fifo"
    # The hosts' TCP congestion control (each host namespace's
    # net.ipv4.tcp_congestion_control, testbed.emulator.host_tcp): how TCP flows share a
    # queue. None keeps the kernel's default, which a new namespace inherits (Debian's is
    # cubic; env.json records the machine's).
    tcp_congestion: Annotated[str, AfterValidator(_congestion_name)] | None = None

    def _check_links(self) -> None:
        """One sentence for the first override that names no link of this fabric (once its
        size is known to be within bounds: the check builds its plan)."""
        if self.links:
            from testbed.core.topology import override_error  # topology imports this module

            if bad := override_error(self):  # type: ignore[arg-type]
                raise ValueError(bad)


class LeafSpineSpec(_Links):
    OLD_NAMES: ClassVar[dict[str, str]] = FABRIC_OLD_NAMES
    kind: Literal["leaf_spine"]
    leaves: Count
    spines: Count
    hosts_per_leaf: Count
    host_link_mbit_s: MbitS
    uplink_mbit_s: MbitS
    # each host's link to its leaf, and every link above the leaves (leaf-spine, leaf-OCS
    # and spine-OCS alike): one-way delay and jitter in µs, loss a fraction of packets
    host_link_delay_us: DelayUs = 0.0
    uplink_delay_us: DelayUs = 0.0
    host_link_jitter_us: DelayUs = 0.0
    uplink_jitter_us: DelayUs = 0.0
    host_link_loss: LossFraction = 0.0
    uplink_loss: LossFraction = 0.0

    @property
    def num_hosts(self) -> int:
        return self.leaves * self.hosts_per_leaf

    @property
    def num_switches(self) -> int:
        return self.leaves + self.spines

    @model_validator(mode="after")
    def _fits(self, info: ValidationInfo) -> LeafSpineSpec:
        _check_size(self.num_hosts, self.num_switches, info)
        self._check_links()
        return self


class OcsLeafSpineSpec(LeafSpineSpec):
    kind: Literal["ocs_leaf_spine"]  # type: ignore[assignment]
    ocs_count: Count
    # How the controller's allocator wires circuits (sdn_app.allocation.ocs.REWIRINGS; exact
    # is milp's older name, still accepted with a warning).
    ocs_rewiring: Literal["any", "conservative", "augment", "milp", "exact"] = "any"

    @property
    def num_switches(self) -> int:
        return self.leaves + self.spines + self.ocs_count

    @model_validator(mode="after")
    def _ports(self) -> OcsLeafSpineSpec:
        if self.leaves > 2 * self.spines:
            raise ValueError(
                f"an OCS wires each leaf to one spine port and each spine has two ports per OCS, "
                f"so {self.leaves} leaves need at least {math.ceil(self.leaves / 2)} spines"
            )
        return self


DIM_KINDS = ("switch", "ring", "fully_connected")
DimKind = Literal["switch", "ring", "fully_connected"]


class DimSpec(_Strict):
    """One dimension: ``size`` hosts per group, ``mbit_s`` per host (on ``fully_connected``
    the host's total, each of its ``size - 1`` links carrying an equal share)."""

    OLD_NAMES: ClassVar[dict[str, str]] = DIM_OLD_NAMES
    size: Count
    mbit_s: MbitS
    kind: DimKind = "switch"
    # each of its links: one-way delay and jitter in µs, loss a fraction of packets
    delay_us: DelayUs = 0.0
    jitter_us: DelayUs = 0.0
    loss: LossFraction = 0.0

    @property
    def link_mbit_s(self) -> float:
        """The rate of one of this dimension's links: a fully connected host's share per peer."""
        if self.kind == "fully_connected" and self.size > 2:
            return self.mbit_s / (self.size - 1)
        return self.mbit_s


class DimsShape:
    """``sizes`` and ``kinds`` of a multidim fabric, for a class whose ``dims`` each have a
    ``size`` and a ``kind`` (a fabric spec, a preset)."""

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)  # type: ignore[attr-defined]

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(d.kind for d in self.dims)  # type: ignore[attr-defined]


class MultidimSpec(DimsShape, _Links):
    kind: Literal["multidim"]
    dims: Annotated[list[DimSpec], Field(min_length=1, max_length=8)]

    @property
    def num_hosts(self) -> int:
        return math.prod(self.sizes)

    @property
    def num_switches(self) -> int:
        return sum(
            self.num_hosts // d.size for d in self.dims if d.kind == "switch" and d.size > 1
        )

    @model_validator(mode="after")
    def _fits(self, info: ValidationInfo) -> MultidimSpec:
        _check_size(self.num_hosts, self.num_switches, info)
        self._check_links()
        return self


FabricSpec = Annotated[
    LeafSpineSpec | OcsLeafSpineSpec | MultidimSpec, Field(discriminator="kind")
]


class FabricFile(_Strict):
    """A file holding only a fabric (what `calibrate` and `topo` read), with its rates' scale."""

    fabric: FabricSpec
    rate_scale: RateScale = UNSCALED


def scaled_fabric(fabric: LeafSpineSpec | OcsLeafSpineSpec | MultidimSpec, rate_scale: float
                  ) -> LeafSpineSpec | OcsLeafSpineSpec | MultidimSpec:
    """``fabric`` with every rate at ``rate_scale`` of its value and every delay and jitter at
    its value ÷ ``rate_scale``: the fabric as emulated."""
    if rate_scale == UNSCALED:
        return fabric

    def slower(obj: BaseModel, fields: tuple[str, ...]) -> dict[str, Any]:
        return {f: emulated_delay_us(getattr(obj, f), rate_scale) for f in fields
                if getattr(obj, f) is not None}

    links = [o.model_copy(update=slower(o, ("delay_us", "jitter_us"))) for o in fabric.links]
    if isinstance(fabric, MultidimSpec):
        dims = [d.model_copy(update={"mbit_s": emulated_rate(d.mbit_s, rate_scale),
                                     **slower(d, ("delay_us", "jitter_us"))})
                for d in fabric.dims]
        return fabric.model_copy(update={"dims": dims, "links": links})
    return fabric.model_copy(update={**{f: emulated_rate(getattr(fabric, f), rate_scale)
                                        for f in RATE_FIELDS},
                                     **slower(fabric, DELAY_FIELDS), "links": links})


def _check_size(hosts: int, switches: int, info: ValidationInfo) -> None:
    if not (info.context or {}).get("shaped", True):  # the simulator's: a plan only
        if hosts > MAX_SIM_HOSTS:
            raise ValueError(f"{hosts} hosts is more than the simulator plans (at most "
                             f"{MAX_SIM_HOSTS})")
        return
    if hosts > MAX_HOSTS:
        raise ValueError(f"{hosts} hosts is more than this machine carries (at most "
                         f"{MAX_HOSTS}); simulate it (--backend sim)")
    if switches > MAX_SWITCHES:
        raise ValueError(
            f"{switches} switches is more than this machine carries (at most {MAX_SWITCHES})"
        )


def _field_path(loc: tuple[Any, ...]) -> str:
    # pydantic puts the discriminator value in the path (fabric.leaf_spine.leaves): drop it.
    tags = ("leaf_spine", "ocs_leaf_spine", "multidim", "allreduce", "dnn")
    parts = [str(p) for p in loc if p not in tags]
    return ".".join(parts) or "(top level)"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type holds (through Optional, unions, lists, dicts and
    Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _tagged(model: type[BaseModel], tag: str) -> bool:
    """Whether one of ``model``'s fields is the literal ``tag`` (a union member's ``kind``)."""
    return any(get_origin(f.annotation) is Literal and tag in get_args(f.annotation)
               for f in model.model_fields.values())


def known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the mapping at ``loc[:-1]`` of a ``model`` document may hold (the field
    path an error names), or none if the path leads to no model."""
    models = [model]
    for part in loc[:-1]:
        if isinstance(part, int):
            continue  # a list's item: the same models
        fields = [m.model_fields[part] for m in models if part in m.model_fields]
        if fields:
            models = [sub for f in fields for sub in _models_in(f.annotation)]
        else:  # a discriminated union's tag: the member it names
            models = [m for m in models if _tagged(m, str(part))]
    return sorted({f.alias or name for m in models for name, f in m.model_fields.items()})


def _unknown_key(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> str:
    """"unknown key", and the closest key the mapping may hold if one is close."""
    if model is None or not loc:
        return "unknown key"
    close = difflib.get_close_matches(str(loc[-1]), known_keys(model, loc), n=1)
    return f"unknown key; did you mean {close[0]}?" if close else "unknown key"


def _explain(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One sentence per mistake, each naming the field path (an unknown key of ``model``'s
    also the known one closest to it)."""
    messages = []
    for err in exc.errors():
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = _unknown_key(model, err["loc"])
        elif err["type"] == "string_pattern_mismatch":  # the names of runs, jobs, variants
            msg = (f"{err['input']!r} is not a name: use 1 to 40 letters, digits, '.', '_' or "
                   "'-', starting with a letter or digit")
        elif err["type"] == "union_tag_invalid":
            msg = "kind must be one of leaf_spine, ocs_leaf_spine, multidim"
        elif err["loc"] and err["loc"][-1] == "rate_scale":
            msg = (f"{msg} (rate_scale is the emulated rate ÷ the real rate, in (0, 1]: 0.001 "
                   "emulates 100 Gbit/s at 100 Mbit/s)")
        # a whole-model check names its own field in its message
        messages.append(f"{_field_path(err['loc'])}: {msg}" if err["loc"] else msg)
    return "; ".join(messages)


def validate(model: type[BaseModel], data: Any, source: str = "spec",
             shaped: bool = True) -> Any:
    """Validate ``data`` against ``model``; raise SpecError with every mistake named.
    ``shaped`` False: the links are simulated, not shaped, so no rate is too fast."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping at the top level")
    try:
        return model.model_validate(data, context={"rate_scale": _rate_scale(data),
                                                   "shaped": shaped})
    except ValidationError as exc:
        raise SpecError(f"{source}: {_explain(exc, model)}") from None


def _rate_scale(data: dict) -> float | None:
    """The ``rate_scale`` the rates of ``data`` are checked at: None when it is invalid (its
    own error names it; the rates are then not judged against a wrong scale)."""
    scale = data.get("rate_scale", UNSCALED)
    valid = isinstance(scale, int | float) and not isinstance(scale, bool) and 0 < scale <= 1
    return float(scale) if valid else None


class _Refused(Exception):
    """What :class:`_SpecLoader` refuses, with the line it is on."""

    def __init__(self, what: str, line: int) -> None:
        super().__init__(what)
        self.what, self.line = what, line


class _SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader with nesting at most :data:`~testbed.core.limits.MAX_YAML_DEPTH`
    deep and documents of at most :data:`~testbed.core.limits.MAX_YAML_NODES` nodes once every
    alias is expanded (one line of nested aliases can stand for a billion)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _Refused(f"nests lists or mappings more than {MAX_YAML_DEPTH} deep "
                               "(MAX_YAML_DEPTH)", self.peek_event().start_mark.line)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        if _expanded_nodes(node, {}) > MAX_YAML_NODES:
            raise _Refused(f"expands into more than {MAX_YAML_NODES:,} values once its aliases "
                           "(*name) are expanded (MAX_YAML_NODES)", node.start_mark.line)
        return node


def _expanded_nodes(node: Any, seen: dict[int, int]) -> int:
    """How many nodes ``node`` stands for with every alias expanded (counted once per node
    object, so a thousand aliases of one anchor cost one walk); a node that contains itself
    counts as too many."""
    key = id(node)
    if key in seen:
        return seen[key]
    seen[key] = MAX_YAML_NODES + 1  # while it is being counted: a cycle is too many
    if isinstance(node, yaml.SequenceNode):
        total = 1 + sum(_expanded_nodes(c, seen) for c in node.value)
    elif isinstance(node, yaml.MappingNode):
        total = 1 + sum(_expanded_nodes(k, seen) + _expanded_nodes(v, seen)
                        for k, v in node.value)
    else:
        total = 1
    seen[key] = total
    return total


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file (at most :data:`~testbed.core.limits.MAX_SPEC_BYTES`, bounded nesting
    and alias expansion), turning I/O and syntax problems into one sentence."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SPEC_BYTES + 1)
        if len(raw) > MAX_SPEC_BYTES:
            raise SpecError(f"{path} is larger than {MAX_SPEC_BYTES // 1024**2} MiB "
                            "(MAX_SPEC_BYTES): not a spec")
        text = raw.decode("utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read spec {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path} is not UTF-8 text (byte {exc.start} is "
                        f"{exc.object[exc.start:exc.start + 1]!r})") from None
    try:
        return yaml.load(text, Loader=_SpecLoader)  # a SafeLoader
    except _Refused as exc:
        raise SpecError(f"{path} {exc.what} (line {exc.line + 1})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(f"{path} is not valid YAML{where}") from None
    except (ValueError, RecursionError):  # e.g. an integer of over 4300 digits
        raise SpecError(f"{path} holds a value fabriclab cannot read (such as a number "
                        "thousands of digits long)") from None


def load_fabric_file(path: str | Path) -> FabricFile:
    """The validated ``fabric:`` block and top-level ``rate_scale`` of a YAML file: a fabric
    file, or any file holding one (an experiment spec); its other keys are not checked here."""
    from testbed.core.presets import expand_preset  # presets import nothing of this module

    data = expand_preset(load_yaml(path), str(path))
    if isinstance(data, dict) and "fabric" in data:
        data = {k: data[k] for k in ("fabric", "rate_scale") if k in data}
    return validate(FabricFile, data, source=str(path))


def load_fabric(path: str | Path) -> LeafSpineSpec | OcsLeafSpineSpec | MultidimSpec:
    """The validated ``fabric:`` block of a YAML file (its real rates: see
    :func:`load_fabric_file` for the scale they are emulated at)."""
    return load_fabric_file(path).fabric


def parse_fabric(data: dict) -> LeafSpineSpec | OcsLeafSpineSpec | MultidimSpec:
    """Validate an in-memory ``{'fabric': {...}}`` mapping."""
    return validate(FabricFile, data).fabric


def one_switch_fabric(hosts: int, mbit_s: float,
                      kind: Literal["leaf_spine", "multidim"] = "leaf_spine") -> dict[str, Any]:
    """The ``fabric:`` block of ``hosts`` hosts on one switch, every link at ``mbit_s``: a
    leaf-spine fabric of one leaf (its one spine carries none of their traffic), or with
    ``kind="multidim"`` one switch dimension (the switch alone)."""
    if kind == "multidim":
        return {"kind": "multidim", "dims": [{"size": hosts, "mbit_s": mbit_s, "kind": "switch"}]}
    return {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": hosts,
            "host_link_mbit_s": mbit_s, "uplink_mbit_s": mbit_s}
