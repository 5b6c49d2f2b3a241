"""The built fabric as plain data: every host, NIC, switch and link, with deterministic names,
ports, dpids, IPs and MACs. Pure Python (no Mininet): the Mininet ``Topo``, the controller, the
sampler and the tests all read this one plan, and it round-trips through JSON.

Conventions
- Hosts are ``h<i>``. Leaf-spine host i sits on leaf i // hosts_per_leaf at slot i % hosts_per_leaf.
  Multidim host ids are mixed-radix with dimension 0 fastest.
- Host ports count from 0 (``h3-eth0``); switch ports from 1 (OpenFlow has no port 0).
- Leaf-spine: leaf port 1+slot goes to its host, port 1+hosts_per_leaf+s to spine s (or to OCS s
  in the OCS fabric); spine port 1+l to leaf l. OCS o: port 1+l to leaf l, port 1+L+2s+p to port p
  of spine s; spine s port 1+2o+p goes to OCS o (``leaf_uplink_port``, ``ocs_leaf_port``,
  ``ocs_spine_port``, ``spine_ocs_port``).
- Default OCS wiring (``default_circuit``): leaf l meets spine s on OCS (l + s) mod ocs_count,
  at port (l // ocs_count) mod 2 of the spine; with fewer OCSes than spines, leaf 2q + r meets
  spine (q + o) mod spines on OCS o at port r. What the fabric holds without a controller, and
  what the allocator's ``conservative`` and ``augment`` rewirings start from.
- Multidim dimension d uses subnet 10.(d+1).0.0/16; leaf-spine uses 10.0.0.0/16. Host i's address
  in a subnet ends in i+1. A ``switch`` dimension joins each group through switch ``d<d>s<g>``
  (member with coordinate k on port k+1). A ``ring`` dimension of size n >= 3 gives each host two
  NICs, ``next`` and ``prev``, with the same address; size 2 needs one link; size 1 none.
  A ``fully_connected`` dimension of size n >= 2 gives each host one NIC per peer, side
  ``peer<k>`` toward the peer with coordinate k, all with the same address (host routes send
  to each peer over its own link), and one link per pair of peers at ``mbit_s / (n-1)``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from testbed.core.scaling import UNSCALED, real_delay_us
from testbed.core.spec import (
    FabricFile,
    LeafSpineSpec,
    MultidimSpec,
    OcsLeafSpineSpec,
    load_fabric_file,
    one_switch_fabric,
    parse_fabric,
    scaled_fabric,
    validate,
)

if TYPE_CHECKING:
    import networkx as nx

ROLE_CODES = {"leaf": 0x01, "spine": 0x02, "ocs": 0x03, "dim": 0x10}


@dataclass(frozen=True)
class Nic:
    intf: str
    port: int
    ip: str
    prefix: int
    mac: str
    dim: int | None = None  # multidim dimension, None on leaf-spine
    side: str = "host"  # "host", "next"/"prev" for ring NICs, "peer<k>" for fully connected


@dataclass(frozen=True)
class Host:
    name: str
    index: int
    nics: tuple[Nic, ...]
    coords: tuple[int, ...] = ()
    leaf: int | None = None
    slot: int | None = None

    def nic(self, dim: int | None = None, side: str | None = None) -> Nic:
        for n in self.nics:
            if n.dim == dim and (side is None or n.side == side):
                return n
        raise KeyError(f"{self.name} has no NIC for dimension {dim}")

    def ip(self, dim: int | None = None) -> str:
        return self.nic(dim).ip

    def nic_on_port(self, port: int) -> Nic:
        """The NIC cabled to this host's ``port``."""
        return next(n for n in self.nics if n.port == port)


@dataclass(frozen=True)
class Switch:
    name: str
    dpid: int
    role: str  # leaf | spine | ocs | dim
    index: int
    dim: int | None = None

    @property
    def dpid_hex(self) -> str:
        return f"{self.dpid:016x}"


