"""Command jobs on real fabrics (root): any program, one process per host, with the environment
of a distributed job; and PyTorch DDP over Gloo in container hosts, as in
``experiments/torch-ddp.yaml``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from testbed.core.experiment import expand
from testbed.emulator import cleanup, docker_engine, images
from testbed.emulator.runner import Runner

pytestmark = [pytest.mark.root, pytest.mark.slow]

LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
              "host_link_mbit_s": 50, "uplink_mbit_s": 50}
# Prints its environment, then three iterations as iteration-log lines; rank 1 of a job
# whose FAIL variable is set exits with code 7 instead.
PROGRAM = """
import json, os, sys, time
keys = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
        "GLOO_SOCKET_IFNAME", "FABRICLAB_JOB_DIR", "EXTRA"]
print(json.dumps({k: os.environ.get(k) for k in keys}), flush=True)
if os.environ.get("FAIL") and os.environ["RANK"] == "1":
    print("rank 1 gives up on purpose", file=sys.stderr)
    sys.exit(7)
for i in range(3):
    time.sleep(0.05)
    print(json.dumps({"fabriclab": "iteration", "iteration": i, "time_s": 0.05}), flush=True)
"""


def run(tmp_path: Path, spec: dict) -> tuple[Path, dict]:
    (exp,) = expand(spec)
    run_dir = Runner(exp, tmp_path / "out", console=Console(quiet=True)).run()
    return run_dir, json.loads((run_dir / "jobs.json").read_text())


def test_a_command_job_gets_the_distributed_environment_and_its_iterations_recorded(
        tmp_path):
    job = {"name": "j", "hosts": ["h2", "h0"],
           "workload": {"kind": "command", "argv": ["python", "-c", PROGRAM],
                        "env": {"EXTRA": "yes"}, "master_port": 29555}}
    run_dir, jobs = run(tmp_path, {"name": "cmd", "fabric": LEAF_SPINE, "policy": "ecmp",
                                   "jobs": [job]})
    (record,) = jobs
    assert record["status"] == "ok", record["error"]
    assert record["command"] == {"exit_codes": [0, 0], "iterations": [3, 3]}
    topo = json.loads((run_dir / "topology.json").read_text())
    ip = {h["name"]: h["nics"][0]["ip"] for h in topo["hosts"]}
    hosts = record["hosts"]  # in rank order (the controller's allocation's)
    assert sorted(hosts) == ["h0", "h2"]
    for rank, host in enumerate(hosts):
        log = (run_dir / "jobs" / "j" / f"stdout-rank{rank}.log").read_text().splitlines()
        env = json.loads(log[0])
        assert env["RANK"] == str(rank) and env["WORLD_SIZE"] == "2"
        assert env["MASTER_ADDR"] == ip[hosts[0]] and env["MASTER_PORT"] == "29555"
        assert env["GLOO_SOCKET_IFNAME"] == f"{host}-eth0" and env["EXTRA"] == "yes"
        assert Path(env["FABRICLAB_JOB_DIR"]) == (run_dir / "jobs" / "j").resolve()
        assert (run_dir / "jobs" / "j" / f"iterations-rank{rank}.parquet").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["jobs"]["j"]["iterations"] == 3
    assert summary["jobs"]["j"]["mean_s"] == pytest.approx(0.05)


def test_a_failing_rank_fails_the_job_in_one_sentence_and_leaves_nothing(tmp_path):
    job = {"name": "j", "hosts": ["h0", "h1"],
           "workload": {"kind": "command", "argv": ["python", "-c", PROGRAM],
                        "env": {"FAIL": "1"}}}
    run_dir, jobs = run(tmp_path, {"name": "cmd-fail", "fabric": LEAF_SPINE,
                                   "policy": "ecmp", "jobs": [job]})
    (record,) = jobs
    assert record["status"] == "failed"
    assert record["error"].startswith("rank 1 on h1 exited with code 7: rank 1 gives up")
    assert "\n" not in record["error"]
    assert not [s for s in cleanup.load_states()[0] if s.run_dir == str(run_dir)]


@pytest.fixture(scope="module")
def torch_image():
    try:
        started = docker_engine.start(cleanup.STATE_DIR / "dockerd.log")
        images.build(docker_engine.client(timeout_s=900), torch=True, say=lambda _l: None)
    except Exception as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the torch image cannot be built under CI: {exc}")
        pytest.skip(f"the torch image cannot be built here: {exc}")
    yield
    docker_engine.stop(started)


def test_torch_ddp_trains_in_containers_on_the_fabric(tmp_path, torch_image):
    argv = ["python", "-m", "workloads.examples.torch_ddp", "--steps", "4", "--warmup", "1",
            "--hidden", "256"]
    jobs = [{"name": f"j{i}", "hosts": hosts, "workload": {"kind": "command", "argv": argv}}
            for i, hosts in enumerate((["h0", "h2"], ["h1", "h3"]))]
    run_dir, records = run(tmp_path, {
        "name": "ddp", "fabric": LEAF_SPINE, "policy": "ecmp",
        "hosts": {"runtime": "docker", "image": "fabriclab/worker-torch"}, "jobs": jobs})
    for record in records:
        assert record["status"] == "ok", record["error"]
        assert record["command"]["exit_codes"] == [0, 0]  # 3 if the replicas diverged
        assert record["command"]["iterations"] == [4, 4]
    fidelity = json.loads((run_dir / "fidelity.json").read_text())
    assert set(fidelity["containers"]) == {"h0", "h1", "h2", "h3"}
    summary = json.loads((run_dir / "summary.json").read_text())
    # 256x256 MLP: ~0.5 MB of gradient per step on 50 Mbit/s links takes well over 10 ms
    assert all(summary["jobs"][j]["mean_s"] > 0.01 for j in ("j0", "j1"))
