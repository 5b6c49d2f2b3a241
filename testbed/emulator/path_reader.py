"""Which spine each pair of a job's hosts crossed, from the spines' path counters.

Read after every leg of a run (each solo baseline, then all jobs together): the counters
grow over the run, so a leg's bytes are the difference from the reading before it. The run
keeps them in ``paths.json`` (:func:`leg_paths`); the job invariant predicts every job's time
on them (:mod:`analysis.job_invariant`).
"""

from __future__ import annotations

import subprocess
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from sdn_app.path_counters import PairBytes, counted, macs, parse_dump
from testbed.core.topology import FabricPlan
from testbed.emulator.preflight import ovs_env

OFCTL_TIMEOUT_S = 10


def read(plan: FabricPlan, rundir_of: Callable[[str], str | None] = lambda _sw: None
         ) -> dict[tuple[int, str, str], int] | None:
    """(spine, source host, destination host) → bytes counted so far on every spine of
    ``plan``; None where the fabric has no counters or a switch cannot be read.
    ``rundir_of``: the Open vSwitch a switch is in (None: this machine's)."""
    if not counted(plan):
        return None
    # OpenFlow's flow counters trail the datapath by a revalidator round (up to a second):
    # wait for one, so that the last packets of a leg are counted in it
    spines = [f"spine{spine}" for spine in range(plan.spec.spines)]
    for rundir in dict.fromkeys(rundir_of(s) for s in spines):
        subprocess.run(["ovs-appctl", f"--timeout={OFCTL_TIMEOUT_S}", "revalidator/wait"],
                       capture_output=True, timeout=OFCTL_TIMEOUT_S + 2, env=ovs_env(rundir))
    names = macs(plan)
    found: dict[tuple[int, str, str], int] = {}
    for spine in range(plan.spec.spines):
        try:
            out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows",
                                  f"spine{spine}"], capture_output=True, text=True,
                                 timeout=OFCTL_TIMEOUT_S, env=ovs_env(rundir_of(f"spine{spine}")))
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            return None
        for p in parse_dump(spine, out.stdout, names):
            found[(p.spine, p.src, p.dst)] = found.get((p.spine, p.src, p.dst), 0) + p.bytes
    return found


def leg_paths(before: dict[tuple[int, str, str], int] | None,
              after: dict[tuple[int, str, str], int] | None,
              jobs: dict[str, list[str]]) -> dict[str, list[dict[str, Any]]] | None:
    """Per job of a leg (``jobs``: name → hosts), the pairs of its hosts that crossed a
    spine during the leg, with their bytes per spine, largest first; None without readings."""
    if after is None or before is None:
        return None
    owner = {h: name for name, hosts in jobs.items() for h in hosts}
    per: dict[str, list[PairBytes]] = defaultdict(list)
    for (spine, src, dst), total in after.items():
        sent = total - before.get((spine, src, dst), 0)
        job = owner.get(src)
        if sent > 0 and job is not None and owner.get(dst) == job:
            per[job].append(PairBytes(spine, src, dst, sent))
    return {job: [{"src": p.src, "dst": p.dst, "spine": p.spine, "bytes": p.bytes}
                  for p in sorted(per.get(job, []), key=lambda p: (p.src, p.dst, -p.bytes))]
            for job in jobs}
