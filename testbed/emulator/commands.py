"""Run any program as a distributed job on a live fabric: one process per host, in namespace
hosts or containers alike, with the environment torch.distributed (and most launchers) read:

=====================  ==========================================================
``RANK``               the process's rank, the job's host order
``WORLD_SIZE``         the job's host count
``LOCAL_RANK``         0 (one process per host); ``LOCAL_WORLD_SIZE`` 1
``MASTER_ADDR``        rank 0's address on the fabric; ``MASTER_PORT`` the job's
``GLOO_SOCKET_IFNAME`` the host's fabric interface (also ``NCCL_SOCKET_IFNAME``)
``FABRICLAB_JOB_DIR``  the job's own output directory (in the run directory)
=====================  ==========================================================

Each rank's stdout and stderr go to ``stdout-rank{r}.log`` / ``stderr-rank{r}.log`` in the job
directory and its exit code to ``exit_codes.json``; iteration lines in stdout become the
job's iteration trace (:mod:`workloads.iteration_log`). The first rank to fail ends the job:
the others get a short grace, then are killed, as a hung collective would never return.

A rank starts from :func:`base_environment` (what finds programs and Python, and the
locale), not from this root process's whole environment, which may carry secrets (tokens,
agent sockets) a job's program has no business seeing; the job's ``env`` adds to it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.core.atomic import write_json
from testbed.core.errors import FabricLabError
from testbed.core.topology import FabricPlan
from workloads.iteration_log import write_iterations
from workloads.launcher import kill_all

PEER_GRACE_S = 10.0  # after one rank fails, how long the others get to notice and exit
INHERITED = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "PYTHONPATH",
             "VIRTUAL_ENV")


def base_environment() -> dict[str, str]:
    """What a command job inherits from this process: :data:`INHERITED` and ``LC_*``."""
    return {k: v for k, v in os.environ.items() if k in INHERITED or k.startswith("LC_")}


def job_environment(plan: FabricPlan, hosts: list[str], rank: int, *, master_port: int,
                    job_dir: Path, run_id: str, job_id: str) -> dict[str, str]:
    """The distributed-job variables of rank ``rank`` of a job on ``hosts``."""
    if plan.kind == "multidim":
        raise FabricLabError("a command job needs one fabric interface per host: run it on "
                             "a leaf_spine or ocs_leaf_spine fabric")
    nic = plan.node(hosts[rank]).nics[0]
    return {"RANK": str(rank), "WORLD_SIZE": str(len(hosts)), "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": plan.node(hosts[0]).nics[0].ip,
            "MASTER_PORT": str(master_port), "GLOO_SOCKET_IFNAME": nic.intf,
            "NCCL_SOCKET_IFNAME": nic.intf, "FABRICLAB_JOB_DIR": str(job_dir.resolve()),
            "FABRICLAB_RUN_ID": run_id, "FABRICLAB_JOB": job_id, "PYTHONUNBUFFERED": "1"}


def program_argv(argv: list[str]) -> list[str]:
    """``python`` first means the Python that has fabriclab (this one; python3 in the
    project's images)."""
    return [sys.executable, *argv[1:]] if argv[0] == "python" else list(argv)


@dataclass
class CommandResult:
    exit_codes: list[int | None]  # None: killed by the runner (a peer failed, or timeout)
    iterations: list[int]  # iteration lines per rank

    def as_dict(self) -> dict[str, Any]:
        return {"exit_codes": self.exit_codes, "iterations": self.iterations}


def run_command_on_fabric(fab: Any, hosts: list[str], argv: list[str], *, job_dir: Path,
                          env: dict[str, str] | None = None, master_port: int = 29500,
                          wall_timeout: float | None = None, run_id: str = "run",
                          job_id: str = "job") -> CommandResult:
    """Start ``argv`` on every host of the job, wait for all, and raise one sentence naming
    the first rank that failed (its last stderr line) if any did."""
    job_dir.mkdir(parents=True, exist_ok=True)
    procs: dict[int, subprocess.Popen] = {}
    files = []
    try:
        for rank, host in enumerate(hosts):
            variables = job_environment(fab.plan, hosts, rank, master_port=master_port,
                                        job_dir=job_dir, run_id=run_id, job_id=job_id)
            out = open(job_dir / f"stdout-rank{rank}.log", "wb")  # noqa: SIM115 - closed below
            err = open(job_dir / f"stderr-rank{rank}.log", "wb")  # noqa: SIM115
            files += [out, err]
            procs[rank] = fab.popen(host, program_argv(argv),
                                    env=base_environment() | (env or {}) | variables,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        codes = _wait(procs, wall_timeout)
    except BaseException:
        kill_all(list(procs.values()))
        raise
    finally:
        for f in files:
            f.close()
    label = Path(argv[-1]).name if argv else "command"
    counts = [write_iterations(job_dir / f"stdout-rank{r}.log", job_dir, run_id=run_id,
                               job_id=job_id, rank=r, world=len(hosts), label=label)
              for r in range(len(hosts))]
    result = CommandResult(codes, counts)
    write_json(job_dir / "exit_codes.json", result.as_dict())
    failed = [r for r, c in enumerate(codes) if c != 0]
    if failed:
        first = min(failed, key=lambda r: (codes[r] is None, r))
        why = (f"exited with code {codes[first]}" if codes[first] is not None
               else "was killed after a peer failed" if any(c for c in codes)
               else f"did not finish within the run's timeout_s ({wall_timeout:.0f} s)")
        tail = _last_line(job_dir / f"stderr-rank{first}.log")
        raise FabricLabError(f"rank {first} on {hosts[first]} {why}"
                             + (f": {tail}" if tail else "")
                             + f" (logs in {job_dir})")
    return result


def _wait(procs: dict[int, subprocess.Popen], wall_timeout: float | None) -> list[int | None]:
    deadline = None if wall_timeout is None else time.monotonic() + wall_timeout
    codes: dict[int, int | None] = {}
    failed_at: float | None = None
    while len(codes) < len(procs):
        for rank, p in procs.items():
            if rank not in codes and (rc := p.poll()) is not None:
                codes[rank] = rc
                if rc != 0 and failed_at is None:
                    failed_at = time.monotonic()
        now = time.monotonic()
        late = failed_at is not None and now - failed_at > PEER_GRACE_S
        if len(codes) < len(procs) and (late or (deadline is not None and now > deadline)):
            kill_all([p for r, p in procs.items() if r not in codes])
            for r, p in procs.items():
                if r not in codes:
                    p.wait()
                    codes[r] = None
        time.sleep(0.05)
    return [codes[r] for r in sorted(procs)]


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines()
                 if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
