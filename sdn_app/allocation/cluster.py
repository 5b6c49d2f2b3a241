"""The :class:`Cluster` facade: checks a request, picks the policy's placement, commits it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from sdn_app.allocation.ledger import (
    Allocation,
    AllocationRefused,
    AllocationRequestError,
    LeafSlot,
    Ledger,
    leaves_of,
)
from sdn_app.allocation.ocs import REWIRINGS, rewiring_name
from sdn_app.allocation.vclos import claim_vclos, find_free_biclique, try_vclos
from testbed.core.spec import LeafSpineSpec, OcsLeafSpineSpec

POLICIES = ("ecmp", "vclos", "ocs-vclos")
PLACEMENTS = ("joint", "hosts-first")


class Cluster(Ledger):
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
        gpus_per_server: int = 1,
    ) -> None:
        """``spine_ports_per_ocs``: ports every spine has on every OCS (the emulated OCS
        fabric has two; ``leaves / ocs_count`` gives a spine as many ports as it has leaf
        links in the electrical fabric).

        ``placement``: ``joint`` or ``hosts-first`` (see :mod:`sdn_app.allocation`).

        ``rewiring`` (ocs-vclos): a name in :data:`sdn_app.allocation.ocs.REWIRINGS` (or an
        older name of one, with a warning).

        ``exclusive_ocs_links``: also forbid two ocs-vclos jobs the same (leaf, spine) pair.

        ``gpus_per_server``: a job that crosses leaves takes whole idle servers of this many
        consecutive hosts, and its hosts per leaf (vclos, ocs-vclos) are whole servers.

        By default only OCS ports are exclusive in ocs-vclos: two jobs may each hold a
        circuit between leaf l and spine s, on different OCSes (different ports, so
        physically separate paths). With the flag, (leaf, spine) pairs are exclusive as
        in static vclos; then ocs-vclos can only beat vclos with direct leaf-leaf circuits.
        """
        super().__init__(
            leaves, spines, hosts_per_leaf, ocs_count,
            exclusive_ocs_links=exclusive_ocs_links, spine_ports_per_ocs=spine_ports_per_ocs,
            gpus_per_server=gpus_per_server,
        )
        if placement not in PLACEMENTS:
            raise AllocationRequestError(
                f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}"
            )
        rewiring = rewiring_name(rewiring)
        if rewiring not in REWIRINGS:
            raise AllocationRequestError(
                f"rewiring must be one of {', '.join(REWIRINGS)}, got {rewiring!r}"
            )
        self.placement = placement
        self.rewiring = rewiring

    @classmethod
    def for_fabric(cls, spec: LeafSpineSpec | OcsLeafSpineSpec) -> Cluster:
        """The cluster of a leaf-spine or OCS fabric spec, with the fabric's
        ``ocs_rewiring``: what the controller and the sim backend both place jobs on."""
        if isinstance(spec, OcsLeafSpineSpec):
            return cls(spec.leaves, spec.spines, spec.hosts_per_leaf, spec.ocs_count,
                       rewiring=spec.ocs_rewiring)
        return cls(spec.leaves, spec.spines, spec.hosts_per_leaf)

    # ----------------------------------------------------- allocate / claim

    def allocate(self, job_id: str, hosts_wanted: int, policy: str,
                 label: str | None = None) -> Allocation:
        """Place a job of ``hosts_wanted`` hosts, or raise :class:`AllocationRefused`.
        ``policy`` is how to place it (one of POLICIES); ``label``, if given, is the routing
        policy recorded in the allocation (one that places jobs as ``policy`` does)."""
        self._check_request(job_id, hosts_wanted, policy)
        if policy == "ecmp":
            allocation = self._place_ecmp(job_id, hosts_wanted)
        else:
            allocation = self._place_clos(job_id, hosts_wanted, policy)
        if label is not None:
            allocation = replace(allocation, policy=label)
        self.commit(allocation)
        return allocation

    def place(self, job_id: str, hosts_wanted: int, label: str,
              placer: Callable[[Ledger, str, int, str], Allocation]) -> Allocation:
        """Place a job with a placement function of its own (``placer(ledger, job_id, k,
        label)``, e.g. :func:`.source_routing.place_source_routing`), checked as an ``ecmp``
        request (no links reserved), and commit it."""
        self._check_request(job_id, hosts_wanted, "ecmp")
        allocation = placer(self, job_id, hosts_wanted, label)
        self.commit(allocation)
        return allocation

    def claim(self, job_id: str, hosts: Iterable[LeafSlot], policy: str,
              label: str | None = None) -> Allocation:
        """Give a job exactly these ``(leaf, slot)`` hosts (policies ``ecmp`` and ``vclos``).

        Under vclos the hosts must form an m x n shape (n hosts on each of m leaves); the job
        gets n spines whose links to all m leaves are free, host j of each leaf using spine j.
        """
        wanted = sorted(set(hosts))
        self._check_request(job_id, len(wanted) or 1, policy)
        if not wanted:
            raise AllocationRequestError("hosts must name at least one host")
        slots = self.claimable(wanted)
        if policy == "ecmp" or len(slots) == 1:
            allocation = Allocation(job_id, policy, tuple(wanted), tuple(sorted(slots)))
        elif policy == "vclos":
            allocation = claim_vclos(self, job_id, slots)
        else:
            raise AllocationRequestError(
                "explicit hosts work with ecmp and vclos; ask ocs-vclos for hosts_wanted"
            )
        if label is not None:
            allocation = replace(allocation, policy=label)
        self.commit(allocation)
        return allocation

    def find_free_biclique(self, m: int, n: int) -> tuple[list[int], list[int]] | None:
        """m leaves (>= n free hosts each) and n spines with all m*n links free
        (:func:`sdn_app.allocation.vclos.find_free_biclique`)."""
        return find_free_biclique(self, m, n)

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
        single = self.best_fit_leaf(k)
        if single is not None:
            return self._single_leaf(job_id, "ecmp", single, k)
        # Crossing leaves: the fullest leaves first, whole idle servers only (spread_slots).
        usable = {leaf: self.spread_count(leaf) for leaf in range(self.leaves)}
        if sum(usable.values()) < k:
            raise AllocationRefused(
                "fragmented", f"fragmented: {self.free_hosts()} hosts are free but fewer than "
                f"{k} lie in idle servers of {self.gpus_per_server} and no leaf holds the job",
                cause="hosts")
        by_free = sorted(usable, key=lambda leaf: (-usable[leaf], leaf))
        hosts: list[LeafSlot] = []
        for index, leaf in enumerate(by_free):
            needed = k - len(hosts)
            if usable[leaf] >= needed:
                # The last leaf: the one with the fewest usable hosts that still covers the rest.
                last = min((usable[x], x) for x in by_free[index:] if usable[x] >= needed)[1]
                hosts += [(last, s) for s in self.spread_slots(last)[:needed]]
                break
            hosts += [(leaf, s) for s in self.spread_slots(leaf)]
        return Allocation(job_id, "ecmp", tuple(sorted(hosts)), leaves_of(hosts))

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
        leaf = self.best_fit_leaf(k)
        if leaf is not None:
            return self._single_leaf(job_id, policy, leaf, k)
        if policy == "ocs-vclos" and self.placement == "joint":
            allocation = REWIRINGS[self.rewiring].place_job(self, job_id, k, shapes)
        else:
            allocation = self._place_shapes(job_id, policy, shapes)
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

    def _place_shapes(self, job_id: str, policy: str,
                      shapes: list[tuple[int, int]]) -> Allocation | None:
        """The first shape that places (vclos, or ocs-vclos with hosts-first placement:
        there only the first shape whose hosts fit is tried)."""
        for m, n in shapes:
            leaves = None
            if self.placement == "hosts-first":
                leaves = self.leaves_with(n)[:m]
                if len(leaves) < m:
                    continue
            allocation = (
                try_vclos(self, job_id, m, n, leaves)
                if policy == "vclos"
                else REWIRINGS[self.rewiring].place(self, job_id, m, n, leaves)
            )
            if allocation is not None or leaves is not None:
                return allocation
        return None

    def hosts_fit(self, k: int, policy: str) -> bool:
        """Would some m x n shape of k find m leaves with n free hosts, ignoring links?"""
        free = [self.spread_count(leaf) for leaf in range(self.leaves)]
        return any(sum(f >= n for f in free) >= m for m, n in self.shapes(k, policy))

    def shapes(self, k: int, policy: str) -> list[tuple[int, int]]:
        """Cross-leaf shapes ``(m leaves, n hosts per leaf)`` tried for k, largest n first.

        n runs over hosts_per_leaf, hosts_per_leaf // 2, ..., 1 and must divide k,
        with 2 <= m <= leaves, and be whole servers (a multiple of gpus_per_server). Every
        leaf needs n uplinks: n <= spines for vclos, n <= ocs_count for ocs-vclos. A prime
        k > hosts_per_leaf gets n = 1.
        """
        uplinks = self.spines if policy == "vclos" else self.ocs_count
        found = []
        n = self.hosts_per_leaf
        while n >= 1:
            m = k // n
            if k % n == 0 and 2 <= m <= self.leaves and n <= uplinks \
                    and n % self.gpus_per_server == 0:
                found.append((m, n))
            n //= 2
        return found

    def _single_leaf(self, job_id: str, policy: str, leaf: int, k: int) -> Allocation:
        hosts = tuple((leaf, s) for s in self.free_slots(leaf)[:k])
        return Allocation(job_id, policy, hosts, (leaf,))
