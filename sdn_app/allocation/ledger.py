"""What a job holds (:class:`Allocation`, :class:`Circuit`), the allocation errors, and the
:class:`Ledger`: who holds each host, (leaf, spine) link and OCS port of a cluster."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache, partial
from itertools import compress, product, repeat
from typing import Any, NamedTuple, overload

from testbed.core.errors import FabricLabError

LeafSlot = tuple[int, int]  # a host of a leaf-spine cluster: (leaf, slot on that leaf)
LeafSpineLink = tuple[int, int]  # (leaf, spine)
SpinePort = tuple[int, int, int]  # (ocs, spine, port)


class AllocationRequestError(FabricLabError, ValueError):
    """The request itself is wrong (unknown policy, duplicate id, bad size, ...)."""


class AllocationRefused(FabricLabError):
    """The request is valid but cannot be placed now (or ever, for ``unshapeable``).

    ``reason`` is one of ``"no_hosts"`` (message contains "not enough free hosts"),
    ``"fragmented"`` (enough free hosts, but no isolated virtual Clos exists) and
    ``"unshapeable"`` (no m x n shape of this size fits the cluster at all).

    A ``fragmented`` refusal has a ``cause``: ``"hosts"`` when no m x n shape even finds
    m leaves with n free hosts (no wiring could help), ``"links"`` when such leaves exist
    but no free spine biclique (vclos) or circuit wiring (ocs-vclos) was found: the part
    an OCS layer can fix. Other refusals have ``cause`` ``""``.
    """

    def __init__(self, reason: str, message: str, cause: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.cause = cause


class Circuit(NamedTuple):
    """One OCS circuit; ``end_a`` is ``("leaf", l)``, ``end_b`` a leaf or spine end."""

    ocs: int
    end_a: tuple
    end_b: tuple

    def to_dict(self) -> dict[str, Any]:
        return {"ocs": self.ocs, "a": _end_to_dict(self.end_a), "b": _end_to_dict(self.end_b)}


def _end_to_dict(end: tuple) -> dict[str, Any]:
    if end[0] == "leaf":
        return {"kind": "leaf", "leaf": end[1]}
    return {"kind": "spine", "spine": end[1], "port": end[2]}


# ``Circuit(*fields)`` built in C, without the named tuple's Python-level constructor.
_circuit = partial(tuple.__new__, Circuit)


@lru_cache(maxsize=1 << 16)
def bits(mask: int) -> tuple[int, ...]:
    """The set bits of ``mask`` (OCSes of a leaf, ports of a spine), lowest first
    (remembered: the same port masks recur in every augmenting path)."""
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)


class PortUse(NamedTuple):
    """The OCS ports some circuits hold: bit o of ``leaves[leaf]`` is the leaf's port on OCS
    o, bit p of ``spines[(ocs, spine)]`` the spine's port p on that OCS."""

    leaves: dict[int, int]
    spines: dict[tuple[int, int], int]


def port_use(circuits: Iterable[Circuit]) -> PortUse:
    """The ports ``circuits`` hold (a :class:`BlockCircuits` knows its own); two circuits on
    one port are a bug, caught here."""
    if isinstance(circuits, BlockCircuits):
        return circuits.ports
    leaves: dict[int, int] = {}
    spines: dict[tuple[int, int], int] = {}
    for ocs, *ends in circuits:
        for end in ends:
            held, key, bit = ((leaves, end[1], 1 << ocs) if end[0] == "leaf"
                              else (spines, (ocs, end[1]), 1 << end[2]))
            assert not held.get(key, 0) & bit, (ocs, end)
            held[key] = held.get(key, 0) | bit
    return PortUse(leaves, spines)


