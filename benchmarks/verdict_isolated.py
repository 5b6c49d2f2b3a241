"""Verdicts on isolated jobs; BENCHMARKS.md "The pipeline invariants: isolated jobs, busy loops, …".

Is the verdict right about isolated jobs? (root; issue 30's "Done when" matrix)

Two vClos jobs of 2 hosts each (h0-h2 and h1-h3, each across both leaves by its own spine) on
a 2-leaf, 2-spine fabric, 8 MiB All-Reduces, run with ``fabriclab run``'s runner in four
settings, ``--tries`` times each:

- ``quiet@50``: nothing else, 50 Mbit/s links (must be called faithful);
- ``quiet@100``: nothing else, 100 Mbit/s;
- ``busy@100``: three busy-loop processes beside the run (started and ended here), 100 Mbit/s;
- ``switch0.15@50``: ovs-vswitchd held to 0.15 of a core by a CPU quota for the run, 50 Mbit/s.

Per try it prints each job's worst ratio of the job invariant (since issue 40: the simulator's
predicted time on its paths ÷ its measured time; before, busbw ÷ its links' TCP goodput), the
verdict and the invariants that tripped; per setting, the ratios as median [min, max], how
many tries were called faithful, and whether every faithful try had every job at ≥ 0.90
(the issue's bound). Last, what the scheduler sampler cost (its rounds per second and its
thread's CPU per second of run).

    flock /tmp/fabriclab-roottests.lock .venv/bin/python benchmarks/verdict_isolated.py
        [--tries 5] [--settings quiet@50,quiet@100,busy@100,switch0.15@50] [--iterations 5]
        [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import tempfile
import threading
from pathlib import Path

from rich.console import Console

from testbed.core.experiment import expand
from testbed.core.units import format_spread
from testbed.emulator.runner import Runner
from testbed.emulator.schedstat import switch_pid
from testbed.emulator.stress import busy_loops, cpu_quota

BOUND = 0.90
SETTINGS = "quiet@50,quiet@100,busy@100,switch0.15@50"


def experiment(rate_mbit_s: float, iterations: int):
    (exp,) = expand({
        "name": f"verdict-{rate_mbit_s:g}",
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "host_link_mbit_s": rate_mbit_s, "uplink_mbit_s": rate_mbit_s},
        "policy": "vclos", "timeout_s": 300,
        "jobs": [{"name": name, "hosts": hosts,
                  "workload": {"kind": "allreduce", "sizes": ["8MiB"],
                               "iterations": iterations, "warmup": 1}}
                 for name, hosts in (("a", ["h0", "h2"]), ("b", ["h1", "h3"]))]})
    return exp


def stressed(setting: str) -> contextlib.AbstractContextManager:
    """What loads the machine in ``setting`` (undone when the block ends)."""
    if setting.startswith("busy"):
        return busy_loops(3)
    if m := re.match(r"switch([\d.]+)@", setting):
        pid = switch_pid()
        if pid is None:
            raise SystemExit("ovs-vswitchd is not running (bash scripts/start-ovs.sh)")
        return cpu_quota(pid, float(m.group(1)))
    return contextlib.nullcontext()


class DatapathStats:
    """The userspace datapath's own counters for its main thread (``ovs-appctl
    dpif-netdev/pmd-stats-show``, cumulative since the datapath was made), read every
    ``period_s`` while a run goes; the last reading is kept (the fabric's bridges, and with
    them the datapath, go away at teardown). A candidate signal for the switch invariant,
    printed beside the one the verdict uses."""

    KEYS = ("packets received", "miss with success upcall", "miss with failed upcall",
            "avg. packets per output batch")

    def __init__(self, period_s: float = 2.0) -> None:
        self.period_s = period_s
        self.last: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> DatapathStats:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            out = subprocess.run(["ovs-appctl", "--timeout=5", "dpif-netdev/pmd-stats-show"],
                                 capture_output=True, text=True)
            main = out.stdout.split("main thread:", 1)[-1] if out.returncode == 0 else ""
            found = {k.strip(): float(v.split()[0]) for k, _, v in
                     (ln.partition(":") for ln in main.splitlines()[:20])
                     if k.strip() in self.KEYS and v.strip()}
            if found:
                self.last = found


def one_try(setting: str, iterations: int, out: Path) -> dict:
    rate = float(setting.split("@")[1])
    runner = Runner(experiment(rate, iterations), out, Console(quiet=True))
    with stressed(setting), DatapathStats() as dp:
        run_dir = runner.run()
    if runner.status == "incomplete":  # Ctrl-C or SIGTERM: the Runner tore down; stop here
        raise SystemExit(f"{setting}: interrupted; no further tries")
    fid = json.loads((run_dir / "fidelity.json").read_text())
    ratios = {v["job"]: min(s["ratio"] for s in v["sizes"]) for v in fid["job"]["jobs"]
              if v["sizes"]}
    tripped = sorted({r.split(":")[0] if " invariant:" in r else "link"
                      for r in fid["reasons"]})
    return {"ratios": ratios, "verdict": fid["verdict"], "tripped": tripped,
            "first": fid["reasons"][0] if fid["reasons"] else "",
            "status": runner.status, "cost": fid.get("sched_cost") or {},
            "idle": (fid.get("cpu_idle_min"), fid.get("cpu_idle_mean")), "dp": dp.last,
            "switch_wait": max((v["worst_wait_share"] for v in fid["switch"]["violations"]),
                               default=0.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tries", type=int, default=5)
    ap.add_argument("--settings", default=SETTINGS)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="keep the run directories here")
    args = ap.parse_args()
    costs: list[dict] = []
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        keep = args.keep or Path(tmp)
        for setting in args.settings.split(","):
            tries = []
            for k in range(args.tries):
                r = one_try(setting, args.iterations, keep / f"{setting}-{k}")
                tries.append(r)
                costs.append(r["cost"])
                print(f"{setting:14} try {k + 1}: "
                      + " ".join(f"{j} {x:.2f}" for j, x in sorted(r["ratios"].items()))
                      + "  CPU idle min {:.0%} mean {:.0%}".format(*r["idle"])
                      + f"  {r['verdict']}"
                      + (f" ({', '.join(r['tripped'])}: {r['first'][:160]})"
                         if r["tripped"] else "")
                      + ("" if r["status"] == "ok" else f"  run {r['status']}"), flush=True)
                dp = r["dp"]
                print(f"{'':14}   switch: worst wait share {r['switch_wait']:.2f}; datapath "
                      f"main thread: {dp.get('packets received', 0):.0f} packets, upcalls "
                      f"{dp.get('miss with success upcall', 0):.0f} ok / "
                      f"{dp.get('miss with failed upcall', 0):.0f} failed, "
                      f"{dp.get('avg. packets per output batch', 0):.2f} packets per batch",
                      flush=True)
            every = [x for r in tries for x in r["ratios"].values()]
            faithful = [r for r in tries if r["verdict"] == "faithful"]
            held = all(x >= BOUND for r in faithful for x in r["ratios"].values())
            summary.append(f"{setting:14} job invariant ratio "
                           f"{format_spread(every, '.2f') if every else '-'}"
                           f"; faithful {len(faithful)}/{len(tries)}; every faithful try "
                           f"≥ {BOUND}: {'yes' if held else 'NO'}")
    print("\nper setting (median [min, max] over every job of every try):")
    print("\n".join(summary))
    hz = [c["sample_hz"] for c in costs if c.get("sample_hz")]
    cpu = [c["cpu_s_per_s"] * 100 for c in costs if c.get("cpu_s_per_s") is not None]
    if hz and cpu:
        print(f"scheduler sampler: {format_spread(hz, '.1f')} rounds/s, "
              f"{format_spread(cpu, '.2f')} % of a core")


if __name__ == "__main__":
    main()
