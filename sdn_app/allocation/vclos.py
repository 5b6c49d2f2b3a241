"""Static vClos: a job's m leaves and n spines must have all m*n links free (a free biclique)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from sdn_app.allocation.ledger import Allocation, AllocationRefused, Ledger, clos_allocation


def try_vclos(
    ledger: Ledger, job_id: str, m: int, n: int, leaves: list[int] | None = None
) -> Allocation | None:
    """m leaves x n spines with all links free; ``leaves`` fixes the leaves."""
    if leaves is None:
        found = find_free_biclique(ledger, m, n)
        if found is None:
            return None
        leaves, spines = found
    else:
        spines = sorted(common_spines(ledger, leaves)[:n])
        if len(spines) < n:
            return None
    return clos_allocation(job_id, "vclos", ledger.take_slots(sorted(leaves), n), spines, {})


def claim_vclos(ledger: Ledger, job_id: str, slots: dict[int, list[int]]) -> Allocation:
    """Explicit hosts (n on each of m leaves) and n spines with free links to all m leaves."""
    sizes = {len(v) for v in slots.values()}
    if len(sizes) != 1:
        raise AllocationRefused(
            "unshapeable", "vclos needs the same number of hosts on every leaf of a job"
        )
    n = sizes.pop()
    free = [s for s in range(ledger.spines) if all(ledger.link_free(leaf, s) for leaf in slots)]
    if len(free) < n:
        raise AllocationRefused(
            "fragmented",
            f"fragmented: {n} spines with free links to leaves {sorted(slots)} are needed, "
            f"{len(free)} exist",
            cause="links",
        )
    free.sort(key=lambda s: (ledger.free_links_of_spine(s), s))
    return clos_allocation(job_id, "vclos", slots, sorted(free[:n]), {})


def find_free_biclique(
    ledger: Ledger, m: int, n: int, mask_of: Callable[[int], int] | None = None
) -> tuple[list[int], list[int]] | None:
    """Exact search: m leaves (>= n free hosts each) and n spines, all m*n links free: the
    leaves of :func:`find_free_leaves`, and among the spines with a free link to all of them,
    those with the fewest free links first, keeping idle spines for larger jobs."""
    leaves = find_free_leaves(ledger, m, n, mask_of)
    if leaves is None:
        return None
    return leaves, sorted(common_spines(ledger, leaves)[:n])


def find_free_leaves(
    ledger: Ledger, m: int, n: int, mask_of: Callable[[int], int] | None = None
) -> list[int] | None:
    """Exact search: m leaves (>= n free hosts each) sharing n spines, sorted, or None
    (:func:`search_leaves` over the leaves with n free hosts, best fit first).

    ``mask_of(leaf)``: the spines a leaf can use, as a bitmask (default: its free links).
    """
    mask_of = mask_of or ledger.free_spine_mask
    return search_leaves({leaf: mask_of(leaf) for leaf in ledger.leaves_with(n)}, m, n,
                         ledger.spines)


def search_leaves(masks: dict[int, int], m: int, n: int, spines: int,
                  among: set[int] | None = None) -> list[int] | None:
    """The first m of ``masks``' leaves (in its order) whose masks share n spines, sorted,
    or None. ``among``: only sets holding at least one of these leaves are looked for (the
    first such set in the same order; branches without one are cut).

    Backtracking over leaves in order, keeping the set (a bitmask) of
    spines still free to every chosen leaf; a branch is cut as soon as fewer
    than n common spines remain, or fewer leaves after it still share n spines with
    the chosen ones than are still to choose (those leaves only shrink deeper down, so
    no cut branch holds a hit). The first hit is returned, so best-fit leaves
    win.
    """
    candidates = [mask for mask in masks.values() if mask.bit_count() >= n]
    leaf_at = [leaf for leaf, mask in masks.items() if mask.bit_count() >= n]
    marked = [among is None or leaf in among for leaf in leaf_at]
    if not any(marked):
        return None

    def extend(viable: list[int], chosen: list[int], common: int,
               holds: bool) -> list[int] | None:
        """``viable``: indices of the leaves after the last chosen one that share at least n
        spines with ``common``, in order; ``holds``: a chosen leaf is marked."""
        left = m - len(chosen)
        if left == 0:
            return chosen
        for k in range(len(viable) - left + 1):
            i = viable[k]
            still_common = common & candidates[i]
            # the leaves after i that still share n spines with the chosen ones and i
            after = [j for j in viable[k + 1:] if (still_common & candidates[j]).bit_count() >= n]
            if len(after) < left - 1:
                continue
            now_holds = holds or marked[i]
            if not now_holds and not any(marked[j] for j in after):
                continue  # no marked leaf left to choose in this branch
            found = extend(after, [*chosen, leaf_at[i]], still_common, now_holds)
            if found is not None:
                return found
        return None

    leaves = extend(list(range(len(candidates))), [], (1 << spines) - 1, False)
    return None if leaves is None else sorted(leaves)


def bit_mask(flags: np.ndarray) -> int:
    """Bit i set for each true ``flags[i]``."""
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def bit_rows(masks: list[int], width: int) -> np.ndarray:
    """``[i, b]``: bit b of ``masks[i]`` (b below ``width``), as 0/1 (uint8): the inverse
    of :func:`bit_mask`, row by row."""
    size = (width + 7) // 8
    raw = b"".join(mask.to_bytes(size, "little") for mask in masks)
    return np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(len(masks), size),
                         axis=1, bitorder="little")[:, :width]


def peel(masks: dict[int, int], m: int, n: int, spines: int) -> dict[int, int]:
    """``masks`` cut to what m leaves sharing n spines can use, in the same order: repeatedly,
    spines that fewer than m leaves have are dropped from every mask, then leaves left with
    fewer than n spines (a set's leaves and their n shared spines are never dropped: each
    such spine has the set's m leaves, each such leaf those n spines). So
    :func:`search_leaves` finds the same first set in the cut masks; empty when fewer than m
    leaves are left."""
    if not masks or m < 1:
        return masks
    leaves = list(masks)
    rows = bit_rows(list(masks.values()), spines).astype(np.float32)
    alive = rows @ np.ones(spines, dtype=np.float32) >= n
    count = int(alive.sum())
    while True:  # both only shrink: done when no leaf is dropped
        if count < m:
            return {}
        kept = alive.astype(np.float32) @ rows >= m
        alive &= rows @ kept.astype(np.float32) >= n
        count, before = int(alive.sum()), count
        if count == before:
            break
    spine_mask = bit_mask(kept)
    return {leaf: masks[leaf] & spine_mask
            for leaf, live in zip(leaves, alive.tolist(), strict=True) if live}


def common_spines(ledger: Ledger, leaves: Iterable[int]) -> list[int]:
    """Spines with a free link to every one of ``leaves``, fewest free links first."""
    leaves = list(leaves)
    common = [
        s for s in range(ledger.spines) if all(ledger.link_free(leaf, s) for leaf in leaves)
    ]
    return sorted(common, key=lambda s: (ledger.free_links_of_spine(s), s))
