"""The verdict under any routing policy, on a real fabric (root): the spines count which spine
each pair of an ECMP job's hosts crossed, the simulator predicts the job's time on those paths,
and the job is judged against it; packets lost inside a host's namespace, where no queue of
the fabric counts them, trip the loss invariant, which names the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.core.experiment import expand
from testbed.emulator.runner import Runner
from testbed.emulator.stress import host_loss

pytestmark = [pytest.mark.root, pytest.mark.slow]


def experiment(policy: str = "ecmp"):
    (exp,) = expand({
        "name": f"paths-{policy}",
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "host_link_mbit_s": 50, "uplink_mbit_s": 50},
        "policy": policy, "timeout_s": 240,
        "jobs": [{"name": "a", "hosts": ["h0", "h2"],
                  "workload": {"kind": "allreduce", "sizes": ["8MiB"], "iterations": 3,
                               "warmup": 1}}]})
    return exp


class LossyRunner(Runner):
    """The runner, with 2 % of the TCP packets reaching h0 dropped in h0's namespace while its
    jobs run."""

    dropped = 0

    def _leg(self, fab, jobs, what, key) -> None:
        with host_loss(fab.host_pids()["h0"], 0.02) as landed:
            super()._leg(fab, jobs, what, key)
        self.dropped = landed["dropped"]


def test_an_ecmp_job_is_judged_on_the_paths_its_flows_took(tmp_path):
    runner = Runner(experiment(), tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    paths = json.loads((run_dir / "paths.json").read_text())
    assert paths["source"] == "spine counters"
    pairs = paths["legs"]["together"]["a"]
    # both directions crossed a spine, with the 8 MiB All-Reduces' bytes (4 x 8 MiB each way)
    for src, dst in (("h0", "h2"), ("h2", "h0")):
        crossed = [p for p in pairs if (p["src"], p["dst"]) == (src, dst)]
        assert crossed and {p["spine"] for p in crossed} <= {0, 1}
        assert sum(p["bytes"] for p in crossed) > 4 * 8 * 2**20
    fid = json.loads((run_dir / "fidelity.json").read_text())
    (job,) = fid["job"]["jobs"]
    assert job["judged"] and job["against"] == "prediction"
    assert job["sizes"][0]["unit"] == "time_s" and job["sizes"][0]["expected"] > 0.2
    prediction = Path(run_dir) / "prediction"
    assert any(prediction.glob("*/jobs.json"))
    assert fid["registered"]["loss"]["judged"]


def test_packets_lost_where_no_queue_counts_them_trip_the_loss_invariant(tmp_path):
    runner = LossyRunner(experiment("vclos"), tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    assert runner.dropped > 0, "the fault never landed"
    fid = json.loads((run_dir / "fidelity.json").read_text())
    assert fid["verdict"] == "not faithful"
    found = fid["registered"]["loss"]["violations"]
    assert any("h2" in v["place"] and v["start_s"] is not None for v in found), found
    assert any(r.startswith("loss invariant: job a's hosts resent") for r in fid["reasons"])


def test_the_flood_runs_through_its_own_bridge_and_leaves_nothing_behind():
    import subprocess
    import time

    from testbed.emulator.stress import FLOOD_NAMES, flood

    def received_bytes(pid: int) -> int:  # by the flood's server, in its own namespace
        with open(f"/proc/{pid}/net/dev") as f:
            row = next(ln for ln in f if ln.strip().startswith(f"{FLOOD_NAMES[2]}:"))
        return int(row.split(":", 1)[1].split()[0])

    with flood(seconds=20) as (server, _client):
        time.sleep(2)
        first = received_bytes(server)
        time.sleep(1)
        assert received_bytes(server) - first > 1_000_000  # more than 8 Mbit/s through fl-flood
    bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
    assert "fl-flood" not in bridges.split()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not any(f" {n}:" in links or f" {n}@" in links for n in FLOOD_NAMES[1:])