@dataclass(frozen=True)
class Link:
    a: str
    a_port: int
    b: str
    b_port: int
    mbit_s: float
    kind: str  # host | uplink | ocs-leaf | ocs-spine | dim | ring | fc
    dim: int | None = None
    # One-way propagation delay and jitter in µs as emulated (the spec's ÷ rate_scale, as
    # mbit_s is the spec's × rate_scale), the spec's real values, and the fraction of packets
    # lost (the same in both): its link class's, or a ``links:`` override's.
    delay_us: float = 0.0
    jitter_us: float = 0.0
    loss: float = 0.0
    delay_real_us: float = 0.0
    jitter_real_us: float = 0.0

    @property
    def impaired(self) -> bool:
        """Whether the link delays, jitters or loses anything (else a perfect wire)."""
        return bool(self.delay_us or self.jitter_us or self.loss)

    @property
    def a_intf(self) -> str:
        return f"{self.a}-eth{self.a_port}"

    @property
    def b_intf(self) -> str:
        return f"{self.b}-eth{self.b_port}"

    @property
    def name(self) -> str:
        return f"{self.a}:{self.a_port}-{self.b}:{self.b_port}"


@dataclass(frozen=True)
class FabricPlan:
    """The fabric as emulated: ``spec`` and every link carry the emulated rates, the spec's
    real rates × ``rate_scale`` (:mod:`testbed.core.scaling`)."""

    kind: str
    spec: LeafSpineSpec | OcsLeafSpineSpec | MultidimSpec  # the validated spec, as emulated
    hosts: tuple[Host, ...]
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]
    rate_scale: float = UNSCALED
    _by_name: dict[str, Host | Switch] = field(default_factory=dict, init=False, compare=False,
                                               repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({h.name: h for h in self.hosts})
        self._by_name.update({s.name: s for s in self.switches})

    def node(self, name: str) -> Host | Switch:
        return self._by_name[name]

    def host_at(self, leaf: int, slot: int) -> Host:
        """The host in ``slot`` of ``leaf`` on a leaf-spine fabric (hosts are numbered leaf
        by leaf: host i sits on leaf i // hosts_per_leaf)."""
        assert not isinstance(self.spec, MultidimSpec), "host_at is for leaf-spine fabrics"
        return self.hosts[leaf * self.spec.hosts_per_leaf + slot]

    def is_host(self, name: str) -> bool:
        return isinstance(self._by_name.get(name), Host)

    def switches_with_role(self, role: str) -> list[Switch]:
        return [s for s in self.switches if s.role == role]

    def link_between(self, a: str, b: str) -> list[Link]:
        return [lk for lk in self.links if {lk.a, lk.b} == {a, b}]

    def graph(self) -> nx.MultiGraph:
        """Nodes are host/switch names; one edge per link, keyed by the link's name."""
        import networkx as nx  # 0.1 s to import: only for the callers that want a graph

        g = nx.MultiGraph()
        g.add_nodes_from((h.name, {"kind": "host"}) for h in self.hosts)
        g.add_nodes_from((s.name, {"kind": s.role}) for s in self.switches)
        for lk in self.links:
            g.add_edge(lk.a, lk.b, key=lk.name, link=lk)
        return g

    def switch_graph(self) -> nx.MultiGraph:
        """:meth:`graph` of the switches alone: the links between them."""
        return self.graph().subgraph(s.name for s in self.switches)

    def loop_free(self) -> bool:
        """Whether the switches form no loop (two links between the same two switches make
        one), so that every pair of hosts has a single path: what destination forwarding
        can route."""
        import networkx as nx

        return nx.is_forest(self.switch_graph())

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rate_scale": self.rate_scale,
            "spec": self.spec.model_dump(),
            "switches": [asdict(s) | {"dpid_hex": s.dpid_hex} for s in self.switches],
            "hosts": [asdict(h) for h in self.hosts],
            "links": [asdict(lk) | {"a_intf": lk.a_intf, "b_intf": lk.b_intf}
                      for lk in self.links],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FabricPlan:
        hosts = tuple(
            Host(
                name=h["name"], index=h["index"], coords=tuple(h["coords"]),
                leaf=h["leaf"], slot=h["slot"], nics=tuple(Nic(**n) for n in h["nics"]),
            )
            for h in data["hosts"]
        )
        switches = tuple(
            Switch(**{k: v for k, v in s.items() if k != "dpid_hex"}) for s in data["switches"]
        )
        links = tuple(
            Link(**{k: v for k, v in lk.items() if k not in ("a_intf", "b_intf")})
            for lk in data["links"]
        )
        # a recorded plan (a simulated one may be past what this machine shapes): not judged
        spec = validate(FabricFile, {"fabric": data["spec"]}, shaped=False).fabric
        return cls(data["kind"], spec, hosts, switches, links,
                   float(data.get("rate_scale", UNSCALED)))

    @classmethod
    def from_json(cls, text: str) -> FabricPlan:
        return cls.from_dict(json.loads(text))


# -- leaf-spine port numbering and the default OCS wiring ---------------------------------------

SPINE_PORTS_PER_OCS = 2  # every spine of the OCS fabric has two ports on every OCS


def leaf_host_port(slot: int) -> int:
    """A leaf's port to its host in ``slot``."""
    return 1 + slot


def leaf_uplink_port(hosts_per_leaf: int, index: int) -> int:
    """A leaf's port to spine ``index`` (leaf-spine) or to OCS ``index`` (OCS fabric)."""
    return 1 + hosts_per_leaf + index


def spine_ocs_port(ocs: int, port: int) -> int:
    """A spine's port ``port`` (0 or 1) toward OCS ``ocs``."""
    return 1 + SPINE_PORTS_PER_OCS * ocs + port


def ocs_leaf_port(leaf: int) -> int:
    """An OCS's port to ``leaf`` (the same on every OCS)."""
    return 1 + leaf


def ocs_spine_port(leaves: int, spine: int, port: int) -> int:
    """An OCS's port to port ``port`` of ``spine``, on a fabric of ``leaves`` leaves."""
    return 1 + leaves + SPINE_PORTS_PER_OCS * spine + port


def default_circuit(
    leaf: int, spine: int, ocs_count: int, spine_ports: int = SPINE_PORTS_PER_OCS,
    spines: int = 0,
) -> tuple[int, int] | None:
    """``(ocs, spine port)`` of the default circuit between ``leaf`` and ``spine``, or None
    when the pair has none.

    With at least one OCS per spine (or ``spines`` not given): OCS ``(leaf + spine) %
    ocs_count``, port ``(leaf // ocs_count) % spine_ports``; then, with ``ocs_count ==
    spines`` and ``leaves <= spine_ports * ocs_count``, the default circuits of all (leaf,
    spine) pairs form the electrical leaf-spine fabric (see ``default_wiring``).

    With fewer OCSes than spines (``0 < ocs_count < spines``) a leaf has fewer ports than
    there are spines, so it reaches ``ocs_count`` of them: leaf ``spine_ports * q + r`` meets
    spine ``(q + o) % spines`` on OCS o at port r. Each leaf port then carries one default
    circuit, and with ``leaves <= spine_ports * spines`` each spine port is the default of one
    leaf (the formula above would give one spine port to several leaves and one leaf port
    to several spines).
    """
    if 0 < ocs_count < spines:
        q, r = divmod(leaf, spine_ports)
        ocs = (spine - q) % spines
        return (ocs, r) if ocs < ocs_count else None
    return (leaf + spine) % ocs_count, (leaf // ocs_count) % spine_ports


def default_circuit_leaves(
    ocs: int, spine: int, port: int, leaves: int, ocs_count: int,
    spine_ports: int = SPINE_PORTS_PER_OCS, spines: int = 0,
) -> list[int]:
    """The leaves whose default circuit to ``spine`` is ``(ocs, port)``, lowest first (the
    inverse of ``default_circuit``, computed directly)."""
    if 0 < ocs_count < spines:
        if ocs >= ocs_count or port >= spine_ports:
            return []
        first = (spine - ocs) % spines
        return [q * spine_ports + port for q in range(first, -(-leaves // spine_ports), spines)
                if q * spine_ports + port < leaves]
    return [
        leaf for leaf in range((ocs - spine) % ocs_count, leaves, ocs_count)
        if default_circuit(leaf, spine, ocs_count, spine_ports) == (ocs, port)
    ]


def default_wiring(
    leaves: int, spines: int, ocs_count: int, spine_ports: int = SPINE_PORTS_PER_OCS
) -> list[tuple[int, int, int, int]]:
    """The default circuits of a whole OCS fabric, as ``(ocs, leaf, spine, spine port)``
    sorted by OCS then leaf.

    Pair by pair in (leaf, spine) order, each pair's ``default_circuit``, on another port of
    the spine on that OCS when the default port is taken, and left out when the leaf's port on
    that OCS or every port of the spine there is taken. Nothing is left out when
    ``spines <= ocs_count`` and ``leaves <= spine_ports * ocs_count``: then every leaf reaches
    every spine. With fewer OCSes than spines a leaf reaches at most ``ocs_count`` spines.
    """
    leaf_taken: set[tuple[int, int]] = set()
    spine_taken: set[tuple[int, int, int]] = set()
    out = []
    for leaf, spine in itertools.product(range(leaves), range(spines)):
        found = default_circuit(leaf, spine, ocs_count, spine_ports, spines)
        if found is None:
            continue
        ocs, first = found
        if (ocs, leaf) in leaf_taken:
            continue
        ports = [first, *(p for p in range(spine_ports) if p != first)]
        port = next((p for p in ports if (ocs, spine, p) not in spine_taken), None)
        if port is None:
            continue
        leaf_taken.add((ocs, leaf))
        spine_taken.add((ocs, spine, port))
        out.append((ocs, leaf, spine, port))
    return sorted(out)


def host_address(subnet: int, index: int) -> str:
    """Host ``index`` in 10.<subnet>.0.0/16 (addresses start at .0.1)."""
    n = index + 1
    return f"10.{subnet}.{n >> 8}.{n & 0xFF}"


def host_mac(group: int, index: int, slot: int = 0) -> str:
    """A host NIC's MAC: ``group`` (dimension, ring side), ``slot`` (fully connected peer)."""
    n = index + 1
    return f"02:00:{slot:02x}:{group:02x}:{n >> 8:02x}:{n & 0xFF:02x}"


FC_GROUP = 0x40  # a fully connected dimension's NICs: MAC group FC_GROUP | dim


def fc_side(peer_coord: int) -> str:
    """The side name of a host's NIC toward the peer with coordinate ``peer_coord``."""
    return f"peer{peer_coord}"


def _dpid(role: str, index: int, dim: int = 0) -> int:
    return (ROLE_CODES[role] + dim) << 40 | (index + 1)


def build_plan(spec: LeafSpineSpec | OcsLeafSpineSpec | MultidimSpec,
               rate_scale: float = UNSCALED) -> FabricPlan:
    """The deterministic plan of the fabric a spec describes, its rates (real when
    ``rate_scale`` is given) emulated at rate × ``rate_scale``, its delays and jitters at
    delay ÷ ``rate_scale``, each link with its class's or its override's values."""
    emulated = scaled_fabric(spec, rate_scale)
    plan = _multidim(emulated) if isinstance(emulated, MultidimSpec) else _leaf_spine(emulated)
    if _has_impairments(emulated):
        plan = dataclasses.replace(plan, links=_impaired_links(plan.links, emulated, rate_scale))
    return dataclasses.replace(plan, rate_scale=rate_scale) if rate_scale != UNSCALED else plan


# -- link delay, jitter and loss ----------------------------------------------------------------

IMPAIRMENTS = ("delay_us", "jitter_us", "loss")  # a link's (and an override's) fields


def _has_impairments(spec: LeafSpineSpec | OcsLeafSpineSpec | MultidimSpec) -> bool:
    if spec.links:
        return True
    if isinstance(spec, MultidimSpec):
        return any(getattr(d, f) for d in spec.dims for f in IMPAIRMENTS)
    return any(getattr(spec, f) for f in ("host_link_delay_us", "uplink_delay_us",
                                          "host_link_jitter_us", "uplink_jitter_us",
                                          "host_link_loss", "uplink_loss"))


def class_impairments(spec: LeafSpineSpec | OcsLeafSpineSpec | MultidimSpec, link: Link
                      ) -> dict[str, float]:
    """The delay, jitter (µs) and loss of ``link``'s class in ``spec``: a host link's, an
    uplink's (leaf-spine, leaf-OCS, spine-OCS) or its dimension's."""
    if isinstance(spec, MultidimSpec):
        d = spec.dims[link.dim or 0]
        return {f: getattr(d, f) for f in IMPAIRMENTS}
    side = "host_link" if link.kind == "host" else "uplink"
    return {"delay_us": getattr(spec, f"{side}_delay_us"),
            "jitter_us": getattr(spec, f"{side}_jitter_us"), "loss": getattr(spec, f"{side}_loss")}


def _impaired_links(links: tuple[Link, ...], emulated: LeafSpineSpec | OcsLeafSpineSpec
                    | MultidimSpec, rate_scale: float) -> tuple[Link, ...]:
    """``links`` with their class's delay, jitter and loss (``emulated``: the spec as
    emulated), then each override's, and the real delay and jitter beside them."""
    overrides = {frozenset(o.between): {f: getattr(o, f) for f in IMPAIRMENTS
                                        if getattr(o, f) is not None}
                 for o in emulated.links}
    out = []
    for lk in links:
        values = class_impairments(emulated, lk) | overrides.get(frozenset((lk.a, lk.b)), {})
        out.append(dataclasses.replace(
            lk, **values, delay_real_us=real_delay_us(values["delay_us"], rate_scale),
            jitter_real_us=real_delay_us(values["jitter_us"], rate_scale)))
    return tuple(out)


def _both_units(delay_us: float, jitter_us: float, loss: float, rate_scale: float
                ) -> dict[str, float]:
    return {"delay_us": delay_us, "delay_real_us": real_delay_us(delay_us, rate_scale),
            "jitter_us": jitter_us, "jitter_real_us": real_delay_us(jitter_us, rate_scale),
            "loss": loss}


def override_error(spec: LeafSpineSpec | OcsLeafSpineSpec | MultidimSpec) -> str | None:
    """One sentence naming the first of ``spec.links`` that names no link of the fabric (or
    one already given); None when every override names a link."""
    plan = _multidim(spec) if isinstance(spec, MultidimSpec) else _leaf_spine(spec)
    nodes = {h.name for h in plan.hosts} | {s.name for s in plan.switches}
    pairs = {frozenset((lk.a, lk.b)) for lk in plan.links}
    seen: dict[frozenset[str], int] = {}
    for i, o in enumerate(spec.links):
        a, b = o.between
        if unknown := next((n for n in (a, b) if n not in nodes), None):
            return (f"links.{i}.between: {unknown} is not a node of this fabric (hosts h0 to "
                    f"h{len(plan.hosts) - 1}, switches such as {plan.switches[0].name})"
                    if plan.switches else
                    f"links.{i}.between: {unknown} is not a host of this fabric (h0 to "
                    f"h{len(plan.hosts) - 1})")
        pair = frozenset((a, b))
        if pair not in pairs:
            return f"links.{i}.between: no link of this fabric joins {a} and {b}"
        if pair in seen:
            return f"links.{i}.between: {a}-{b} is already given by links.{seen[pair]}"
        seen[pair] = i
    return None


def impairment_record(plan: FabricPlan) -> dict[str, dict[str, float]]:
    """What a run records of its links' delays, jitter and loss: per link class (``host``,
    ``uplink``, ``dim<d>``) its values, and by name every link whose values differ from its
    class's (an override), each in both units (``delay_us`` emulated, ``delay_real_us``
    real; jitter alike); empty when every link is a perfect wire."""
    if not any(lk.impaired for lk in plan.links):
        return {}
    out: dict[str, dict[str, float]] = {}
    for lk in plan.links:
        key = (f"dim{lk.dim}" if lk.dim is not None else "host" if lk.kind == "host"
               else "uplink")
        values = _both_units(lk.delay_us, lk.jitter_us, lk.loss, plan.rate_scale)
        if key not in out:
            c = class_impairments(plan.spec, lk)
            out[key] = _both_units(c["delay_us"], c["jitter_us"], c["loss"], plan.rate_scale)
        if out[key] != values:
            out[lk.name] = values
    return out


def one_switch_plan(hosts: int, mbit_s: float,
                    kind: Literal["leaf_spine", "multidim"] = "leaf_spine") -> FabricPlan:
    """The plan of ``hosts`` hosts on one switch, every link at ``mbit_s``
    (:func:`~testbed.core.spec.one_switch_fabric`)."""
    return build_plan(parse_fabric({"fabric": one_switch_fabric(hosts, mbit_s, kind)}))


def load_plan(path: str | Path) -> FabricPlan:
    """The plan of a YAML file's ``fabric:`` block at its top-level ``rate_scale``."""
    f = load_fabric_file(path)
    return build_plan(f.fabric, f.rate_scale)


def _leaf_spine(spec: LeafSpineSpec | OcsLeafSpineSpec) -> FabricPlan:
    L, S, H = spec.leaves, spec.spines, spec.hosts_per_leaf
    ocs = spec.ocs_count if isinstance(spec, OcsLeafSpineSpec) else 0
    hosts, links = [], []
    switches = [Switch(f"leaf{lf}", _dpid("leaf", lf), "leaf", lf) for lf in range(L)]
    switches += [Switch(f"spine{s}", _dpid("spine", s), "spine", s) for s in range(S)]
    switches += [Switch(f"ocs{o}", _dpid("ocs", o), "ocs", o) for o in range(ocs)]
    for lf, j in itertools.product(range(L), range(H)):
        i = lf * H + j
        nic = Nic(f"h{i}-eth0", 0, host_address(0, i), 16, host_mac(0, i))
        hosts.append(Host(f"h{i}", i, (nic,), leaf=lf, slot=j))
        links.append(Link(f"h{i}", 0, f"leaf{lf}", leaf_host_port(j), spec.host_link_mbit_s,
                          "host"))
    if not ocs:
        for lf, s in itertools.product(range(L), range(S)):
            links.append(Link(f"leaf{lf}", leaf_uplink_port(H, s), f"spine{s}", 1 + lf,
                              spec.uplink_mbit_s, "uplink"))
    for o, lf in itertools.product(range(ocs), range(L)):
        links.append(Link(f"leaf{lf}", leaf_uplink_port(H, o), f"ocs{o}", ocs_leaf_port(lf),
                          spec.uplink_mbit_s, "ocs-leaf"))
    for o, s, p in itertools.product(range(ocs), range(S), range(SPINE_PORTS_PER_OCS)):
        links.append(Link(f"spine{s}", spine_ocs_port(o, p), f"ocs{o}", ocs_spine_port(L, s, p),
                          spec.uplink_mbit_s, "ocs-spine"))
    return FabricPlan(spec.kind, spec, tuple(hosts), tuple(switches), tuple(links))


def coords_of(index: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """Mixed-radix coordinates of a host id, dimension 0 fastest."""
    out = []
    for n in sizes:
        out.append(index % n)
        index //= n
    return tuple(out)


def index_of(coords: Sequence[int], sizes: tuple[int, ...]) -> int:
    """The host id of mixed-radix ``coords`` (dimension 0 fastest): :func:`coords_of`'s
    inverse."""
    index, stride = 0, 1
    for c, n in zip(coords, sizes, strict=True):
        index += c * stride
        stride *= n
    return index


def group_of(index: int, dim: int, sizes: tuple[int, ...]) -> int:
    """The group of dimension ``dim`` a host belongs to: its id with coordinate ``dim`` removed."""
    c = list(coords_of(index, sizes))
    del c[dim]
    rest = sizes[:dim] + sizes[dim + 1:]
    return index_of(c, rest)


def dim_peers(index: int, dim: int, sizes: tuple[int, ...]) -> list[int]:
    """Host ids in the dimension-``dim`` group of ``index`` (itself included), by coordinate."""
    c = list(coords_of(index, sizes))
    peers = []
    for k in range(sizes[dim]):
        c[dim] = k
        peers.append(index_of(c, sizes))
    return peers


def ring_neighbours(index: int, dim: int, sizes: tuple[int, ...]) -> tuple[int, int]:
    """(next, prev) host ids around the dimension-``dim`` ring."""
    peers = dim_peers(index, dim, sizes)
    k = coords_of(index, sizes)[dim]
    n = sizes[dim]
    return peers[(k + 1) % n], peers[(k - 1) % n]


def _multidim(spec: MultidimSpec) -> FabricPlan:
    sizes = spec.sizes
    N = spec.num_hosts
    nics: dict[int, list[Nic]] = {i: [] for i in range(N)}
    switches, links = [], []

    def add_nic(i: int, dim: int, side: str, slot: int = 0) -> int:
        port = len(nics[i])
        group = dim | (0x80 if side == "prev" else FC_GROUP if side.startswith("peer") else 0)
        prefix = 16 if side == "host" else 32  # ring/mesh NICs share one address: host routes
        nics[i].append(Nic(f"h{i}-eth{port}", port, host_address(dim + 1, i), prefix,
                           host_mac(group, i, slot), dim, side))
        return port

    for d, dspec in enumerate(spec.dims):
        n = dspec.size
        if n == 1:
            continue
        if dspec.kind == "switch":
            groups = N // n
            for g in range(groups):
                sw = Switch(f"d{d}s{g}", _dpid("dim", g, d), "dim", g, d)
                switches.append(sw)
            for i in range(N):
                port = add_nic(i, d, "host")
                k = coords_of(i, sizes)[d]
                links.append(Link(f"h{i}", port, f"d{d}s{group_of(i, d, sizes)}", k + 1,
                                  dspec.mbit_s, "dim", d))
        elif dspec.kind == "fully_connected":
            for i in range(N):
                me = coords_of(i, sizes)[d]
                for k in range(n):
                    if k != me:
                        add_nic(i, d, fc_side(k), slot=k)
            for i in range(N):
                me = coords_of(i, sizes)[d]
                for j in dim_peers(i, d, sizes):
                    k = coords_of(j, sizes)[d]
                    if i < j:
                        links.append(Link(f"h{i}", _port(nics[i], d, fc_side(k)), f"h{j}",
                                          _port(nics[j], d, fc_side(me)), dspec.link_mbit_s,
                                          "fc", d))
        elif n == 2:
            for i in range(N):
                add_nic(i, d, "host")
            for i in range(N):
                j, _ = ring_neighbours(i, d, sizes)
                if i < j:
                    links.append(Link(f"h{i}", _port(nics[i], d), f"h{j}", _port(nics[j], d),
                                      dspec.mbit_s, "ring", d))
        else:
            for i in range(N):
                add_nic(i, d, "next")
                add_nic(i, d, "prev")
            for i in range(N):
                j, _ = ring_neighbours(i, d, sizes)
                links.append(Link(f"h{i}", _port(nics[i], d, "next"), f"h{j}",
                                  _port(nics[j], d, "prev"), dspec.mbit_s, "ring", d))
    hosts = tuple(Host(f"h{i}", i, tuple(nics[i]), coords=coords_of(i, sizes)) for i in range(N))
    assert len(switches) == spec.num_switches and math.prod(sizes) == N
    return FabricPlan(spec.kind, spec, hosts, tuple(switches), tuple(links))


def _port(nics: list[Nic], dim: int, side: str = "host") -> int:
    return next(n.port for n in nics if n.dim == dim and n.side == side)