class BlockCircuits(Sequence[Circuit]):
    """One circuit per host, host i's (circuit i) from its leaf over OCS ``ocses[i]`` to
    port ``spine_ports[i]`` of spine ``spines[i]``; without ``spine_ports``, each (OCS,
    spine)'s ports in ``ports`` are dealt lowest first in host order. The circuits are built
    only when first read: the simulator books a job's :class:`PortUse` and reads its links
    from :meth:`ends` (a run at the vClos paper's scale holds over a million circuits); the
    emulator's controller reads the circuits. Equal to any sequence of the same circuits."""

    def __init__(self, hosts: Sequence[LeafSlot], ocses: list[int], spines: list[int],
                 ports: PortUse, spine_ports: list[int] | None = None) -> None:
        self._hosts, self._ocses, self._spines = hosts, ocses, spines
        self.ports = ports
        self._spine_ports = spine_ports
        self._built: tuple[Circuit, ...] | None = None

    def ends(self) -> tuple[Sequence[LeafSlot], list[int], list[int], list[int]]:
        """Per circuit, in order: its host, its OCS, its spine and the spine's port."""
        if self._spine_ports is None:
            free = {key: iter(bits(mask)) for key, mask in self.ports.spines.items()}
            self._spine_ports = list(map(next, map(free.__getitem__, zip(
                self._ocses, self._spines, strict=True))))
        return self._hosts, self._ocses, self._spines, self._spine_ports

    def _circuits(self) -> tuple[Circuit, ...]:
        if self._built is None:
            hosts, ocses, spines, spine_ports = self.ends()
            ends = zip(repeat("spine"), spines, spine_ports)
            leaf_ends = [("leaf", leaf) for leaf, _slot in hosts]
            self._built = tuple(map(_circuit, zip(ocses, leaf_ends, ends, strict=True)))
        return self._built

    def __len__(self) -> int:
        return len(self._ocses)

    @overload
    def __getitem__(self, index: int) -> Circuit: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Circuit, ...]: ...
    def __getitem__(self, index):
        return self._circuits()[index]

    def __iter__(self) -> Iterator[Circuit]:
        return iter(self._circuits())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return self._circuits() == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BlockCircuits({self._circuits()!r})"


@dataclass(frozen=True)
class Allocation:
    """What a job got. Treat as read-only (the dict fields are not copied).

    * ``hosts``: ``(leaf, slot)`` pairs, sorted.
    * ``leaves``: leaves holding the job's hosts, sorted.
    * ``spines``: the job's spines in host order (host j on each leaf uses
      ``spines[j]``); empty for ecmp, single-leaf and direct leaf-leaf jobs.
    * ``links``: reserved ``(leaf, spine)`` pairs (empty for ecmp / one leaf / direct).
    * ``circuits``: OCS circuits of an ocs-vclos job, in leaf order then host order (a
      tuple, or a :class:`BlockCircuits` built when first read).
    * ``spine_of``: host -> the spine it uses toward other leaves (cross-leaf
      vclos / ocs-vclos jobs through spines only; empty otherwise).
    * ``circuit_of``: host -> index in ``circuits`` of the circuit carrying its
      cross-leaf traffic (ocs-vclos only; for a direct leaf-leaf job both hosts
      j of the two leaves map to the same circuit j).
    """

    job_id: str
    policy: str
    hosts: tuple[LeafSlot, ...]
    leaves: tuple[int, ...]
    spines: tuple[int, ...] = ()
    links: frozenset[LeafSpineLink] = frozenset()
    circuits: Sequence[Circuit] = ()
    spine_of: dict[LeafSlot, int] = field(default_factory=dict)
    circuit_of: dict[LeafSlot, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.hosts)

    def spine_circuit(self, leaf: int, spine: int) -> Circuit:
        """The first of the job's circuits from ``leaf`` to ``spine`` (the way down to that
        leaf); a KeyError if there is none."""
        return self._circuit_by_ends[(leaf, spine)]

    def spine_circuits(self) -> dict[tuple[int, int], Circuit]:
        """(leaf, spine) -> :meth:`spine_circuit`, for every pair with a circuit to a spine."""
        return {ends: c for ends, c in self._circuit_by_ends.items() if c.end_b[0] == "spine"}

    @cached_property
    def _circuit_by_ends(self) -> dict[tuple[int, int], Circuit]:
        """(leaf of end a, number of end b) -> the first such circuit, indexed once per job:
        a path looks one up per flow, and a job at the paper's scale has thousands."""
        found: dict[tuple[int, int], Circuit] = {}
        for c in self.circuits:
            found.setdefault((c.end_a[1], c.end_b[1]), c)
        return found

    @cached_property
    def kept(self) -> dict[str, Any]:
        """What readers work out of this allocation once and keep with it, by name (a routing
        policy's table of the job's links): the allocation is read-only, so it stays true."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view (lists and string keys only)."""
        return {
            "job_id": self.job_id,
            "policy": self.policy,
            "hosts": [list(h) for h in self.hosts],
            "leaves": list(self.leaves),
            "spines": list(self.spines),
            "links": [list(link) for link in sorted(self.links)],
            "circuits": [c.to_dict() for c in self.circuits],
            "spine_of": [
                {"leaf": leaf, "slot": slot, "spine": spine}
                for (leaf, slot), spine in sorted(self.spine_of.items())
            ],
            "circuit_of": [
                {"leaf": leaf, "slot": slot, "circuit": index}
                for (leaf, slot), index in sorted(self.circuit_of.items())
            ],
        }


