"""Which of a cluster job's cross-leaf flows collided: shared a fabric link with another
active flow (of another job, or of the same job: an ECMP hash collision)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from sdn_app.policies.base import FABRIC_LINKS
from testbed.sim.flows import LinkId, Route


class RailCollisions:
    """Marks a job's collided cross-leaf flows (positions over all its rails) in ``collided``.

    A rail's flows collide on the fabric links its bundle shared with another owner's flow
    (``Flow.shared_idx``) and on those two of its own sub-flows cross. Which flows cross which
    fabric link is worked out once per rail, the first time it is needed.
    """

    def __init__(self, rails: list[list[Sequence[LinkId]]], routes: list[Route],
                 collided: set[int]) -> None:
        self.rails, self.routes, self.collided = rails, routes, collided
        self.offsets = list(itertools.accumulate((len(r) for r in rails), initial=0))
        self._crossed: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # see _crossings
        self._noted: dict[int, set[int]] = {}  # per rail: links (indices) already counted

    def note(self, rail: int, shared_idx: set[int]) -> None:
        """Rail ``rail``'s bundle ended having shared the links ``shared_idx`` (indices of its
        route's occupancy) with other owners."""
        if len(self.collided) == self.offsets[-1]:
            return  # every flow already counts as collided
        noted = self._noted.get(rail)
        if noted is None:  # its own shared links, the first time: then they stay noted
            noted = self._noted[rail] = set()
            new = shared_idx | self._self_shared(rail)
        else:
            new = shared_idx - noted
        if not new:
            return
        noted |= new
        link_ids = self.routes[rail].occupancy.link_ids
        links = [i for i in new if link_ids[i][0] in FABRIC_LINKS]
        if not links:
            return
        crossed, flow = self._crossings(rail)
        self.collided.update(flow[np.isin(crossed, links)].tolist())

    def _crossings(self, rail: int) -> tuple[np.ndarray, np.ndarray]:
        """Every (path, link) of rail ``rail`` as two arrays: the link (its index in the
        occupancy) and the path's flow position; worked out once."""
        found = self._crossed.get(rail)
        if found is None:
            paths = self.rails[rail]
            index = self.routes[rail].occupancy.index
            crossed = np.fromiter(map(index.__getitem__, itertools.chain.from_iterable(paths)),
                                  dtype=np.intp)
            lengths = np.fromiter(map(len, paths), dtype=np.intp, count=len(paths))
            flow = np.repeat(np.arange(self.offsets[rail], self.offsets[rail + 1]), lengths)
            found = self._crossed[rail] = (crossed, flow)
        return found

    def _self_shared(self, rail: int) -> set[int]:
        """The links (indices) two or more of rail ``rail``'s own sub-flows cross."""
        route = self.routes[rail]
        return set(route.idx[route.mult > 1].tolist())
