"""The Dask client a sweep runs on: a LocalCluster on this machine, or an existing scheduler.

Both are a :class:`distributed.Client`, so the rest of the sweep does not know which. The
LocalCluster listens on 127.0.0.1 only (scheduler, workers and the dashboard, on a free port)
and logs nothing below CRITICAL: a failed run is reported once, by the sweep, not as a
worker's traceback.
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
def dask_client(workers: int = 2, scheduler: str | None = None) -> Iterator[Client]:
    """A client of ``scheduler`` (``tcp://HOST:PORT``), or of a new LocalCluster of
    ``workers`` processes with one thread each; closed (and the cluster stopped) on exit."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise FabricLabError("sweep needs Dask: pip install 'dask[distributed]' (or run "
                             "scripts/install.sh)") from None
    with ExitStack() as stack:
        if scheduler is not None:
            try:
                client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise FabricLabError(f"cannot reach the Dask scheduler at {scheduler}: "
                                     f"{exc}") from None
        else:
            if workers < 1:
                raise FabricLabError(f"--workers is {workers}; it must be at least 1")
            cluster = stack.enter_context(LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL))
            client = Client(cluster)
        stack.enter_context(client)
        yield client