def allocation_from_dict(d: dict[str, Any]) -> Allocation:
    """The inverse of ``Allocation.to_dict``."""

    def end(e: dict[str, Any]) -> tuple:
        return ("leaf", e["leaf"]) if e["kind"] == "leaf" else ("spine", e["spine"], e["port"])

    return Allocation(
        job_id=d["job_id"],
        policy=d["policy"],
        hosts=tuple(tuple(h) for h in d["hosts"]),
        leaves=tuple(d["leaves"]),
        spines=tuple(d["spines"]),
        links=frozenset(tuple(lk) for lk in d["links"]),
        circuits=tuple(Circuit(c["ocs"], end(c["a"]), end(c["b"])) for c in d["circuits"]),
        spine_of={(r["leaf"], r["slot"]): r["spine"] for r in d["spine_of"]},
        circuit_of={(r["leaf"], r["slot"]): r["circuit"] for r in d["circuit_of"]},
    )


def clos_allocation(
    job_id: str,
    policy: str,
    slots: dict[int, list[int]],
    spines: list[int],
    ports: dict[tuple[int, int], tuple[int, int]],
) -> Allocation:
    """Build a cross-leaf allocation: host j on each leaf uses ``spines[j]``.

    ``ports`` maps (leaf, j) -> (ocs, spine_port) for OCS jobs (their circuits a
    :class:`BlockCircuits`, leaf by leaf, then host j); empty for vclos.
    """
    leaves = sorted(slots)
    n = len(spines)
    hosts = [(leaf, slot) for leaf in leaves for slot in slots[leaf][:n]]
    host_spines = spines * len(leaves)
    circuits: Sequence[Circuit] = ()
    circuit_of: dict[LeafSlot, int] = {}
    if ports:
        ocses, spine_ports = map(list, zip(*map(ports.__getitem__, product(leaves, range(n))),
                                           strict=True))
        circuits = BlockCircuits(hosts, ocses, host_spines,
                                 _held_ports(leaves, ocses, host_spines, spine_ports), spine_ports)
        circuit_of = dict(zip(hosts, range(len(hosts)), strict=True))
    return Allocation(
        job_id=job_id,
        policy=policy,
        hosts=tuple(sorted(hosts)),
        leaves=tuple(leaves),
        spines=tuple(spines),
        links=frozenset(product(leaves, spines)),
        circuits=circuits,
        spine_of=dict(zip(hosts, host_spines, strict=True)),
        circuit_of=circuit_of,
    )


