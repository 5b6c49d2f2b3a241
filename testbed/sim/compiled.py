"""Compiled (numba) kernels of the simulator's hot loops, when numba is installed.

Pure functions, no I/O but numba's cache. Each kernel does the same floating-point operations,
in the same order, as the numpy code it stands in for (:func:`testbed.sim.maxmin.fill_rates_rounds`,
:meth:`testbed.sim.occupancy.Incidence.labels`), so results are identical to the last bit;
``tests/test_sim_compiled.py`` checks both ways on the same inputs. The incidence read from
the occupancy's pool (:func:`pooled_incidence`, with :func:`pooled_enter` and :func:`pooled_leave`
keeping each flow's busy links as links become busy or free) holds the entries
:meth:`testbed.sim.occupancy.Occupancy.incidence` rebuilds from the routes, flows in the same
order but a flow's links in another order and so numbered otherwise; the filler and the labels
give the same results to the bit for any such order (a link's load and its flows' sums run over
its flows by position, whatever the link's number), which the tests check too.
Without numba (``pip install -e '.[sim-fast]'`` adds it) ``AVAILABLE`` is False and callers
keep the numpy code; ``FABRICLAB_NO_NUMBA=1`` turns the kernels off.

Compiling takes seconds (at a kernel's first call in a process), so the machine code is cached
in ``~/.cache/fabriclab/numba`` of the effective user (made 0700), and only if that directory
and its parents up to ``~/.cache`` are the user's own and writable by nobody else: a cache is
loaded code, so root must not read one that another user could write. Otherwise nothing is
cached.
"""

from __future__ import annotations

import os
import pwd
import stat

import numpy as np

try:
    if os.environ.get("FABRICLAB_NO_NUMBA"):
        raise ImportError("turned off by FABRICLAB_NO_NUMBA")
    import numba
except ImportError:  # the numpy code stands in
    AVAILABLE = False
else:
    AVAILABLE = True

__all__ = ["AVAILABLE", "component_labels", "fill_rounds", "pooled_enter", "pooled_incidence",
           "pooled_leave"]


