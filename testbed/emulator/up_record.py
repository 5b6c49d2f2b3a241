"""Where a running ``fabriclab up`` is: the record ``fabriclab jobs`` finds it by.

Once its fabric and controller are ready, ``up`` writes ``up.json`` into its run directory
and the same record as ``/run/fabriclab/up/<run_id>.json`` (``<run_id>`` names the run's
cleanup state, :mod:`testbed.emulator.cleanup`). The record names the ``up`` process by PID
*and* start time: PIDs are reused within minutes, so a reader trusts a record only while that
very process still runs. ``up`` removes its ``/run`` copy when it ends and ``fabriclab clean``
removes those of an ``up`` that was killed; the run directory's copy stays as the session's
record. Only one fabric is up at a time (the run lock), so at most one record is live.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from testbed.core.atomic import write_json
from testbed.core.errors import FabricLabError
from testbed.emulator import cleanup, procs
from testbed.emulator.procs import ProcessId

if TYPE_CHECKING:  # reading a record (`fabriclab jobs`) needs no spec models
    from testbed.core.topology import FabricPlan

NAME = "up.json"  # the record's name in the run directory


def registry() -> Path:
    """The directory of live ``up`` records (beside the runs' cleanup state)."""
    return cleanup.STATE_DIR / "up"


def host_addresses(plan: FabricPlan) -> dict[str, list[str]]:
    """Every host's addresses, one per NIC (a ring NIC pair shares one), in NIC order."""
    return {h.name: list(dict.fromkeys(n.ip for n in h.nics)) for h in plan.hosts}


@dataclass(frozen=True)
class UpRecord:
    """One ``fabriclab up``: its process, run, controller ports and hosts."""

    pid: int
    start_ticks: int
    run_id: str
    run_dir: str
    spec: str
    policy: str | None  # None: no controller (static rules)
    api_socket: str | None  # the controller's API (a Unix socket only root can reach)
    openflow_port: int | None
    started: float  # time.time() when the fabric was ready
    hosts: dict[str, list[str]] = field(default_factory=dict)
    version: int = 2

    def __post_init__(self) -> None:
        ints = (self.pid, self.start_ticks, self.version)
        port = self.openflow_port
        if not (all(type(v) is int and v > 0 for v in ints)
                and (port is None or (type(port) is int and 0 < port < 65536))
                and (self.api_socket is None or isinstance(self.api_socket, str))
                and cleanup.RUN_ID.match(str(self.run_id))
                and isinstance(self.run_dir, str) and isinstance(self.spec, str)
                and (self.policy is None or isinstance(self.policy, str))
                and isinstance(self.started, int | float) and isinstance(self.hosts, dict)):
            raise ValueError("malformed up record")

    @classmethod
    def of(cls, run_id: str, run_dir: Path, spec: str, plan: FabricPlan, policy: str | None,
           api_socket: str | None, openflow_port: int | None) -> UpRecord:
        """The record of this process's fabric, which is up now."""
        me = procs.identify(os.getpid())
        assert me is not None
        return cls(me.pid, me.start_ticks, run_id, str(Path(run_dir).resolve()),
                   str(Path(spec).resolve()), policy, api_socket, openflow_port, time.time(),
                   host_addresses(plan))

    @classmethod
    def load(cls, path: Path) -> UpRecord:
        """Read a record; one sentence if it is not one this version reads."""
        try:
            return cls(**json.loads(path.read_text()))
        except OSError as exc:
            raise FabricLabError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (ValueError, TypeError):
            raise FabricLabError(f"{path} is not a `fabriclab up` record this version reads") \
                from None

    @property
    def owner(self) -> ProcessId:
        return ProcessId(self.pid, self.start_ticks)

    def alive(self) -> bool:
        """The ``up`` that wrote this is still running (the same process, not a reused PID)."""
        return self.owner.alive()

    @property
    def registry_path(self) -> Path:
        return registry() / f"{self.run_id}.json"

    def netns(self, host: str) -> Path:
        """The pinned network namespace of one host (``nsenter --net=PATH CMD`` runs in it)."""
        return cleanup.STATE_DIR / "netns" / self.run_id / host

    def save(self) -> None:
        write_json(Path(self.run_dir) / NAME, asdict(self), mode=0o600)
        cleanup.state_dir()
        registry().mkdir(parents=True, exist_ok=True)  # inside a directory only root writes
        write_json(self.registry_path, asdict(self), mode=0o600)

    def forget(self) -> None:
        """Remove the ``/run`` copy (the run directory keeps its own)."""
        self.registry_path.unlink(missing_ok=True)


def registered() -> tuple[list[UpRecord], list[Path]]:
    """Every record under :func:`registry`, and the paths of those this version cannot read."""
    records, unreadable = [], []
    for path in sorted(registry().glob("*.json")) if registry().is_dir() else []:
        try:
            records.append(UpRecord.load(path))
        except FabricLabError:
            unreadable.append(path)
    return records, unreadable


def find(run_dir: Path | None = None) -> UpRecord:
    """The live ``up`` of ``run_dir``, or without one the newest live ``up`` of this machine;
    one sentence saying why there is none."""
    if run_dir is not None:
        path = Path(run_dir) / NAME
        if not Path(run_dir).is_dir():
            raise FabricLabError(f"--run {run_dir}: no such directory")
        if not path.is_file():
            raise FabricLabError(f"--run {run_dir} holds no {NAME}: it is not the run "
                                 "directory of a `fabriclab up`")
        record = UpRecord.load(path)
        if not record.alive():
            raise FabricLabError(f"the `fabriclab up` of {run_dir} is no longer running (its "
                                 f"process {record.pid} has ended): bring the fabric up again "
                                 "with `fabriclab up SPEC` (as root)")
        return record
    records, _ = registered()
    live = [r for r in records if r.alive()]
    if live:
        return max(live, key=lambda r: r.started)
    stale = len(records) - len(live)
    left = (f" ({stale} record{'s' if stale > 1 else ''} of a stopped one left: "
            "`fabriclab clean` removes them)" if stale else "")
    raise FabricLabError(f"no `fabriclab up` is running on this machine{left}: start one with "
                         "`fabriclab up SPEC` (as root), or name its run directory with --run")


def forget_stale() -> list[str]:
    """Remove the ``/run`` records of ``up`` processes that are gone; one line each."""
    records, unreadable = registered()
    report = []
    for r in records:
        if not r.alive():
            r.forget()
            report.append(f"removed the record of a stopped `fabriclab up` (pid {r.pid}, "
                          f"{r.run_dir})")
    report += [f"{p} is not a `fabriclab up` record this version reads: left untouched"
               for p in unreadable]
    return report
