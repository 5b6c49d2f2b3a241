"""Verdicts under five kinds of fault, on vClos and ECMP; BENCHMARKS.md "The verdict under
every policy".

Is the verdict right under every routing policy? (root; issue 40's "Done when" matrix)

vClos: two jobs of 2 hosts (h0-h2, h1-h3, each on a spine of its own); ECMP: one job (h0-h2);
``ecmp-shared``: both jobs under ECMP over one spine, sharing its links; a 2-leaf, 2-spine
(``ecmp-shared``: 1-spine) fabric at ``--mbit-s`` (50), 8 MiB All-Reduces (1 warm-up,
``--iterations`` measured), each run with ``fabriclab run``'s runner, the fault held for the
run's legs:

- ``quiet``: nothing else;
- ``worker``: job a's rank 0 held to 0.01 of a core (in periods of 1 s) by a CPU quota from
  its first connection;
- ``busy``: three busy-loop processes beside the run;
- ``switch``: ovs-vswitchd held to 0.15 of a core;
- ``loss``: 1 % of the TCP packets h0 sends dropped in its own namespace (iptables);
- ``flood``: unshaped TCP between two namespaces of the benchmark's own, through an Open
  vSwitch bridge of its own (the same ovs-vswitchd forwards it);
- ``norealtime``: ovs-vswitchd's forwarding thread taken off real-time (scripts/start-ovs.sh
  runs it SCHED_RR), with three busy loops beside the run.

Per try: each job's ratio of the simulator's predicted time on its flows' paths to its measured
time (the job invariant's; 1 = as predicted), the verdict and the invariants that tripped with
the first reason. Per setting and policy: the ratios, median [min, max], how many tries were
called faithful, and the issue's two properties: every faithful try has every job within 10 %
of its prediction; every try with a job outside it is called not faithful.

    flock /tmp/fabriclab-roottests.lock .venv/bin/python benchmarks/verdict_faults.py
        [--tries 3] [--settings quiet,worker,busy,switch,loss,flood]
        [--policies vclos,ecmp,ecmp-shared]
        [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import threading
import time
from pathlib import Path

from rich.console import Console

from analysis.job_invariant import worst_size
from testbed.core.experiment import expand
from testbed.core.units import format_spread
from testbed.emulator.runner import Runner
from testbed.emulator.schedstat import SchedSampler, switch_pid
from testbed.emulator.stress import (
    busy_loops,
    connected,
    cpu_quota,
    flood,
    host_loss,
    not_realtime,
)

TOLERANCE = 0.10
# ECMP over one spine: jobs a and b share both uplinks, so the job invariant judges them
# together (analysis.job_invariant.judge_shared)
SHARED = "ecmp-shared"
SETTINGS = "quiet,worker,busy,switch,loss,flood,norealtime"
WORKER_CORES = 0.01  # in every second: held back ~1 s at a time, longer than its data lasts
WORKER_PERIOD_US = 1_000_000
LOSS = 0.01


def experiment(policy: str, mbit_s: float, iterations: int):
    shared = policy == SHARED
    pairs = (("a", ["h0", "h2"]), ("b", ["h1", "h3"]))[: 1 if policy == "ecmp" else 2]
    (exp,) = expand({
        "name": f"faults-{policy}",
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 1 if shared else 2,
                   "hosts_per_leaf": 2, "host_link_mbit_s": mbit_s, "uplink_mbit_s": mbit_s},
        "policy": "ecmp" if shared else policy, "timeout_s": 300,
        "jobs": [{"name": name, "hosts": hosts,
                  "workload": {"kind": "allreduce", "sizes": ["8MiB"],
                               "iterations": iterations, "warmup": 1}}
                 for name, hosts in pairs]})
    return exp


@contextlib.contextmanager
def held_worker(cores: float):
    """Job a's rank 0 held to ``cores`` from its first connection (the sampler is told of
    every worker the runner spawns; the first of job a is rank 0)."""
    spawned: list[int] = []
    stop = threading.Event()
    original = SchedSampler.watch
    landed = {"pid": None, "held_s": 0.0}

    def noted(self, pid: int, job: str, process: str) -> None:
        original(self, pid, job, process)
        if job == "a" and process.endswith("rank0"):
            spawned.append(pid)

    def hold() -> None:  # from its first connection to its peer (it has started)
        while not stop.wait(0.01):
            if spawned and connected(spawned[0]):
                landed["pid"], t0 = spawned[0], time.monotonic()
                with cpu_quota(spawned[0], cores, WORKER_PERIOD_US):
                    stop.wait()
                landed["held_s"] = round(time.monotonic() - t0, 1)

    SchedSampler.watch = noted
    t = threading.Thread(target=hold, daemon=True)
    t.start()
    try:
        yield landed
    finally:
        stop.set()
        t.join()
        SchedSampler.watch = original



class FaultRunner(Runner):
    """The runner, with ``fault(fab)`` held around every leg it runs."""

    def __init__(self, *args, fault, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fault = fault

    landed = None  # what the fault's context yielded (host_loss: the packets it dropped)

    def _leg(self, fab, jobs, what, key) -> None:
        with self.fault(fab) as landed:
            self.landed = landed
            super()._leg(fab, jobs, what, key)


def fault_of(setting: str):
    """fab → the context manager that holds ``setting``'s fault."""
    if setting == "worker":
        return lambda fab: held_worker(WORKER_CORES)
    if setting == "busy":
        return lambda fab: busy_loops(3)
    if setting == "switch":
        pid = switch_pid()
        if pid is None:
            raise SystemExit("ovs-vswitchd is not running (bash scripts/start-ovs.sh)")
        return lambda fab: cpu_quota(pid, 0.15)
    if setting == "loss":
        return lambda fab: host_loss(fab.host_pids()["h0"], LOSS)
    if setting == "flood":
        return lambda fab: flood()
    if setting == "norealtime":
        pid = switch_pid()
        if pid is None:
            raise SystemExit("ovs-vswitchd is not running (bash scripts/start-ovs.sh)")
        return lambda fab: _both(not_realtime(pid), busy_loops(3))
    return lambda fab: contextlib.nullcontext()


