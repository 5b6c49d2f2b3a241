"""Which of a cluster job's cross-leaf flows collided: shared a fabric link with another
active flow (of another job, or of the same job: an ECMP hash collision)."""

from __future__ import annotations

import itertools

from sdn_app.policies.base import FABRIC_LINKS
from testbed.sim.flows import LinkId, Route


class RailCollisions:
    """Marks a job's collided cross-leaf flows (positions over all its rails) in ``collided``.

    A rail's flows collide on the fabric links its bundle shared with another owner's flow
    (``Flow.shared``) and on those two of its own sub-flows cross. Which flows cross which
    fabric link is worked out once per rail, the first time it is needed.
    """

    def __init__(self, rails: list[list[list[LinkId]]], routes: list[Route],
                 collided: set[int]) -> None:
        self.rails, self.routes, self.collided = rails, routes, collided
        self.offsets = list(itertools.accumulate((len(r) for r in rails), initial=0))
        self._own: dict[int, list[LinkId]] = {}
        self._on_link: dict[int, dict[LinkId, list[int]]] = {}
        self._noted: dict[int, set[LinkId]] = {}  # per rail: links already counted

    def note(self, rail: int, shared: set[LinkId]) -> None:
        """Rail ``rail``'s bundle ended having shared ``shared`` with other owners."""
        if len(self.collided) == self.offsets[-1]:
            return  # every flow already counts as collided
        noted = self._noted.setdefault(rail, set())
        links = [link for link in shared - noted if link[0] in FABRIC_LINKS]
        links.extend(link for link in self._self_shared(rail) if link not in noted)
        if not links:
            return
        noted.update(links)
        on_link = self._on_link.get(rail)
        if on_link is None:
            on_link = self._on_link[rail] = {}
            for i, path in enumerate(self.rails[rail], start=self.offsets[rail]):
                for link in path:
                    if link[0] in FABRIC_LINKS:
                        on_link.setdefault(link, []).append(i)
        for link in links:
            self.collided.update(on_link[link])

    def _self_shared(self, rail: int) -> list[LinkId]:
        own = self._own.get(rail)
        if own is None:
            route = self.routes[rail]
            own = [] if not (route.mult > 1).any() else [
                link for link, k in route.links.items() if k > 1 and link[0] in FABRIC_LINKS]
            self._own[rail] = own
        return own
