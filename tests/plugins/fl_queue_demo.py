"""A queue discipline from outside fabriclab, as a researcher would write one:
``last-come-first`` tries the latest arrival first, head-of-line (docs/extending.md, "A queue
discipline"). ``tests/test_queues.py`` installs it through an entry point."""

from __future__ import annotations

from testbed.sim.queues import QueueDiscipline, QueueView, WaitingJob


class LastComeFirst(QueueDiscipline):
    """The latest arrival first; nothing passes it while it is refused. Bound: none proved
    (docs/vclos-paper.md, "Queue disciplines"): gpu-count under it is a reference only."""

    name = "last-come-first"

    def next_job(self, view: QueueView) -> WaitingJob | None:
        last = view.waiting[-1] if view.waiting else None
        return None if last is None or last.job_id in view.refused else last


QUEUE = LastComeFirst()
