"""RapidNetSim's baseline placement ("Source Routing" in its plots), as its code has it.

RapidNetSim's 8192-GPU run ``large_exp_8192/5000_241/static_routing`` places jobs with
``rapidnetsim/scheduler/static_scheduler_multi_cluster/static_scheduler.py``. Its semantics, read
from that file (commit 890901b) and re-expressed here:

- the leaves are split into ``pods`` equal pods of consecutive leaves (4 in its code), tried in
  index order (its per-pod free counts are never updated, so the order never changes);
- its constructor's arguments are shifted by one, so its "server" is a whole leaf;
- inside a pod, the leaves with any free host are ranked by free hosts, fewest first (index on
  ties); a leaf qualifies when it is wholly idle or has at least ``k`` free; the job takes the
  first ``ceil(k / hosts_per_leaf)`` qualifying leaves, lowest free slots first, or goes to the
  next pod. A job of at most a leaf thus takes the best-fit leaf of the first pod holding one;
  a larger job takes whole idle leaves of one pod;
- no spine link or port is reserved: jobs share the fabric.

``pods=1`` is the same rule on the whole cluster (the pods-off variant). A pod keeps at least two
leaves (a cluster of fewer than ``2 x pods`` leaves gets ``leaves // 2`` pods, at least one), so a
job of two leaves fits somewhere; leaves beyond the equal pods (a remainder) are in no pod, as in
RapidNetSim's integer division.
"""

from __future__ import annotations

import math

from sdn_app.allocation.ledger import Allocation, AllocationRefused, Ledger, leaves_of

RAPIDNETSIM_PODS = 4


def place_source_routing(ledger: Ledger, job_id: str, k: int, policy: str,
                         pods: int = RAPIDNETSIM_PODS) -> Allocation:
    """Place ``k`` hosts by RapidNetSim's rule (module docstring); :class:`AllocationRefused`
    when no pod has the leaves."""
    if k > ledger.free_hosts():
        raise AllocationRefused("no_hosts", f"not enough free hosts: the job wants {k}, "
                                f"{ledger.free_hosts()} are free")
    pods = max(1, min(pods, ledger.leaves // 2))
    per_pod = ledger.leaves // pods
    need = math.ceil(k / ledger.hosts_per_leaf)
    for pod in range(pods):
        ranked = sorted((leaf for leaf in range(pod * per_pod, (pod + 1) * per_pod)
                         if ledger.free_count(leaf) > 0),
                        key=lambda leaf: (ledger.free_count(leaf), leaf))
        fit = [leaf for leaf in ranked
               if ledger.free_count(leaf) == ledger.hosts_per_leaf or ledger.free_count(leaf) >= k]
        if len(fit) < need:
            continue
        hosts: list[tuple[int, int]] = []
        for leaf in fit[:need]:
            hosts += [(leaf, s) for s in ledger.free_slots(leaf)[:k - len(hosts)]]
        return Allocation(job_id, policy, tuple(sorted(hosts)), leaves_of(hosts))
    if need > per_pod:
        raise AllocationRefused("unshapeable", f"a {k}-host job needs {need} whole leaves, a "
                                f"pod has {per_pod}")
    raise AllocationRefused("fragmented", f"fragmented: {ledger.free_hosts()} hosts are free but "
                            f"no pod has {need} idle leaves (or one leaf with {k} free)",
                            cause="hosts")