@contextlib.contextmanager
def _both(first, second):
    with first, second:
        yield


def one_try(policy: str, setting: str, args, out: Path) -> dict:
    runner = FaultRunner(experiment(policy, args.mbit_s, args.iterations), out,
                         Console(quiet=True), fault=fault_of(setting))
    run_dir = runner.run()
    if runner.status == "incomplete":  # Ctrl-C or SIGTERM: the Runner tore down; stop here
        raise SystemExit(f"{policy} {setting}: interrupted; no further tries")
    fid = json.loads((run_dir / "fidelity.json").read_text())
    ratios = {v["job"]: worst_size(v)["ratio"]
              for v in fid["job"]["jobs"] if v["sizes"]}
    tripped = sorted({r.split(" invariant:")[0] if " invariant:" in r else "link"
                      for r in fid["reasons"]})
    groups = [v["shared"] for v in fid["job"]["jobs"] if v.get("shared")]
    return {"ratios": ratios,
            "held": sorted(v["job"] for v in fid["job"]["jobs"]
                           if (v.get("shared") or {}).get("held")),
            "span_ratio": groups[0]["span_ratio"] if groups else None,
            "verdict": fid["verdict"], "tripped": tripped,
            "first": fid["reasons"][0] if fid["reasons"] else "", "status": runner.status,
            "prediction_s": (fid.get("paths") or {}).get("prediction_s"),
            "landed": runner.landed if isinstance(runner.landed, dict) else None,
            "run": str(run_dir)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--settings", default=SETTINGS)
    ap.add_argument("--policies", default=f"vclos,ecmp,{SHARED}")
    ap.add_argument("--mbit-s", type=float, default=50.0)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="keep the run directories here")
    args = ap.parse_args()
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        keep = args.keep or Path(tmp)
        for policy in args.policies.split(","):
            for setting in args.settings.split(","):
                tries = []
                for k in range(args.tries):
                    r = one_try(policy, setting, args, keep / f"{policy}-{setting}-{k}")
                    tries.append(r)
                    print(f"{policy:11} {setting:10} try {k + 1}: "
                          + " ".join(f"{j} {x:.2f}" for j, x in sorted(r["ratios"].items()))
                          + (f"  group span {r['span_ratio']:.2f}" if r["span_ratio"] else "")
                          + (f" (held: {', '.join(r['held'])})" if r["held"] else "")
                          + f"  {r['verdict']}"
                          + (f" ({', '.join(r['tripped'])}: {r['first'][:200]})"
                             if r["tripped"] else "")
                          + ("" if r["status"] == "ok" else f"  run {r['status']}")
                          + (f"  [fault: {r['landed']}]" if r["landed"] else ""),
                          flush=True)
                every = [x for r in tries for x in r["ratios"].values()]
                faithful = [r for r in tries if r["verdict"] == "faithful"]
                # a job outside the tolerance may be held with the jobs sharing its links
                held = all(abs(1 - x) <= TOLERANCE or j in r["held"] for r in faithful
                           for j, x in r["ratios"].items())
                caught = all(r["verdict"] != "faithful" for r in tries
                             if any(abs(1 - x) > TOLERANCE and j not in r["held"]
                                    for j, x in r["ratios"].items()))
                summary.append(
                    f"{policy:6} {setting:7} predicted ÷ measured "
                    f"{format_spread(every, '.2f') if every else '-'}; faithful "
                    f"{len(faithful)}/{len(tries)}; every faithful try within "
                    f"{TOLERANCE:.0%} (or held with its group): {'yes' if held else 'NO'}; "
                    "every try outside it called "
                    f"not faithful: {'yes' if caught else 'NO'}")
    print("\nper policy and setting (median [min, max] over every job of every try; each job's "
          "worst size):")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