def _held_ports(leaves: list[int], ocses: list[int], spines: list[int],
                spine_ports: list[int]) -> PortUse:
    """The :class:`PortUse` of circuits leaf by leaf (``len(ocses) // len(leaves)`` each),
    circuit i over OCS ``ocses[i]`` to port ``spine_ports[i]`` of ``spines[i]``; two circuits
    on one port are a bug, caught here (as :func:`port_use` does)."""
    n = len(ocses) // len(leaves)
    by_leaf = {leaf: sum(map((1).__lshift__, ocses[k * n:(k + 1) * n]))
               for k, leaf in enumerate(leaves)}
    by_spine: dict[tuple[int, int], int] = {}
    for key, port in zip(zip(ocses, spines, strict=True), spine_ports, strict=True):
        by_spine[key] = by_spine.get(key, 0) | 1 << port
    assert sum(mask.bit_count() for mask in by_leaf.values()) == len(ocses), "leaf port twice"
    assert sum(mask.bit_count() for mask in by_spine.values()) == len(ocses), "spine port twice"
    return PortUse(by_leaf, by_spine)


def leaves_of(hosts: Iterable[LeafSlot]) -> tuple[int, ...]:
    return tuple(sorted({leaf for leaf, _slot in hosts}))


class Ledger:
    """Hosts, links and OCS ports of one cluster, and the jobs holding them."""

    def __init__(
        self,
        leaves: int,
        spines: int,
        hosts_per_leaf: int,
        ocs_count: int = 0,
        *,
        exclusive_ocs_links: bool = False,
        spine_ports_per_ocs: int = 2,
        gpus_per_server: int = 1,
    ) -> None:
        """``gpus_per_server``: hosts (GPUs) per server, consecutive slots of a leaf; a job
        that crosses leaves takes whole idle servers (1: any free host, as before)."""
        for name, value, low in (
            ("leaves", leaves, 1),
            ("spines", spines, 1),
            ("hosts_per_leaf", hosts_per_leaf, 1),
            ("ocs_count", ocs_count, 0),
            ("spine_ports_per_ocs", spine_ports_per_ocs, 1),
            ("gpus_per_server", gpus_per_server, 1),
        ):
            if not isinstance(value, int) or value < low:
                raise AllocationRequestError(f"{name} must be an integer >= {low}, got {value!r}")
        if hosts_per_leaf % gpus_per_server:
            raise AllocationRequestError(f"gpus_per_server ({gpus_per_server}) must divide "
                                         f"hosts_per_leaf ({hosts_per_leaf})")
        self.gpus_per_server = gpus_per_server
        self.leaves = leaves
        self.spines = spines
        self.hosts_per_leaf = hosts_per_leaf
        self.ocs_count = ocs_count
        self.spine_ports_per_ocs = spine_ports_per_ocs
        self.exclusive_ocs_links = exclusive_ocs_links
        self.jobs: dict[str, Allocation] = {}
        self._host_owner: dict[LeafSlot, str] = {}
        self._free_count = [hosts_per_leaf] * leaves  # free hosts per leaf
        self._slot_free = [bytearray(b"\x01") * hosts_per_leaf for _ in range(leaves)]  # 1: free
        # Busy hosts per server ([leaf][server]), idle OCS ports per leaf (bit o), idle ports
        # per spine and OCS (a count, and bit p of a mask), kept as jobs come and go.
        self._server_busy = [[0] * (hosts_per_leaf // gpus_per_server) for _ in range(leaves)]
        self._leaf_idle_mask = [(1 << ocs_count) - 1] * leaves
        self._spine_idle = [[spine_ports_per_ocs] * ocs_count for _ in range(spines)]
        self._spine_port_mask = [[(1 << spine_ports_per_ocs) - 1] * ocs_count
                                 for _ in range(spines)]
        self._spine_row_changes = [0] * spines  # per spine: how often its port masks changed
        self._link_owner: dict[LeafSpineLink, str] = {}
        # job -> the OCS ports its circuits hold, worked out once when it is committed
        self._held_ports: dict[str, PortUse] = {}

    # ------------------------------------------------------------------- hosts

    @property
    def total_hosts(self) -> int:
        return self.leaves * self.hosts_per_leaf

    def free_hosts(self) -> int:
        """Number of hosts not given to any job."""
        return self.total_hosts - len(self._host_owner)

    def free_slots(self, leaf: int) -> list[int]:
        """Free slots under ``leaf``, lowest first."""
        return list(compress(range(self.hosts_per_leaf), self._slot_free[leaf]))

    def free_count(self, leaf: int) -> int:
        """How many hosts under ``leaf`` are free."""
        return self._free_count[leaf]

    def best_fit_leaf(self, k: int, among: Iterable[int] | None = None) -> int | None:
        """The leaf with the fewest free hosts that still has k free (lowest index on ties)."""
        counts = self._free_count
        fitting = [
            (counts[leaf], leaf)
            for leaf in (range(self.leaves) if among is None else among)
            if counts[leaf] >= k
        ]
        return min(fitting)[1] if fitting else None

    def spread_slots(self, leaf: int) -> list[int]:
        """Free slots of ``leaf`` a job crossing leaves may take, lowest first: every free
        slot, or with servers of several GPUs the slots of wholly idle servers."""
        g = self.gpus_per_server
        if g == 1:
            return self.free_slots(leaf)
        return [server * g + i for server, busy in enumerate(self._server_busy[leaf])
                if not busy for i in range(g)]

    def spread_count(self, leaf: int) -> int:
        """``len(spread_slots(leaf))``."""
        if self.gpus_per_server == 1:
            return self.free_count(leaf)
        return self._server_busy[leaf].count(0) * self.gpus_per_server

    def idle_servers(self) -> list[int]:
        """Wholly idle servers per leaf."""
        return [row.count(0) for row in self._server_busy]

    def leaves_with(self, n: int) -> list[int]:
        """Leaves where a job crossing leaves finds >= n hosts (:meth:`spread_slots`), best
        fit first (fewest, then index)."""
        counts = (self._free_count if self.gpus_per_server == 1
                  else [self.spread_count(leaf) for leaf in range(self.leaves)])
        # a stable sort of leaves in index order: ties stay lowest index first
        return sorted([leaf for leaf, c in enumerate(counts) if c >= n], key=counts.__getitem__)

    def take_slots(self, leaves: Iterable[int], n: int) -> dict[int, list[int]]:
        """The n lowest slots a job crossing leaves may take (:meth:`spread_slots`) of each
        of ``leaves``."""
        return {leaf: self.spread_slots(leaf)[:n] for leaf in leaves}

    def claimable(self, hosts: list[LeafSlot]) -> dict[int, list[int]]:
        """Check that ``hosts`` exist and are free; their slots by leaf."""
        for leaf, slot in hosts:
            if not (0 <= leaf < self.leaves and 0 <= slot < self.hosts_per_leaf):
                raise AllocationRequestError(f"host ({leaf}, {slot}) is not in the cluster")
            if (leaf, slot) in self._host_owner:
                raise AllocationRefused(
                    "busy", f"host ({leaf}, {slot}) is held by job {self._host_owner[(leaf, slot)]}"
                )
        slots: dict[int, list[int]] = {}
        for leaf, slot in hosts:
            slots.setdefault(leaf, []).append(slot)
        return slots

    # ------------------------------------------------------------ spine links

    def link_free(self, leaf: int, spine: int) -> bool:
        """No job holds the (leaf, spine) pair exclusively."""
        return (leaf, spine) not in self._link_owner

    def spines_with_held_links(self) -> set[int]:
        """Spines s for which some job holds a (leaf, s) pair exclusively."""
        return {spine for _leaf, spine in self._link_owner}

    def free_spine_mask(self, leaf: int) -> int:
        """Bit s is set when link (leaf, s) is unreserved."""
        mask = 0
        for s in range(self.spines):
            if (leaf, s) not in self._link_owner:
                mask |= 1 << s
        return mask

    def free_links_of_spine(self, spine: int) -> int:
        return sum((leaf, spine) not in self._link_owner for leaf in range(self.leaves))

    # --------------------------------------------------------------- OCS ports

    def leaf_port_idle(self, ocs: int, leaf: int) -> bool:
        return bool(self._leaf_idle_mask[leaf] >> ocs & 1)

    def spine_port_idle(self, ocs: int, spine: int, port: int) -> bool:
        return bool(self._spine_port_mask[spine][ocs] >> port & 1)

    def idle_ocses(self, leaf: int) -> list[int]:
        """OCSes on which ``leaf``'s port is idle, lowest first."""
        mask = self._leaf_idle_mask[leaf]
        return [o for o in range(self.ocs_count) if mask >> o & 1]

    def idle_spine_ports(self, spine: int) -> list[tuple[int, int]]:
        """``(ocs, port)`` of every idle port of ``spine``."""
        return [(o, p) for o, mask in enumerate(self._spine_port_mask[spine])
                for p in range(self.spine_ports_per_ocs) if mask >> p & 1]

    def idle_ocs_mask(self, leaf: int) -> int:
        """Bit o is set when ``leaf``'s port on OCS o is idle."""
        return self._leaf_idle_mask[leaf]

    def idle_ocs_masks(self) -> list[int]:
        """:meth:`idle_ocs_mask` of every leaf (a copy)."""
        return self._leaf_idle_mask[:]

    def idle_port_count(self, ocs: int, spine: int) -> int:
        """How many of ``spine``'s ports on ``ocs`` are idle."""
        return self._spine_idle[spine][ocs]

    def idle_port_mask(self, ocs: int, spine: int) -> int:
        """Bit p is set when ``spine``'s port p on ``ocs`` is idle."""
        return self._spine_port_mask[spine][ocs]

    def idle_ports_of(self, ocs: int, spine: int) -> list[int]:
        """The idle ports of ``spine`` on ``ocs``, lowest first."""
        return list(bits(self._spine_port_mask[spine][ocs]))

    def lowest_idle_ports(self, counts: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
        """For each ``(ocs, spine): count``, the ``count`` lowest idle ports of ``spine`` on
        ``ocs`` as a mask (bit p: port p); there must be that many."""
        rows, taken = self._spine_port_mask, {}
        for (ocs, spine), count in counts.items():
            idle = rows[spine][ocs]
            if idle.bit_count() == count:  # all of them: the common case
                taken[(ocs, spine)] = idle
                continue
            mask = 0
            for _ in range(count):
                low = idle & -idle
                assert low, (ocs, spine, count)
                mask |= low
                idle ^= low
            taken[(ocs, spine)] = mask
        return taken

    def idle_port_masks(self) -> list[list[int]]:
        """``[spine][ocs]``: :meth:`idle_port_mask` of every spine and OCS (a copy)."""
        return [row[:] for row in self._spine_port_mask]

    def idle_port_row(self, spine: int) -> list[int]:
        """``[ocs]``: :meth:`idle_port_mask` of ``spine`` (a copy)."""
        return self._spine_port_mask[spine][:]

    def port_row_changes(self) -> list[int]:
        """Per spine, how many times its idle port masks changed (a copy): a reader that
        kept the counts it saw reads again only the spines whose count moved."""
        return self._spine_row_changes[:]

    def idle_spine_counts(self) -> list[list[int]]:
        """``[spine][ocs]``: how many of the spine's ports on that OCS are idle (a copy)."""
        return [row[:] for row in self._spine_idle]

    def busy_spine_ports(self) -> list[int]:
        """How many of each spine's OCS ports are held."""
        total = self.ocs_count * self.spine_ports_per_ocs
        return [total - sum(row) for row in self._spine_idle]

    # --------------------------------------------------------------- jobs

    def is_empty(self) -> bool:
        """True when no job, host, link or OCS port is in use."""
        full = self.ocs_count * self.spine_ports_per_ocs
        return not (self.jobs or self._host_owner or self._link_owner) and all(
            mask == (1 << self.ocs_count) - 1 for mask in self._leaf_idle_mask
        ) and all(sum(row) == full for row in self._spine_idle)

    def adopt(self, allocation: Allocation) -> None:
        """Take back a job that was placed before (a restarted controller reloading its state)."""
        if allocation.job_id in self.jobs:
            raise AllocationRequestError(f"job id {allocation.job_id!r} is already running")
        busy = [h for h in allocation.hosts if h in self._host_owner]
        if busy:
            raise AllocationRefused("busy", f"host {busy[0]} is held by another job")
        self.commit(allocation)

    def release(self, job_id: str) -> Allocation:
        """Free everything held by ``job_id`` and return its allocation."""
        if job_id not in self.jobs:
            raise AllocationRequestError(f"no running job with id {job_id!r}")
        allocation = self.jobs.pop(job_id)
        self._book_hosts(allocation.hosts, job_id, -1)
        for link in self._exclusive_links(allocation):
            del self._link_owner[link]
        self._book_ports(self._held_ports.pop(job_id), -1)
        return allocation

    def commit(self, allocation: Allocation) -> None:
        """Record that ``allocation``'s job holds its hosts, links and ports."""
        job_id = allocation.job_id
        self._book_hosts(allocation.hosts, job_id, +1)
        for link in self._exclusive_links(allocation):
            assert link not in self._link_owner, link
            self._link_owner[link] = job_id
        held = self._held_ports[job_id] = port_use(allocation.circuits)
        self._book_ports(held, +1)
        self.jobs[job_id] = allocation

    def _book_hosts(self, hosts: Iterable[LeafSlot], job_id: str, step: int) -> None:
        """Give ``hosts`` to ``job_id`` (``step`` +1) or free them (-1)."""
        owner, free, busy, g = (self._host_owner, self._free_count, self._server_busy,
                                self.gpus_per_server)
        slot_free = self._slot_free
        for host in hosts:
            if step > 0:
                assert host not in owner, host
                owner[host] = job_id
            else:
                del owner[host]
            free[host[0]] -= step
            slot_free[host[0]][host[1]] = step < 0
            busy[host[0]][host[1] // g] += step

    def _book_ports(self, ports: PortUse, step: int) -> None:
        """Hold ``ports`` (``step`` +1) or set them idle again (-1): their bits flip, so
        holding a held port (or freeing an idle one) is caught."""
        leaf_mask, port_mask, idle = self._leaf_idle_mask, self._spine_port_mask, self._spine_idle
        for leaf, mask in ports.leaves.items():
            assert leaf_mask[leaf] & mask == (mask if step > 0 else 0), (leaf, mask)
            leaf_mask[leaf] ^= mask
        changes = self._spine_row_changes
        for (ocs, spine), mask in ports.spines.items():
            row = port_mask[spine]
            assert row[ocs] & mask == (mask if step > 0 else 0), (ocs, spine, mask)
            row[ocs] ^= mask
            idle[spine][ocs] -= step * mask.bit_count()
            changes[spine] += 1

    def _exclusive_links(self, allocation: Allocation) -> frozenset[LeafSpineLink]:
        """The (leaf, spine) pairs no other job may use while this one runs (a vClos job's
        links; an OCS job's only under ``exclusive_ocs_links``). Decided by the allocation's
        shape, not its policy name, so a policy that places as vclos does gets the same."""
        if not allocation.circuits or self.exclusive_ocs_links:
            return allocation.links
        return frozenset()