def _fill_rounds(flow_cap: np.ndarray, e_flow: np.ndarray, e_link: np.ndarray,
                 mult: np.ndarray, link_cap: np.ndarray, roomy: float, slack: float,
                 stall_bit_s: float) -> np.ndarray:  # pragma: no cover - compiled
    """Progressive filling a round at a time: ``fill_rates_rounds`` step for step.

    ``slack`` is ``1 + RATE_TOL``; the other arguments as ``fill_rates_rounds`` takes them
    (entries in any order)."""
    n_flows = flow_cap.shape[0]
    n_all = link_cap.shape[0]
    n_entries = e_flow.shape[0]
    # Per link: crossings and what its flows send at their caps, summed in entry order.
    weight_all = np.zeros(n_all)
    at_caps = np.zeros(n_all)
    for e in range(n_entries):
        link = e_link[e]
        weight_all[link] += mult[e]
        at_caps[link] += mult[e] * flow_cap[e_flow[e]]
    # Tight links only, renumbered in their order (without branches: which links are tight
    # is data the branch predictor cannot learn; each slot past the last is scratch).
    renumber = np.empty(n_all + 1, dtype=np.int64)
    cap = np.empty(n_all + 1)
    weight = np.empty(n_all + 1)
    n_links = 0
    for link in range(n_all):
        tight = link_cap[link] < at_caps[link] * roomy
        renumber[link] = n_links if tight else -1
        cap[n_links] = link_cap[link]
        weight[n_links] = weight_all[link]
        n_links += tight
    cap, weight = cap[:n_links], weight[:n_links]
    # The entries on tight links (kept, entry order), each flow's and each link's count.
    kept = np.empty(n_entries + 1, dtype=np.int64)
    n_kept = 0
    flow_start = np.zeros(n_flows + 1, dtype=np.int64)
    link_start = np.zeros(n_links + 2, dtype=np.int64)  # a dropped entry counts 0 at [0]
    for e in range(n_entries):
        link = renumber[e_link[e]]
        keep = link >= 0
        kept[n_kept] = e
        n_kept += keep
        flow_start[e_flow[e] + 1] += keep
        link_start[link + 1] += keep
    for f in range(n_flows):
        flow_start[f + 1] += flow_start[f]
    for link in range(n_links):
        link_start[link + 1] += link_start[link]
    # Each flow's kept entries (entry order) and each link's flows.
    k_link = np.empty(n_kept, dtype=np.int64)
    k_mult = np.empty(n_kept)
    flows_on = np.empty(n_kept, dtype=np.int64)
    f_fill = flow_start[:n_flows].copy()
    l_fill = link_start[:n_links].copy()
    for q in range(n_kept):
        e = kept[q]
        link = renumber[e_link[e]]
        f = e_flow[e]
        k_link[f_fill[f]] = link
        k_mult[f_fill[f]] = mult[e]
        f_fill[f] += 1
        flows_on[l_fill[link]] = f
        l_fill[link] += 1

    load = np.zeros(n_links)
    headroom = cap / weight
    rates = np.zeros(n_flows)
    by_cap = _argsort_stable(flow_cap)
    is_frozen = np.zeros(n_flows, dtype=np.bool_)
    marked = np.zeros(n_flows, dtype=np.bool_)
    frozen = np.empty(n_flows, dtype=np.int64)
    count = np.zeros(n_links)
    touched = np.empty(n_links, dtype=np.int64)
    next_cap = 0
    left = n_flows
    while left:
        while is_frozen[by_cap[next_cap]]:
            next_cap += 1
        level = flow_cap[by_cap[next_cap]]
        lowest = np.inf
        for link in range(n_links):
            if headroom[link] < lowest:
                lowest = headroom[link]
        if lowest < level:
            level = lowest
        if level < 0.0:
            level = 0.0
        limit = level * slack + 1e-300
        n_frozen = 0
        for i in range(next_cap, n_flows):
            f = by_cap[i]
            if flow_cap[f] > limit:
                break
            if not is_frozen[f] and not marked[f]:
                marked[f] = True
                frozen[n_frozen] = f
                n_frozen += 1
        if lowest <= limit:
            for link in range(n_links):
                if headroom[link] <= limit:
                    for j in range(link_start[link], link_start[link + 1]):
                        f = flows_on[j]
                        if not is_frozen[f] and not marked[f]:
                            marked[f] = True
                            frozen[n_frozen] = f
                            n_frozen += 1
        these = _ascending(frozen[:n_frozen], marked)
        if level == 0.0:
            level = stall_bit_s
        rate = level
        below = False
        for f in these:
            marked[f] = False
            is_frozen[f] = True
            if flow_cap[f] < level:
                rates[f] = flow_cap[f]
                below = True
            else:
                rates[f] = level
        mixed = False
        if below:
            rate = rates[these[0]]
            for f in these:
                if rates[f] != rate:
                    mixed = True
        left -= n_frozen
        # The links the frozen flows cross, with their count of crossings (integer-valued).
        n_touched = 0
        for f in these:
            for j in range(flow_start[f], flow_start[f + 1]):
                link = k_link[j]
                if count[link] == 0.0:
                    touched[n_touched] = link
                    n_touched += 1
                count[link] += k_mult[j]
        if mixed:  # a cap below the level, within the slack: add each flow's load in turn
            for f in these:
                for j in range(flow_start[f], flow_start[f + 1]):
                    load[k_link[j]] += rates[f] * k_mult[j]
        for i in range(n_touched):
            link = touched[i]
            if not mixed:
                load[link] = load[link] + rate * count[link]
            w = weight[link] - count[link]
            weight[link] = w
            count[link] = 0.0
            headroom[link] = (cap[link] - load[link]) / w if w > 0 else np.inf
    return rates


