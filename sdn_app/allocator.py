"""Job allocator for a leaf-spine cluster: ECMP, static vClos and OCS-vClos.

Pure Python (no os-ken, no Mininet). Indices are 0-based everywhere.

Vocabulary
----------
* A *host* is ``(leaf, slot)``: slot ``0 .. hosts_per_leaf-1`` under ``leaf``.
* A *link* is ``(leaf, spine)``. With ``ocs_count == 0`` there is one direct link
  between every leaf and every spine. With OCSes the "links" of a job are the
  (leaf, spine) pairs that its circuits realise.
* An *OCS port*: every leaf has one port on every OCS, every spine has
  ``spine_ports_per_ocs`` ports (default two: 0 and 1) on every OCS.
* A *circuit* is a :class:`Circuit` ``(ocs, end_a, end_b)``: ``end_a`` is always
  ``("leaf", leaf)``; ``end_b`` is ``("spine", spine, port)`` for a leaf-spine
  circuit or ``("leaf", other_leaf)`` for a direct leaf-leaf circuit.

Policies
--------
* ``ecmp``: locality placement only (fewest leaves, best fit), no reservation.
* ``vclos``: each job gets an isolated virtual Clos of m leaves x n spines.
  A job of k hosts either fits under one leaf (no uplink used) or is shaped as
  k = m*n with n taken from hosts_per_leaf, hosts_per_leaf//2, ... down to 1
  (n must divide k, 2 <= m <= leaves, n <= spines). For each shape, an exact
  backtracking search looks for m leaves with >= n free hosts and n spines whose
  m*n links are all unreserved (a free biclique). Needs ``ocs_count == 0``.
* ``ocs-vclos``: same host shapes, but links are circuits set up on demand:
  one leaf; else, for m == 2, a direct leaf-leaf circuit per host pair; else
  m leaves x n spines where every (leaf, spine) pair gets a circuit on some OCS
  on which the leaf's port and one of the spine's ports are idle. The
  circuit assignment is solved spine by spine with a bipartite matching
  (networkx); see :meth:`Cluster._wire_spines` for why this part is a heuristic.
  Needs ``ocs_count >= 1``. Circuits of running jobs are never moved. The
  exclusive resources are OCS ports: two jobs may both hold a (leaf, spine)
  pair through circuits on different OCSes, unless the cluster is built with
  ``exclusive_ocs_links=True``. That is ``rewiring="any"`` (the default);
  ``rewiring="conservative"`` first searches, exactly as vclos does, over the
  *default wiring* (leaf l to spine s on OCS (l + s) mod ocs_count: the electrical
  fabric), then tries direct circuits, then rewires only spine ports that no leaf's
  default circuit can use (see :meth:`Cluster._try_ocs_vclos`).

Placement (vclos and ocs-vclos)
-------------------------------
* ``joint`` (default): hosts and network are chosen together: for each shape the search
  walks leaf sets until one has free links (vclos) or a circuit wiring (ocs-vclos).
* ``hosts-first``: a network-oblivious GPU scheduler picks the hosts (the first shape
  whose hosts fit, on the best-fit leaves), and the network must then join exactly those
  leaves, or the job is refused as fragmented by links. This is where the wiring
  flexibility of an OCS layer can matter.

Host j of a cross-leaf job on each leaf (j-th lowest slot the job holds there)
reaches other leaves only through the job's spine j (``spines[j]``), or, for a
direct leaf-leaf job, through ``circuits[j]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import combinations, islice
from typing import Any, NamedTuple

import networkx as nx

from testbed.core.errors import FabricLabError

POLICIES = ("ecmp", "vclos", "ocs-vclos")
PLACEMENTS = ("joint", "hosts-first")
REWIRINGS = ("any", "conservative", "augment")

# How many leaf sets ocs-vclos tries (best fit first) before calling a job fragmented.
MAX_OCS_LEAF_SETS = 64

Host = tuple[int, int]
Link = tuple[int, int]
LeafPort = tuple[int, int]  # (ocs, leaf)
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


@dataclass(frozen=True)
class Allocation:
    """What a job got. Treat as read-only (the dict fields are not copied).

    * ``hosts``: ``(leaf, slot)`` pairs, sorted.
    * ``leaves``: leaves holding the job's hosts, sorted.
    * ``spines``: the job's spines in host order (host j on each leaf uses
      ``spines[j]``); empty for ecmp, single-leaf and direct leaf-leaf jobs.
    * ``links``: reserved ``(leaf, spine)`` pairs (empty for ecmp / one leaf / direct).
    * ``circuits``: OCS circuits of an ocs-vclos job, in leaf order then host order.
    * ``spine_of``: host -> the spine it uses toward other leaves (cross-leaf
      vclos / ocs-vclos jobs through spines only; empty otherwise).
    * ``circuit_of``: host -> index in ``circuits`` of the circuit carrying its
      cross-leaf traffic (ocs-vclos only; for a direct leaf-leaf job both hosts
      j of the two leaves map to the same circuit j).
    """

    job_id: str
    policy: str
    hosts: tuple[Host, ...]
    leaves: tuple[int, ...]
    spines: tuple[int, ...] = ()
    links: frozenset[Link] = frozenset()
    circuits: tuple[Circuit, ...] = ()
    spine_of: dict[Host, int] = field(default_factory=dict)
    circuit_of: dict[Host, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.hosts)

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


class Cluster:
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
        placement: str = "joint",
        rewiring: str = "any",
    ) -> None:
        """``spine_ports_per_ocs``: ports every spine has on every OCS (the emulated OCS
        fabric has two; ``leaves / ocs_count`` gives a spine as many ports as it has leaf
        links in the electrical fabric).

        ``placement``: ``joint`` or ``hosts-first`` (see the module docstring).

        ``rewiring`` (ocs-vclos): ``any`` (direct leaf-leaf circuits for two leaves, else
        circuits on any idle ports) or ``conservative`` (circuits of the default wiring
        first, then direct circuits, then only spine ports that no leaf's default circuit
        can use; see :meth:`Cluster._try_ocs_vclos`).

        ``exclusive_ocs_links``: also forbid two ocs-vclos jobs the same (leaf, spine) pair.

        By default only OCS ports are exclusive in ocs-vclos: two jobs may each hold a
        circuit between leaf l and spine s, on different OCSes (different ports, so
        physically separate paths). With the flag, (leaf, spine) pairs are exclusive as
        in static vclos; then ocs-vclos can only beat vclos with direct leaf-leaf circuits.
        """
        for name, value, low in (
            ("leaves", leaves, 1),
            ("spines", spines, 1),
            ("hosts_per_leaf", hosts_per_leaf, 1),
            ("ocs_count", ocs_count, 0),
            ("spine_ports_per_ocs", spine_ports_per_ocs, 1),
        ):
            if not isinstance(value, int) or value < low:
                raise AllocationRequestError(f"{name} must be an integer >= {low}, got {value!r}")
        self.leaves = leaves
        self.spines = spines
        self.hosts_per_leaf = hosts_per_leaf
        self.ocs_count = ocs_count
        if placement not in PLACEMENTS:
            raise AllocationRequestError(
                f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}"
            )
        if rewiring not in REWIRINGS:
            raise AllocationRequestError(
                f"rewiring must be one of {', '.join(REWIRINGS)}, got {rewiring!r}"
            )
        self.spine_ports_per_ocs = spine_ports_per_ocs
        self.placement = placement
        self.rewiring = rewiring
        self.exclusive_ocs_links = exclusive_ocs_links
        self.jobs: dict[str, Allocation] = {}
        self._host_owner: dict[Host, str] = {}
        self._free_count = [hosts_per_leaf] * leaves  # free hosts per leaf
        self._link_owner: dict[Link, str] = {}
        self._leaf_port_owner: dict[LeafPort, str] = {}
        self._spine_port_owner: dict[SpinePort, str] = {}

    @classmethod
    def for_fabric(cls, spec: Mapping[str, Any]) -> Cluster:
        """The cluster of a leaf-spine or OCS fabric spec (as a dict), with the fabric's
        ``ocs_rewiring``: what the controller and the sim backend both place jobs on."""
        return cls(spec["leaves"], spec["spines"], spec["hosts_per_leaf"],
                   spec.get("ocs_count", 0), rewiring=spec.get("ocs_rewiring", "any"))

    # ----------------------------------------------------------------- queries

    @property
    def total_hosts(self) -> int:
        return self.leaves * self.hosts_per_leaf

    def free_hosts(self) -> int:
        """Number of hosts not given to any job."""
        return self.total_hosts - len(self._host_owner)

    def free_slots(self, leaf: int) -> list[int]:
        """Free slots under ``leaf``, lowest first."""
        return [s for s in range(self.hosts_per_leaf) if (leaf, s) not in self._host_owner]

    def free_count(self, leaf: int) -> int:
        """How many hosts under ``leaf`` are free."""
        return self._free_count[leaf]

    def is_empty(self) -> bool:
        """True when no job, host, link or OCS port is in use."""
        return not (
            self.jobs
            or self._host_owner
            or self._link_owner
            or self._leaf_port_owner
            or self._spine_port_owner
        )

    # ----------------------------------------------------- allocate / release

    def allocate(self, job_id: str, hosts_wanted: int, policy: str,
                 label: str | None = None) -> Allocation:
        """Place a job of ``hosts_wanted`` hosts, or raise :class:`AllocationRefused`.
        ``policy`` is how to place it (one of POLICIES); ``label``, if given, is the routing
        policy recorded in the allocation (a policy that places jobs as ``ecmp`` does)."""
        self._check_request(job_id, hosts_wanted, policy)
        if policy == "ecmp":
            allocation = self._place_ecmp(job_id, hosts_wanted)
        else:
            allocation = self._place_clos(job_id, hosts_wanted, policy)
        if label is not None:
            allocation = replace(allocation, policy=label)
        self._commit(allocation)
        return allocation

    def claim(self, job_id: str, hosts: Iterable[Host], policy: str,
              label: str | None = None) -> Allocation:
        """Give a job exactly these ``(leaf, slot)`` hosts (placements ``ecmp`` and ``vclos``).

        Under vclos the hosts must form an m x n shape (n hosts on each of m leaves); the job
        gets n spines whose links to all m leaves are free, host j of each leaf using spine j.
        """
        wanted = sorted(set(hosts))
        self._check_request(job_id, len(wanted) or 1, policy)
        if not wanted:
            raise AllocationRequestError("hosts must name at least one host")
        for leaf, slot in wanted:
            if not (0 <= leaf < self.leaves and 0 <= slot < self.hosts_per_leaf):
                raise AllocationRequestError(f"host ({leaf}, {slot}) is not in the cluster")
            if (leaf, slot) in self._host_owner:
                raise AllocationRefused(
                    "busy", f"host ({leaf}, {slot}) is held by job {self._host_owner[(leaf, slot)]}"
                )
        slots: dict[int, list[int]] = {}
        for leaf, slot in wanted:
            slots.setdefault(leaf, []).append(slot)
        if policy == "ecmp" or len(slots) == 1:
            allocation = Allocation(job_id, policy, tuple(wanted), tuple(sorted(slots)))
        elif policy == "vclos":
            allocation = self._claim_vclos(job_id, slots)
        else:
            raise AllocationRequestError(
                "explicit hosts work with ecmp and vclos; ask ocs-vclos for hosts_wanted"
            )
        if label is not None:
            allocation = replace(allocation, policy=label)
        self._commit(allocation)
        return allocation

    def _claim_vclos(self, job_id: str, slots: dict[int, list[int]]) -> Allocation:
        sizes = {len(v) for v in slots.values()}
        if len(sizes) != 1:
            raise AllocationRefused(
                "unshapeable", "vclos needs the same number of hosts on every leaf of a job"
            )
        n = sizes.pop()
        free = [s for s in range(self.spines)
                if all((leaf, s) not in self._link_owner for leaf in slots)]
        if len(free) < n:
            raise AllocationRefused(
                "fragmented",
                f"fragmented: {n} spines with free links to leaves {sorted(slots)} are needed, "
                f"{len(free)} exist",
            )
        free.sort(key=lambda s: (self._free_links_of_spine(s), s))
        return _clos_allocation(job_id, "vclos", slots, sorted(free[:n]), {})

    def adopt(self, allocation: Allocation) -> None:
        """Take back a job that was placed before (a restarted controller reloading its state)."""
        if allocation.job_id in self.jobs:
            raise AllocationRequestError(f"job id {allocation.job_id!r} is already running")
        busy = [h for h in allocation.hosts if h in self._host_owner]
        if busy:
            raise AllocationRefused("busy", f"host {busy[0]} is held by another job")
        self._commit(allocation)

    def release(self, job_id: str) -> Allocation:
        """Free everything held by ``job_id`` and return its allocation."""
        if job_id not in self.jobs:
            raise AllocationRequestError(f"no running job with id {job_id!r}")
        allocation = self.jobs.pop(job_id)
        for host in allocation.hosts:
            del self._host_owner[host]
            self._free_count[host[0]] += 1
        for link in self._exclusive_links(allocation):
            del self._link_owner[link]
        for leaf_port in _leaf_ports(allocation.circuits):
            del self._leaf_port_owner[leaf_port]
        for spine_port in _spine_ports(allocation.circuits):
            del self._spine_port_owner[spine_port]
        return allocation

    def _check_request(self, job_id: str, hosts_wanted: int, policy: str) -> None:
        if policy not in POLICIES:
            raise AllocationRequestError(
                f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}"
            )
        if not isinstance(job_id, str) or not job_id:
            raise AllocationRequestError("job id must be a non-empty string")
        if job_id in self.jobs:
            raise AllocationRequestError(f"job id {job_id!r} is already running; release it first")
        if not isinstance(hosts_wanted, int) or isinstance(hosts_wanted, bool) or hosts_wanted < 1:
            raise AllocationRequestError(
                f"hosts_wanted must be an integer >= 1, got {hosts_wanted!r}"
            )
        if policy == "ocs-vclos" and self.ocs_count == 0:
            raise AllocationRequestError(
                "policy ocs-vclos needs a cluster with OCSes (ocs_count >= 1); use vclos"
            )
        if policy == "vclos" and self.ocs_count > 0:
            raise AllocationRequestError(
                "policy vclos needs direct leaf-spine links (ocs_count = 0); use ocs-vclos"
            )

    def _commit(self, allocation: Allocation) -> None:
        job_id = allocation.job_id
        for host in allocation.hosts:
            assert host not in self._host_owner, host
            self._host_owner[host] = job_id
            self._free_count[host[0]] -= 1
        for link in self._exclusive_links(allocation):
            assert link not in self._link_owner, link
            self._link_owner[link] = job_id
        for leaf_port in _leaf_ports(allocation.circuits):
            assert leaf_port not in self._leaf_port_owner, leaf_port
            self._leaf_port_owner[leaf_port] = job_id
        for spine_port in _spine_ports(allocation.circuits):
            assert spine_port not in self._spine_port_owner, spine_port
            self._spine_port_owner[spine_port] = job_id
        self.jobs[job_id] = allocation

    def _exclusive_links(self, allocation: Allocation) -> frozenset[Link]:
        """The (leaf, spine) pairs no other job may use while this one runs (a vClos job's
        links; an OCS job's only under ``exclusive_ocs_links``). Decided by the allocation's
        shape, not its policy name, so a policy that places as vclos does gets the same."""
        if not allocation.circuits or self.exclusive_ocs_links:
            return allocation.links
        return frozenset()

    def _refuse_if_short(self, k: int) -> None:
        if k > self.free_hosts():
            raise AllocationRefused(
                "no_hosts",
                f"not enough free hosts: the job wants {k}, {self.free_hosts()} are free",
            )

    # -------------------------------------------------------------------- ecmp

    def _place_ecmp(self, job_id: str, k: int) -> Allocation:
        """Fewest leaves: the fullest-free leaves, then the best-fit leaf for the rest."""
        self._refuse_if_short(k)
        single = self._best_fit_leaf(k)
        if single is not None:
            return self._single_leaf(job_id, "ecmp", single, k)
        by_free = sorted(range(self.leaves), key=lambda leaf: (-self.free_count(leaf), leaf))
        hosts: list[Host] = []
        for index, leaf in enumerate(by_free):
            needed = k - len(hosts)
            if self.free_count(leaf) >= needed:
                # The last leaf: the one with the fewest free hosts that still covers the rest.
                last = self._best_fit_leaf(needed, among=by_free[index:])
                assert last is not None
                hosts += [(last, s) for s in self.free_slots(last)[:needed]]
                break
            hosts += [(leaf, s) for s in self.free_slots(leaf)]
        return Allocation(job_id, "ecmp", tuple(sorted(hosts)), _leaves_of(hosts))

    # ----------------------------------------------------- vclos and ocs-vclos

    def _place_clos(self, job_id: str, k: int, policy: str) -> Allocation:
        if k > self.total_hosts:
            raise AllocationRefused(
                "no_hosts",
                f"not enough free hosts: the job wants {k}, the cluster has {self.total_hosts}",
            )
        shapes = self.shapes(k, policy)
        if k > self.hosts_per_leaf and not shapes:
            raise AllocationRefused(
                "unshapeable",
                f"a {k}-host job cannot be shaped as m leaves x n hosts on this cluster "
                "(n in hosts_per_leaf, /2, /4, ... 1 must divide k, m <= leaves, "
                "n <= uplinks per leaf); pick another size",
            )
        self._refuse_if_short(k)
        leaf = self._best_fit_leaf(k)
        if leaf is not None:
            return self._single_leaf(job_id, policy, leaf, k)
        allocation = None
        for m, n in shapes:
            leaves = None
            if self.placement == "hosts-first":
                leaves = self._leaves_with(n)[:m]
                if len(leaves) < m:
                    continue
            allocation = (
                self._try_vclos(job_id, m, n, leaves)
                if policy == "vclos"
                else self._try_ocs_vclos(job_id, m, n, leaves)
            )
            if allocation is not None or leaves is not None:
                break
        if allocation is not None:
            return allocation
        if self.hosts_fit(k, policy):
            raise AllocationRefused(
                "fragmented",
                f"fragmented: leaves with enough free hosts for {k} exist, but no isolated set "
                f"of {'spine links' if policy == 'vclos' else 'OCS circuits'} joins them; "
                "retry after a job ends",
                cause="links",
            )
        raise AllocationRefused(
            "fragmented",
            f"fragmented: {self.free_hosts()} hosts are free but no m leaves hold n free hosts "
            f"each for any shape of {k} hosts; retry after a job ends",
            cause="hosts",
        )

    def hosts_fit(self, k: int, policy: str) -> bool:
        """Would some m x n shape of k find m leaves with n free hosts, ignoring links?"""
        free = [self.free_count(leaf) for leaf in range(self.leaves)]
        return any(sum(f >= n for f in free) >= m for m, n in self.shapes(k, policy))

    def shapes(self, k: int, policy: str) -> list[tuple[int, int]]:
        """Cross-leaf shapes ``(m leaves, n hosts per leaf)`` tried for k, largest n first.

        n runs over hosts_per_leaf, hosts_per_leaf // 2, ..., 1 and must divide k,
        with 2 <= m <= leaves. Every leaf needs n uplinks: n <= spines for vclos,
        n <= ocs_count for ocs-vclos. A prime k > hosts_per_leaf gets n = 1.
        """
        uplinks = self.spines if policy == "vclos" else self.ocs_count
        found = []
        n = self.hosts_per_leaf
        while n >= 1:
            m = k // n
            if k % n == 0 and 2 <= m <= self.leaves and n <= uplinks:
                found.append((m, n))
            n //= 2
        return found

    def _single_leaf(self, job_id: str, policy: str, leaf: int, k: int) -> Allocation:
        hosts = tuple((leaf, s) for s in self.free_slots(leaf)[:k])
        return Allocation(job_id, policy, hosts, (leaf,))

    def _best_fit_leaf(self, k: int, among: Iterable[int] | None = None) -> int | None:
        """The leaf with the fewest free hosts that still has k free (lowest index on ties)."""
        fitting = [
            (self.free_count(leaf), leaf)
            for leaf in (range(self.leaves) if among is None else among)
            if self.free_count(leaf) >= k
        ]
        return min(fitting)[1] if fitting else None

    def _leaves_with(self, n: int) -> list[int]:
        """Leaves with >= n free hosts, best fit first (fewest free, then index)."""
        return sorted(
            (leaf for leaf in range(self.leaves) if self.free_count(leaf) >= n),
            key=lambda leaf: (self.free_count(leaf), leaf),
        )

    def _take_slots(self, leaves: Iterable[int], n: int) -> dict[int, list[int]]:
        return {leaf: self.free_slots(leaf)[:n] for leaf in leaves}

    # ------------------------------------------------------------------- vclos

    def _try_vclos(
        self, job_id: str, m: int, n: int, leaves: list[int] | None = None
    ) -> Allocation | None:
        """m leaves x n spines with all links free; ``leaves`` fixes the leaves."""
        if leaves is None:
            found = self.find_free_biclique(m, n)
            if found is None:
                return None
            leaves, spines = found
        else:
            spines = sorted(self._common_spines(leaves)[:n])
            if len(spines) < n:
                return None
        return _clos_allocation(job_id, "vclos", self._take_slots(sorted(leaves), n), spines, {})

    def find_free_biclique(
        self, m: int, n: int, mask_of: Callable[[int], int] | None = None
    ) -> tuple[list[int], list[int]] | None:
        """Exact search: m leaves (>= n free hosts each) and n spines, all m*n links free.

        ``mask_of(leaf)``: the spines a leaf can use, as a bitmask (default: its free links).

        Backtracking over leaves in best-fit order, keeping the set (a bitmask) of
        spines still free to every chosen leaf; a branch is cut as soon as fewer
        than n common spines remain. The first hit is returned, so best-fit leaves
        win. Spines: among the common free ones, those with the fewest free links
        first, keeping idle spines for larger jobs.
        """
        mask_of = mask_of or self._free_spine_mask
        masks = {leaf: mask_of(leaf) for leaf in self._leaves_with(n)}
        candidates = [leaf for leaf, mask in masks.items() if mask.bit_count() >= n]

        def extend(start: int, chosen: list[int], common: int) -> list[int] | None:
            if len(chosen) == m:
                return chosen
            for i in range(start, len(candidates) - (m - len(chosen)) + 1):
                still_common = common & masks[candidates[i]]
                if still_common.bit_count() >= n:
                    found = extend(i + 1, [*chosen, candidates[i]], still_common)
                    if found is not None:
                        return found
            return None

        leaves = extend(0, [], (1 << self.spines) - 1)
        if leaves is None:
            return None
        return sorted(leaves), sorted(self._common_spines(leaves)[:n])

    def _common_spines(self, leaves: Iterable[int]) -> list[int]:
        """Spines with a free link to every one of ``leaves``, fewest free links first."""
        leaves = list(leaves)
        common = [
            s
            for s in range(self.spines)
            if all((leaf, s) not in self._link_owner for leaf in leaves)
        ]
        return sorted(common, key=lambda s: (self._free_links_of_spine(s), s))

    def _free_spine_mask(self, leaf: int) -> int:
        """Bit s is set when link (leaf, s) is unreserved."""
        mask = 0
        for s in range(self.spines):
            if (leaf, s) not in self._link_owner:
                mask |= 1 << s
        return mask

    def _free_links_of_spine(self, spine: int) -> int:
        return sum((leaf, spine) not in self._link_owner for leaf in range(self.leaves))

    # --------------------------------------------------------------- ocs-vclos

    def _try_ocs_vclos(
        self, job_id: str, m: int, n: int, leaves: list[int] | None = None
    ) -> Allocation | None:
        """Circuits for m leaves x n spines, or direct leaf-leaf circuits for two leaves.

        ``rewiring="any"``: direct circuits (m == 2), else circuits on any idle ports.
        ``conservative``: default circuits only (see :meth:`_default_ports`: what static
        vClos would do on the same leaves), then direct circuits, then default circuits
        topped up with circuits on orphaned spine ports (see :meth:`_orphaned`).
        ``augment``: default and direct circuits as ``conservative``, then
        :meth:`_try_augment`. Measured at cluster scale (BENCHMARKS.md), ``any`` scatters
        spine ports so that later jobs (whole leaves above all) can no longer be wired and
        refuses jobs that static vClos places; ``conservative`` rarely rewires at all;
        ``augment`` removes nearly every refusal for links. ``leaves`` fixes the leaves.
        """
        leaf_sets = None if leaves is None else [leaves]
        pair = None if leaves is None else [tuple(leaves)]
        found = None
        if self.rewiring != "any":
            # The exact search static vClos does, over the links the default wiring offers.
            default_sets = leaf_sets
            if default_sets is None:
                biclique = self.find_free_biclique(m, n, self._default_spine_mask)
                default_sets = [] if biclique is None else [biclique[0]]
            found = self._try_ocs_spines(job_id, m, n, default_sets, passes=("default",))
        if found is None and m == 2:
            found = self._try_direct_pair(job_id, n, pair)
        if found is None and self.rewiring == "augment":
            return self._try_augment(job_id, m, n, leaf_sets)
        if found is None:
            passes = ("match",) if self.rewiring == "any" else ("default", "match")
            found = self._try_ocs_spines(job_id, m, n, leaf_sets, passes=passes)
        return found

    def _idle_ocses(self, leaf: int) -> list[int]:
        """OCSes on which ``leaf``'s port is idle, lowest first."""
        return [o for o in range(self.ocs_count) if (o, leaf) not in self._leaf_port_owner]

    def _ocs_leaves_with(self, n: int) -> list[int]:
        """Leaves with >= n free hosts and >= n idle OCS ports, best fit first."""
        return [leaf for leaf in self._leaves_with(n) if len(self._idle_ocses(leaf)) >= n]

    def _try_direct_pair(
        self, job_id: str, n: int, pairs: Iterable[tuple[int, ...]] | None = None
    ) -> Allocation | None:
        """Two leaves, n hosts each; host j of leaf a <-> host j of leaf b over circuit j.

        Circuit j is a leaf-leaf circuit on the j-th lowest OCS where both leaves'
        ports are idle. The first pair (best fit order, or of ``pairs``) with n such OCSes
        wins. No spine and no (leaf, spine) link is used.
        """
        if pairs is None:
            pairs = combinations(self._ocs_leaves_with(n), 2)
        for a, b in pairs:
            shared = sorted(set(self._idle_ocses(a)) & set(self._idle_ocses(b)))
            if len(shared) < n:
                continue
            a, b = min(a, b), max(a, b)
            slots = self._take_slots((a, b), n)
            circuits = tuple(Circuit(o, ("leaf", a), ("leaf", b)) for o in shared[:n])
            circuit_of = {(leaf, slots[leaf][j]): j for leaf in (a, b) for j in range(n)}
            hosts = tuple((leaf, s) for leaf in (a, b) for s in slots[leaf])
            return Allocation(
                job_id, "ocs-vclos", hosts, (a, b), circuits=circuits, circuit_of=circuit_of
            )
        return None

    def _try_augment(
        self, job_id: str, m: int, n: int, leaf_sets: Iterable[Iterable[int]] | None
    ) -> Allocation | None:
        """Circuits for m leaves x n spines, rewired where the default wiring falls short.

        Leaf sets are tried best fit first (at most MAX_OCS_LEAF_SETS), or only those of
        ``leaf_sets``; see :meth:`_augment_wiring` for the wiring of one set.
        """
        if leaf_sets is None:
            leaf_sets = islice(combinations(self._ocs_leaves_with(n), m), MAX_OCS_LEAF_SETS)
        for leaf_set in leaf_sets:
            leaves = sorted(leaf_set)
            wiring = self._augment_wiring(leaves, n)
            if wiring is not None:
                spines, ports = wiring
                return _clos_allocation(
                    job_id, "ocs-vclos", self._take_slots(leaves, n), spines, ports)
        return None

    def _augment_wiring(
        self, leaves: list[int], n: int
    ) -> tuple[list[int], dict[tuple[int, int], tuple[int, int]]] | None:
        """n spines for ``leaves`` and, per leaf, one circuit to each on a distinct OCS.

        The spines are the n that most of the leaves reach by their default circuit (then
        those with the most idle ports). Each leaf in turn gets a perfect matching of those
        spines to OCSes where its own port and a spine port are idle
        (:func:`_match_from_default`): its default circuits where possible, rewired along
        augmenting paths where not. Spine ports are shared by the leaves of the job, so a
        leaf only takes what the leaves before it left. Returns ``(spines, {(leaf, j):
        (ocs, port)})`` or None.
        """
        ocs_count, per_ocs = self.ocs_count, self.spine_ports_per_ocs
        busy = self._spine_port_owner
        idle = {
            (ocs, spine): [p for p in range(per_ocs) if (ocs, spine, p) not in busy]
            for ocs in range(ocs_count) for spine in range(self.spines)
        }
        total = [sum(len(idle[(ocs, spine)]) for ocs in range(ocs_count))
                 for spine in range(self.spines)]
        defaults = {leaf: self._default_spine_mask(leaf) for leaf in leaves}
        candidates = [
            s for s in range(self.spines)
            if total[s] >= len(leaves) and not any((lf, s) in self._link_owner for lf in leaves)
        ]
        if len(candidates) < n:
            return None
        candidates.sort(
            key=lambda s: (-sum(mask >> s & 1 for mask in defaults.values()), -total[s], s))
        spines = sorted(candidates[:n])
        ports: dict[tuple[int, int], tuple[int, int]] = {}
        for leaf in leaves:
            match = _match_from_default(
                spines, self._idle_ocses(leaf), lambda s, lf=leaf: self._default_circuit(lf, s)[0],
                lambda o, s: bool(idle[(o, s)]))
            if match is None:
                return None
            for j, spine in enumerate(spines):
                ocs = match[spine]
                free = idle[(ocs, spine)]
                default_ocs, default_port = self._default_circuit(leaf, spine)
                own = default_port if ocs == default_ocs else None
                # The leaf's own default port, else the port fewest idle leaves need by default.
                port = own if own in free else min(free, key=lambda p, o=ocs, s=spine: (
                    len(self._idle_default_owners(o, s, p)), p))
                free.remove(port)
                ports[(leaf, j)] = (ocs, port)
        return spines, ports

    def _try_ocs_spines(
        self,
        job_id: str,
        m: int,
        n: int,
        leaf_sets: Iterable[Iterable[int]] | None = None,
        *,
        passes: tuple[str, ...] = ("match",),
    ) -> Allocation | None:
        """m leaves x n spines; each (leaf, spine) pair realised by one new circuit.

        Leaf sets are tried best fit first (at most MAX_OCS_LEAF_SETS of them), or
        only those of ``leaf_sets``. ``passes``: see :meth:`_wire_spines`.
        Only spines with >= m idle ports can serve m leaves; they are tried with
        the fewest idle ports first (keep idle spines for big jobs).
        """
        busy = [0] * self.spines
        for _ocs, spine, _port in self._spine_port_owner:
            busy[spine] += 1
        total = self.ocs_count * self.spine_ports_per_ocs
        spines = sorted(
            (s for s in range(self.spines) if total - busy[s] >= m),
            key=lambda s: (total - busy[s], s),
        )
        if len(spines) < n:
            return None
        if leaf_sets is None:
            leaf_sets = islice(combinations(self._ocs_leaves_with(n), m), MAX_OCS_LEAF_SETS)
        index = (self._rewire_index()
                 if "match" in passes and self.rewiring == "conservative" else None)
        for leaves in leaf_sets:
            wiring = self._wire_spines(sorted(leaves), n, spines, passes, index)
            if wiring is not None:
                spines = sorted(wiring)
                ports = {
                    (leaf, j): wiring[s][leaf] for j, s in enumerate(spines) for leaf in leaves
                }
                return _clos_allocation(
                    job_id, "ocs-vclos", self._take_slots(sorted(leaves), n), spines, ports
                )
        return None

    def _wire_spines(
        self,
        leaves: list[int],
        n: int,
        spines: list[int],
        passes: tuple[str, ...] = ("match",),
        index: _RewireIndex | None = None,
    ) -> dict[int, dict[int, tuple[int, int]]] | None:
        """Pick n of ``spines`` (in order) and, for each, one circuit from every leaf.

        Returns ``{spine: {leaf: (ocs, spine_port)}}`` or None.

        Assigning an OCS to every (leaf, spine) pair at once is a 3-index
        assignment problem (NP-hard in general), so this goes spine by spine: for
        each candidate spine, a maximum bipartite matching (networkx
        Hopcroft-Karp) between the leaves and the spine's idle ports, where leaf
        ``l`` may take port ``(o, p)`` when its own port on OCS ``o`` is idle and
        not yet used by this job. A spine that cannot serve every leaf is skipped.
        With ``exclusive_ocs_links`` a (leaf, spine) pair held by another job is skipped.

        ``passes`` run in order over the spines not yet taken: ``"default"`` takes spines
        that every leaf reaches by its default circuit (:meth:`_default_ports`),
        ``"match"`` uses the matching above. ``index`` (conservative rewiring): only the
        spine ports it leaves open to these leaves are matched (see :meth:`_rewire_index`).
        """
        m = len(leaves)
        candidates = None if index is None else index.ports_for(leaves)
        used_leaf_ports: set[LeafPort] = set()
        wiring: dict[int, dict[int, tuple[int, int]]] = {}
        for kind in passes:
            for spine in spines:
                if spine in wiring or any((leaf, spine) in self._link_owner for leaf in leaves):
                    continue
                if kind == "match" and candidates is not None and len(
                        candidates.get(spine, ())) < m:
                    continue  # fewer open ports than leaves: no matching can serve them all
                if kind == "match":
                    match = self._match_leaves_to_spine(
                        leaves, spine, used_leaf_ports,
                        None if candidates is None else candidates.get(spine, []))
                else:
                    match = self._default_ports(leaves, spine, used_leaf_ports)
                if len(match) < m:
                    continue
                wiring[spine] = match
                used_leaf_ports |= {(ocs, leaf) for leaf, (ocs, _port) in match.items()}
                if len(wiring) == n:
                    return wiring
        return None

    def _default_circuit(self, leaf: int, spine: int) -> tuple[int, int]:
        """``(ocs, spine port)`` of the default circuit from ``leaf`` to ``spine``: OCS
        ``(leaf + spine) % ocs_count``, port ``(leaf // ocs_count) % spine_ports_per_ocs``
        (see :meth:`_default_ports`)."""
        return ((leaf + spine) % self.ocs_count,
                (leaf // self.ocs_count) % self.spine_ports_per_ocs)

    def _default_spine_mask(self, leaf: int) -> int:
        """Bit s is set when ``leaf``'s default circuit to spine s could be set up now
        (its port on OCS (leaf + s) % ocs_count and a port of s on that OCS are idle)."""
        mask = 0
        ports = range(self.spine_ports_per_ocs)
        for spine in range(self.spines):
            ocs, _port = self._default_circuit(leaf, spine)
            if (ocs, leaf) not in self._leaf_port_owner and any(
                (ocs, spine, p) not in self._spine_port_owner for p in ports
            ):
                mask |= 1 << spine
        return mask

    def _default_ports(
        self, leaves: list[int], spine: int, used_leaf_ports: set[LeafPort]
    ) -> dict[int, tuple[int, int]]:
        """Each leaf's default circuit to ``spine``, or {} when one of them is busy.

        The default wiring joins leaf ``l`` to spine ``s`` on OCS ``(l + s) % ocs_count``,
        port ``(l // ocs_count) % spine_ports_per_ocs``. With ``ocs_count == spines`` and
        ``spine_ports_per_ocs == leaves / ocs_count`` it is the electrical leaf-spine fabric,
        so jobs that only use default circuits leave the OCS as static vClos would.
        """
        out: dict[int, tuple[int, int]] = {}
        for leaf in leaves:
            ocs, first = self._default_circuit(leaf, spine)
            if (ocs, leaf) in self._leaf_port_owner or (ocs, leaf) in used_leaf_ports:
                return {}
            ports = [first, *(p for p in range(self.spine_ports_per_ocs) if p != first)]
            port = next(
                (p for p in ports
                 if (ocs, spine, p) not in self._spine_port_owner and (ocs, p) not in out.values()),
                None,
            )
            if port is None:
                return {}
            out[leaf] = (ocs, port)
        return out

    def _idle_spine_ports(self, spine: int) -> list[tuple[int, int]]:
        return [
            (o, p)
            for o in range(self.ocs_count)
            for p in range(self.spine_ports_per_ocs)
            if (o, spine, p) not in self._spine_port_owner
        ]

    def _orphaned(
        self, ocs: int, spine: int, port: int, leaf: int, used_leaf_ports: set[LeafPort]
    ) -> bool:
        """True when every leaf other than ``leaf`` whose default circuit to ``spine`` ends
        on spine port ``(ocs, port)`` has its own port on ``ocs`` busy (or there is none)."""
        return all(
            owner == leaf or (ocs, owner) in used_leaf_ports
            for owner in self._idle_default_owners(ocs, spine, port)
        )

    def _idle_default_owners(self, ocs: int, spine: int, port: int) -> list[int]:
        """Leaves whose default circuit to ``spine`` ends on its port ``(ocs, port)`` and whose
        own port on ``ocs`` is idle (see :meth:`_default_ports` for the default wiring)."""
        first = (ocs - spine) % self.ocs_count
        return [
            owner for owner in range(first, self.leaves, self.ocs_count)
            if (owner // self.ocs_count) % self.spine_ports_per_ocs == port
            and (ocs, owner) not in self._leaf_port_owner
        ]

    def _rewire_index(self) -> _RewireIndex:
        """Idle spine ports by the leaves whose idle default circuits would need them.

        A port whose default owners all have their own port on that OCS busy is open to any
        leaf; one that an idle owner still needs is open only to a job holding that owner.
        """
        index = _RewireIndex()
        for spine in range(self.spines):
            for ocs, port in self._idle_spine_ports(spine):
                blockers = frozenset(self._idle_default_owners(ocs, spine, port))
                index.add((ocs, spine, port), blockers)
        return index

    def _match_leaves_to_spine(
        self,
        leaves: list[int],
        spine: int,
        used_leaf_ports: set[LeafPort],
        candidates: list[tuple[int, int]] | None = None,
    ) -> dict[int, tuple[int, int]]:
        """Maximum matching leaf -> idle spine port (ocs, port) on an OCS the leaf can use.

        With ``rewiring="conservative"`` a leaf may only take a spine port that no other leaf
        could use by default (see :meth:`_orphaned`), so rewiring never takes a port that a
        later job needs for a default circuit; with ``any`` it may.

        Nodes are the leaf ints (left) and (ocs, port) tuples (right): no strings, so the
        result does not depend on PYTHONHASHSEED and the same state gives the same answer.
        """
        graph = nx.Graph()
        graph.add_nodes_from(leaves)
        for ocs, port in self._idle_spine_ports(spine) if candidates is None else candidates:
            for leaf in leaves:
                if (
                    (ocs, leaf) not in self._leaf_port_owner
                    and (ocs, leaf) not in used_leaf_ports
                    and (
                        self.rewiring == "any"
                        or self._orphaned(ocs, spine, port, leaf, used_leaf_ports)
                    )
                ):
                    graph.add_edge(leaf, (ocs, port))
        matching = nx.bipartite.hopcroft_karp_matching(graph, top_nodes=leaves)
        return {leaf: matching[leaf] for leaf in leaves if leaf in matching}


# ----------------------------------------------------------------- helpers


class _RewireIndex:
    """Idle spine ports grouped by the set of idle default owners ("blockers") they have."""

    def __init__(self) -> None:
        self.open: dict[int, list[tuple[int, int]]] = {}  # spine -> ports nobody needs
        self.by_blocker: dict[int, list[SpinePort]] = {}  # leaf -> ports only it needs
        self.shared: list[tuple[SpinePort, frozenset[int]]] = []  # needed by several

    def add(self, port: SpinePort, blockers: frozenset[int]) -> None:
        if not blockers:
            self.open.setdefault(port[1], []).append((port[0], port[2]))
        elif len(blockers) == 1:
            self.by_blocker.setdefault(next(iter(blockers)), []).append(port)
        else:
            self.shared.append((port, blockers))

    def ports_for(self, leaves: Iterable[int]) -> dict[int, list[tuple[int, int]]]:
        """spine -> the (ocs, port)s a job on ``leaves`` may take (blockers all its own)."""
        leaf_set = set(leaves)
        out = {spine: list(ports) for spine, ports in self.open.items()}
        found = [p for leaf in leaf_set for p in self.by_blocker.get(leaf, [])]
        found += [p for p, blockers in self.shared if blockers <= leaf_set]
        for ocs, spine, port in sorted(found):
            out.setdefault(spine, []).append((ocs, port))
        for ports in out.values():
            ports.sort()
        return out


def _match_from_default(
    spines: list[int],
    ocses: list[int],
    default: Callable[[int], int],
    usable: Callable[[int, int], bool],
) -> dict[int, int] | None:
    """A perfect matching spine -> OCS (one leaf's circuits), or None if there is none.

    ``ocses``: the OCSes where the leaf's port is idle; ``usable(ocs, spine)``: the spine has
    an idle port there. Starts from the default circuits (``default(spine)``) and adds every
    other spine by an augmenting path (Kuhn's algorithm), so default circuits are only moved
    when a spine cannot be reached otherwise.
    """
    open_ocses = set(ocses)
    spine_of: dict[int, int] = {}  # ocs -> spine
    ocs_of: dict[int, int] = {}  # spine -> ocs
    for spine in spines:
        ocs = default(spine)
        if ocs in open_ocses and ocs not in spine_of and usable(ocs, spine):
            spine_of[ocs], ocs_of[spine] = spine, ocs

    def augment(spine: int, seen: set[int]) -> bool:
        options = [o for o in ocses if o not in seen and usable(o, spine)]
        taken = [o for o in options if o in spine_of]
        for ocs in [o for o in options if o not in spine_of] + taken:  # free OCSes first
            if ocs in seen:
                continue
            seen.add(ocs)
            if ocs not in spine_of or augment(spine_of[ocs], seen):
                spine_of[ocs], ocs_of[spine] = spine, ocs
                return True
        return False

    for spine in spines:
        if spine not in ocs_of and not augment(spine, set()):
            return None
    return ocs_of


def _clos_allocation(
    job_id: str,
    policy: str,
    slots: dict[int, list[int]],
    spines: list[int],
    ports: dict[tuple[int, int], tuple[int, int]],
) -> Allocation:
    """Build a cross-leaf allocation: host j on each leaf uses ``spines[j]``.

    ``ports`` maps (leaf, j) -> (ocs, spine_port) for OCS jobs; empty for vclos.
    """
    leaves = sorted(slots)
    spine_of = {(leaf, slots[leaf][j]): spines[j] for leaf in leaves for j in range(len(spines))}
    circuits: list[Circuit] = []
    circuit_of: dict[Host, int] = {}
    for leaf in leaves:
        for j, spine in enumerate(spines):
            if ports:
                ocs, port = ports[(leaf, j)]
                circuit_of[(leaf, slots[leaf][j])] = len(circuits)
                circuits.append(Circuit(ocs, ("leaf", leaf), ("spine", spine, port)))
    return Allocation(
        job_id=job_id,
        policy=policy,
        hosts=tuple(sorted(spine_of)),
        leaves=tuple(leaves),
        spines=tuple(spines),
        links=frozenset((leaf, spine) for leaf in leaves for spine in spines),
        circuits=tuple(circuits),
        spine_of=spine_of,
        circuit_of=circuit_of,
    )


def _leaves_of(hosts: Iterable[Host]) -> tuple[int, ...]:
    return tuple(sorted({leaf for leaf, _slot in hosts}))


def _leaf_ports(circuits: Iterable[Circuit]) -> Iterator[LeafPort]:
    for circuit in circuits:
        for end in (circuit.end_a, circuit.end_b):
            if end[0] == "leaf":
                yield (circuit.ocs, end[1])


def _spine_ports(circuits: Iterable[Circuit]) -> Iterator[SpinePort]:
    for circuit in circuits:
        if circuit.end_b[0] == "spine":
            yield (circuit.ocs, circuit.end_b[1], circuit.end_b[2])
