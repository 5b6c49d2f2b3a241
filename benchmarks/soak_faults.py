"""Leftovers after faults; BENCHMARKS.md "Soak: a random fault in every run, then …".

Soak: many runs, each hit by one random fault, each followed by `fabriclab clean`; after
every round nothing of any run may be left and both canaries must be alive.

    .venv/bin/python benchmarks/soak_faults.py --rounds 20 --seed 1   # as root

Faults (drawn at random each round, with a random moment):
- ``kill9``: SIGKILL to the runner after a random delay (bring-up, placement, collectives or
  teardown, wherever it lands), or at a random failpoint (``kill9@<point>``);
- ``sigint``: Ctrl-C to the runner after a random delay (the run must tear down by itself);
- ``controller``: SIGKILL to the run's controller mid-run (the run must restart it and pass);
- ``ovs``: SIGKILL to both OVS daemons mid-run (the run fails in one sentence; `clean` must
  say OVS is down, then finish once OVS is started again).

Prints one row per round and a summary (faults tried, leftovers found, canaries alive), and
ends with one normal run that must pass. Exit status 1 if any round left something or a
canary died.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from testbed.emulator import procs
from testbed.emulator.failpoints import POINTS
from testbed.emulator.faults import (
    Canaries,
    fabriclab,
    fault_spec,
    ovs_daemons,
    recorded,
    residue,
    run_of,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ("kill9", "kill9", "kill9@point", "sigint", "controller", "ovs")


def clean() -> int:
    """`fabriclab clean`, as a user would run it; its exit status."""
    proc = fabriclab("clean")
    proc.communicate(timeout=300)
    return proc.returncode


def start_ovs() -> None:
    subprocess.run(["bash", str(ROOT / "scripts" / "start-ovs.sh")], check=True,
                   capture_output=True)


def one_round(work: Path, rng: random.Random, k: int) -> dict:
    fault = rng.choice(FAULTS)
    spec = work / f"spec{k}.yaml"
    spec.write_text(yaml.safe_dump(fault_spec(iterations=30)))
    out = work / f"out{k}"
    row: dict = {"round": k, "fault": fault}
    failpoint = None
    if fault == "kill9@point":
        point = rng.choice(POINTS)
        failpoint, row["fault"] = f"{point}:KILL", f"kill9@{point}"
    t0 = time.monotonic()
    run = fabriclab("run", str(spec), "--out", str(out), "--no-report", failpoint=failpoint)
    delay = rng.uniform(0.5, 20.0)
    row["at_s"] = round(delay, 1) if failpoint is None else None
    hit = None
    if fault in ("kill9", "sigint"):
        try:
            run.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            run.send_signal(signal.SIGKILL if fault == "kill9" else signal.SIGINT)
            hit = "runner"
    elif fault in ("controller", "ovs"):
        wait_until(lambda: run_of(out), 60)
        time.sleep(min(delay, 8.0))
        state = run_of(out)  # read again: the processes recorded by now
        if fault == "controller" and state is not None:
            victim = recorded(state, b"sdn_app.controller")
            hit = "controller" if victim and procs.send(victim, signal.SIGKILL) else None
        elif fault == "ovs" and state is not None and (daemons := ovs_daemons()):
            procs.terminate(daemons, grace_s=0)
            hit = "ovs"
    run.communicate(timeout=600)
    row["runner_exit"] = run.returncode
    row["fault_hit"] = hit or ("failpoint" if failpoint else "run ended first")
    row["run_s"] = round(time.monotonic() - t0, 1)
    summaries = list(out.glob("*/summary.json"))
    summary = json.loads(summaries[0].read_text()) if summaries else {}
    row["status"] = summary.get("status", "killed")
    row["error"] = summary.get("error")
    if fault == "ovs":
        row["clean_with_ovs_down"] = clean()
        start_ovs()
    row["clean_exit"] = clean()
    row["leftovers"] = residue()
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows = []
    with Canaries() as canaries, tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        if left := residue():
            print(f"the machine is not clean before the soak: {left}; run `fabriclab clean`")
            return 1
        for k in range(args.rounds):
            row = one_round(Path(tmp), rng, k)
            row["canaries_alive"] = canaries.alive()
            rows.append(row)
            print(json.dumps(row), flush=True)
        spec = Path(tmp) / "final.yaml"
        spec.write_text(yaml.safe_dump(fault_spec(iterations=3)))
        final = fabriclab("run", str(spec), "--out", str(Path(tmp) / "final"), "--no-report")
        final.communicate(timeout=600)
        final_ok = final.returncode == 0 and not residue()
        alive = canaries.alive()
    dirty = [r for r in rows if r["leftovers"] or r["clean_exit"] != 0]
    hit = sum(r["fault_hit"] not in ("run ended first",) for r in rows)
    kinds = sorted({r["fault"].split("@")[0] for r in rows})
    print(f"soak: {len(rows)} rounds ({', '.join(kinds)}), {hit} faults landed mid-run, "
          f"{sum(len(r['leftovers']) for r in rows)} leftovers, {len(dirty)} rounds with "
          "leftovers or a failed clean, "
          f"canaries {'alive' if alive else 'KILLED'}, final normal run "
          f"{'passed' if final_ok else 'FAILED'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if not dirty and alive and final_ok else 1


if __name__ == "__main__":
    sys.exit(main())
