"""The Dask client a sweep runs on: a LocalCluster on this machine, or an existing scheduler.

Both are a :class:`distributed.Client`, so the rest of the sweep does not know which. The
LocalCluster listens on 127.0.0.1 only, with no dashboard, and logs nothing below CRITICAL: a
failed run is reported once, by the sweep, not as a worker's traceback.

A Dask scheduler runs whatever Python its clients submit, as the user its workers run as, and
its clients unpickle what workers send back. So the LocalCluster speaks only TLS with
certificates made for it alone (``security=True``: Dask's ``Security.temporary()``, held in
memory): another local user who finds its port cannot connect, let alone submit code that
would run as root. A remote scheduler must be ``tls://`` (certificates from Dask's own
configuration, ``distributed.comm.tls``) unless the caller says ``insecure``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from testbed.core.errors import FabricLabError

if TYPE_CHECKING:
    from distributed import Client

CONNECT_TIMEOUT_S = 20


@contextmanager
def dask_client(workers: int = 2, scheduler: str | None = None,
                insecure: bool = False) -> Iterator[Client]:
    """A client of ``scheduler`` (``tls://HOST:PORT``; ``tcp://`` only when ``insecure``), or
    of a new TLS-only LocalCluster of ``workers`` processes with one thread each; closed (and
    the cluster stopped) on exit."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise FabricLabError("sweep needs Dask: pip install 'dask[distributed]' (or run "
                             "scripts/install.sh)") from None
    with ExitStack() as stack:
        if scheduler is not None:
            if not scheduler.startswith("tls://") and not insecure:
                raise FabricLabError(
                    f"--scheduler {scheduler} is not tls://: anyone on the way could read the "
                    "runs and hand this process pickles it would load; use a tls:// scheduler "
                    "(certificates from Dask's distributed.comm.tls settings), or add "
                    "--insecure to accept that")
            try:
                client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise FabricLabError(f"cannot reach the Dask scheduler at {scheduler}: "
                                     f"{exc}") from None
        else:
            if workers < 1:
                raise FabricLabError(f"--workers is {workers}; it must be at least 1")
            try:
                cluster = stack.enter_context(LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                    security=True, dashboard_address=None, silence_logs=logging.CRITICAL))
            except ImportError:  # Security.temporary() makes its certificates with it
                raise FabricLabError(
                    "the sweep's local Dask cluster needs the cryptography package for its "
                    "TLS certificates: apt-get install python3-cryptography (python3-os-ken "
                    "brings it) or pip install cryptography") from None
            client = Client(cluster)
        stack.enter_context(client)
        yield client


def workers_note(workers: int) -> str:
    """What a run's wall time means on a LocalCluster of ``workers`` processes."""
    if workers == 1:
        return "1 worker: runs take turns; a run's wall time is that of one process alone"
    return (f"{workers} workers: runs go {workers} at a time, so a run's wall time is its "
            "own but includes sharing the cores with the others (and anything else running)")
