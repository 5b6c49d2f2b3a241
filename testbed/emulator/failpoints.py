"""Named fault-injection points, for the safety tests and the soak (``benchmarks/soak_faults``).

``FABRICLAB_FAILPOINT=<point>:<signal>`` makes the process send itself that signal when it
reaches the point, e.g. ``placement:KILL`` (SIGKILL: no teardown at all) or ``teardown:INT``
(Ctrl-C while tearing down). Unset, every point is a no-op. The points:

- ``bring-up``: hosts and switches exist (namespaces pinned), switches not yet started;
- ``placement``: the first job has been placed by the controller;
- ``collective``: every job's rank 0 has finished at least one collective;
- ``teardown``: the controller is stopped, the fabric not yet.
"""

from __future__ import annotations

import os
import signal

POINTS = ("bring-up", "placement", "collective", "teardown")


def failpoint(point: str) -> None:
    """Send ourselves the configured signal if ``point`` is the configured one."""
    spec = os.environ.get("FABRICLAB_FAILPOINT", "")
    name, _, sig = spec.partition(":")
    if name == point:
        os.kill(os.getpid(), getattr(signal, f"SIG{sig or 'KILL'}"))
