"""Job allocation for a leaf-spine cluster: ECMP, static vClos and OCS-vClos.

Pure Python (no os-ken, no Mininet). Indices are 0-based everywhere.

Modules: :mod:`.ledger` (what a job holds and who holds what), :mod:`.vclos` (the free
biclique search of static vClos), :mod:`.ocs` (circuits of OCS-vClos and its rewiring
strategies), :mod:`.cluster` (the :class:`~.cluster.Cluster` facade that places jobs).

Vocabulary
----------
* A *host* is ``(leaf, slot)``: slot ``0 .. hosts_per_leaf-1`` under ``leaf``.
* A *link* is ``(leaf, spine)``. With ``ocs_count == 0`` there is one direct link
  between every leaf and every spine. With OCSes the "links" of a job are the
  (leaf, spine) pairs that its circuits realise.
* An *OCS port*: every leaf has one port on every OCS, every spine has
  ``spine_ports_per_ocs`` ports (default two: 0 and 1) on every OCS.
* A *circuit* is a :class:`~.ledger.Circuit` ``(ocs, end_a, end_b)``: ``end_a`` is always
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
  (Hopcroft-Karp); see :func:`.ocs.wire_spines` for why this part is a heuristic.
  Needs ``ocs_count >= 1``. Circuits of running jobs are never moved. The
  exclusive resources are OCS ports: two jobs may both hold a (leaf, spine)
  pair through circuits on different OCSes, unless the cluster is built with
  ``exclusive_ocs_links=True``. How circuits are chosen is the cluster's *rewiring*
  (:data:`.ocs.REWIRINGS`): ``any`` (the default), ``conservative``, ``augment`` or
  ``exact`` (RapidNetSim's GPUPlacemeter3 solved exactly: :mod:`.ocs_exact`, several blocks
  of hosts per leaf, one spine for a star); ``conservative`` and ``augment`` start from the
  *default wiring*
  (:func:`testbed.core.topology.default_circuit`).

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