def _pooled_incidence(rows: np.ndarray, start: np.ndarray, length: np.ndarray,
                      busy: np.ndarray, pool_idx: np.ndarray, pool_mult: np.ndarray,
                      cap: np.ndarray, slot: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray
                                 ]:  # pragma: no cover - compiled
    """``Occupancy.incidence`` of the flows of ``rows`` (that order) from the pool: row
    ``r``'s busy links and their multiplicities are ``pool_idx`` / ``pool_mult`` from
    ``start[r] + length[r]`` on, ``busy[r]`` of them. Returns each entry's flow position,
    its link's local index (links in the order of their last entry, as
    ``Occupancy._localize`` numbers them), its multiplicity, and each local link's capacity;
    ``slot`` is scratch over the global links."""
    n_flows = rows.shape[0]
    n = 0
    for i in range(n_flows):
        n += busy[rows[i]]
    owner = np.empty(n, dtype=np.int64)
    e_link = np.empty(n, dtype=np.int64)
    mult = np.empty(n)
    e = 0
    for i in range(n_flows):
        r = rows[i]
        at = start[r] + length[r]
        for j in range(at, at + busy[r]):
            owner[e] = i
            e_link[e] = pool_idx[j]
            mult[e] = pool_mult[j]
            e += 1
    for e in range(n):
        slot[e_link[e]] = e
    links = np.empty(n, dtype=np.int64)
    n_links = 0
    for e in range(n):  # without a branch: about every other entry is its link's last
        links[n_links] = e_link[e]
        n_links += slot[e_link[e]] == e
    link_cap = np.empty(n_links)
    for i in range(n_links):
        slot[links[i]] = i
        link_cap[i] = cap[links[i]]
    local = np.empty(n, dtype=np.int64)
    for e in range(n):
        local[e] = slot[e_link[e]]
    return owner, local, mult, link_cap


def _pooled_enter(idx: np.ndarray, mult: np.ndarray, flow_id: int, row: int, at: int,
                  count: np.ndarray, sole: np.ndarray, sole_row: np.ndarray,
                  sole_mult: np.ndarray, start: np.ndarray, length: np.ndarray,
                  busy: np.ndarray, pool_idx: np.ndarray, pool_mult: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """A flow over links ``idx`` (multiplicities ``mult``) enters: each link counts it; it
    gets row ``row`` of the pool at ``at`` (its route, then its busy links: those it finds
    in use); it is the sole flow of the links it finds free; a link's sole flow until now
    gains that link as a busy one, at the end of its busy links (in route order). Returns the links
    it met, how many flows each had, and each one's sole flow (meaningful where that is 1)."""
    n = idx.shape[0]
    met = np.empty(n, dtype=np.int64)
    before = np.empty(n, dtype=np.int64)
    soles = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        link = idx[i]
        c = count[link]
        count[link] = c + 1
        pool_idx[at + i] = link
        pool_mult[at + i] = mult[i]
        if c == 0:
            sole[link] = flow_id
            sole_row[link] = row
            sole_mult[link] = mult[i]
            continue
        pool_idx[at + n + k] = link
        pool_mult[at + n + k] = mult[i]
        met[k] = link
        before[k] = c
        soles[k] = sole[link]
        k += 1
        if c == 1:
            r = sole_row[link]
            end = start[r] + length[r] + busy[r]
            pool_idx[end] = link
            pool_mult[end] = sole_mult[link]
            busy[r] += 1
    start[row], length[row], busy[row] = at, n, k
    return met[:k], before[:k], soles[:k]


def _pooled_leave(idx: np.ndarray, count: np.ndarray, rows: np.ndarray, links: np.ndarray,
                  start: np.ndarray, length: np.ndarray, busy: np.ndarray,
                  pool_idx: np.ndarray, pool_mult: np.ndarray, sole_row: np.ndarray,
                  sole_mult: np.ndarray) -> None:  # pragma: no cover - compiled
    """A flow over links ``idx`` leaves: each link uncounts it; row ``rows[i]`` of the pool
    loses busy link ``links[i]`` (its last busy link takes its place), on which it is now
    alone: ``sole_row`` / ``sole_mult`` of the link say so."""
    for i in range(idx.shape[0]):
        count[idx[i]] -= 1
    for i in range(rows.shape[0]):
        r = rows[i]
        lo = start[r] + length[r]
        last = lo + busy[r] - 1
        for j in range(lo, last + 1):
            if pool_idx[j] == links[i]:
                sole_row[links[i]] = r
                sole_mult[links[i]] = pool_mult[j]
                pool_idx[j] = pool_idx[last]
                pool_mult[j] = pool_mult[last]
                busy[r] -= 1
                break


def _argsort_stable(keys: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Positions of ``keys`` in ascending order, ties in position order (a merge sort;
    numba's own sorts cost seconds to compile)."""
    n = keys.shape[0]
    order = np.arange(n)
    spare = np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if keys[order[j]] < keys[order[i]]:
                    spare[k] = order[j]
                    j += 1
                else:
                    spare[k] = order[i]
                    i += 1
                k += 1
            while i < mid:
                spare[k] = order[i]
                i += 1
                k += 1
            while j < hi:
                spare[k] = order[j]
                j += 1
                k += 1
        order, spare = spare, order
        width *= 2
    return order


def _ascending(picked: np.ndarray, marked: np.ndarray) -> np.ndarray:  # pragma: no cover
    """``picked`` (distinct flows, each ``marked``) in ascending order: an insertion sort
    when few, else a scan of the marks."""
    n = picked.shape[0]
    out = np.empty(n, dtype=np.int64)
    if n <= 32:
        for i in range(n):
            value = picked[i]
            j = i
            while j > 0 and out[j - 1] > value:
                out[j] = out[j - 1]
                j -= 1
            out[j] = value
        return out
    k = 0
    for f in range(marked.shape[0]):
        if marked[f]:
            out[k] = f
            k += 1
    return out


def _component_labels(e_flow: np.ndarray, e_link: np.ndarray, n_flows: int,
                      n_links: int) -> np.ndarray:  # pragma: no cover - compiled
    """Each flow's component as its smallest member's position (union-find, the smaller
    root kept): what ``Incidence.labels`` returns."""
    parent = np.arange(n_flows)
    first = np.full(n_links, -1, dtype=np.int64)
    for e in range(e_flow.shape[0]):
        f, link = e_flow[e], e_link[e]
        if first[link] < 0:
            first[link] = f
            continue
        a, b = f, first[link]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b
    for f in range(n_flows):
        parent[f] = parent[parent[f]]  # roots come first, so one step reaches the root
    return parent


def private_cache_dir() -> str | None:
    """``~/.cache/fabriclab/numba`` of the effective user, made if missing; None unless it
    and its parents up to ``~/.cache`` are directories owned by that user that no one else
    may write."""
    uid = os.geteuid()
    try:
        cache = os.path.join(pwd.getpwuid(uid).pw_dir, ".cache")
        path = os.path.join(cache, "fabriclab", "numba")
        os.makedirs(path, mode=0o700, exist_ok=True)
        for directory in (cache, os.path.dirname(path), path):
            st = os.lstat(directory)
            if (not stat.S_ISDIR(st.st_mode) or st.st_uid != uid
                    or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
                return None
    except (OSError, KeyError):
        return None
    return path


def _compile_all() -> None:
    """Wrap the kernels with numba, cached in :func:`private_cache_dir` if there is one (the
    cache's place is fixed when a kernel is wrapped; numba's setting is restored after)."""
    global _argsort_stable, _ascending, fill_rounds, component_labels, pooled_incidence
    global pooled_enter, pooled_leave
    where = private_cache_dir()
    previous = numba.config.CACHE_DIR
    numba.config.CACHE_DIR = where or ""
    try:
        jit = numba.njit(nogil=True, cache=where is not None)
        _argsort_stable = jit(_argsort_stable)
        _ascending = jit(_ascending)
        fill_rounds = jit(_fill_rounds)
        component_labels = jit(_component_labels)
        pooled_incidence = jit(_pooled_incidence)
        pooled_enter = jit(_pooled_enter)
        pooled_leave = jit(_pooled_leave)
    finally:
        numba.config.CACHE_DIR = previous


fill_rounds = component_labels = pooled_incidence = pooled_enter = pooled_leave = None
if AVAILABLE:
    _compile_all()

def compile_now() -> None:
    """Compile every kernel now (each is otherwise compiled at its first call)."""
    if not AVAILABLE:
        return
    one, at = np.ones(1), np.zeros(1, dtype=np.int64)
    fill_rounds(one, at, at, one, one, 2.0, 1.0, 1.0)
    component_labels(at, at, 1, 1)
    pool_idx, pool_mult, busy = np.zeros(2, dtype=np.int64), np.ones(2), at.copy()
    pooled_incidence(at, at, at, busy, pool_idx, pool_mult, one, at.copy())
    pooled_enter(at, one, 0, 0, 0, at.copy(), at.copy(), at.copy(), one.copy(), at.copy(),
                 at.copy(), busy, pool_idx, pool_mult)
    pooled_leave(at, at.copy(), at, at, at, at, busy, pool_idx, pool_mult, at.copy(), one.copy())
