"""Container hosts on real fabrics (root): Docker containers attached to Mininet's shaped links,
next to namespace hosts, carrying real packets and real All-Reduce, and leaving nothing behind.

The images are built here if missing (``fabriclab images``; a few minutes the first time);
where they cannot be built the tests are skipped with the reason, except under ``CI=true``,
where that is a failure.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from fabric_checks import iperf_rates

from testbed.core.errors import FabricLabError
from testbed.core.host_runtime import HostRuntime
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import cleanup, docker_engine, images
from testbed.emulator.containers import container_name
from testbed.emulator.fabric import Fabric
from testbed.emulator.faults import FABRICLAB, fabriclab, residue, run_of
from testbed.emulator.workers import run_on_fabric

pytestmark = [pytest.mark.root, pytest.mark.slow]

LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
              "host_link_mbit_s": 50, "uplink_mbit_s": 50}
DOCKER = HostRuntime(runtime="docker", cpus=1.0, mem_limit="512m")


@pytest.fixture(scope="module")
def docker_ready():
    """The engine up (stopped after the module if it was started here) and the worker image
    of this checkout built; yields the engine processes this fixture started (or [])."""
    try:
        started = docker_engine.start(cleanup.STATE_DIR / "dockerd.log")
        images.build(docker_engine.client(timeout_s=600), say=lambda _line: None)
    except Exception as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"container images cannot be built under CI: {exc}")
        pytest.skip(f"container images cannot be built here: {exc}")
    yield started
    docker_engine.stop(started)


def plan_of(fabric: dict):
    return build_plan(parse_fabric({"fabric": fabric}))


def pings(fab: Fabric, src: str, ip: str) -> bool:
    return " 0% packet loss" in fab.host(src).cmd(f"ping -c1 -W2 {ip}")


def run_in(fab: Fabric, host: str, argv: list[str]) -> subprocess.CompletedProcess:
    proc = fab.popen(host, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def our_containers(state: cleanup.RunState) -> list[str]:
    return [c.name for c in docker_engine.client().containers.list(
        all=True, filters={"label": state.mark})]


def test_mixed_fabric_every_host_reaches_every_host_and_containers_are_containers(
        tmp_path, docker_ready):
    plan = plan_of(LEAF_SPINE)
    fab = Fabric(plan, tmp_path / "run", hosts={"h0": DOCKER, "h3": DOCKER})
    fab.start()
    state = cleanup.RunState(**vars(fab.state))
    try:
        assert sorted(our_containers(state)) == [container_name(state, "h0"),
                                                 container_name(state, "h3")]
        for a, b in itertools.permutations(plan.hosts, 2):
            assert pings(fab, a.name, b.ip()), f"{a.name} cannot reach {b.name}"
        # a process started in h0 runs in the container: its filesystem, its limits
        assert run_in(fab, "h0", ["cat", "/etc/hostname"]).stdout.strip() == "h0"
        assert run_in(fab, "h0", ["test", "-x", "/opt/fabriclab/bin/python"]).returncode == 0
        assert run_in(fab, "h1", ["test", "-e", "/opt/fabriclab"]).returncode != 0
        quota = run_in(fab, "h0", ["cat", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"]).stdout
        assert quota.strip() == "100000", quota  # cpus: 1.0 at the default 100 ms period
        # and it cannot change its own link's shaping
        intf = plan.node("h0").nics[0].intf
        denied = run_in(fab, "h0", ["tc", "qdisc", "del", "dev", intf, "root"])
        assert denied.returncode != 0 and "Operation not permitted" in denied.stderr
        assert "htb" in fab.host("h0").cmd(f"tc qdisc show dev {intf}")
    finally:
        assert fab.stop() == []
    assert cleanup.leftovers(state) == []
    assert our_containers(state) == []
    assert not any(Path("/sys/class/net", s.name).exists() for s in plan.switches)


def test_a_shaped_link_into_a_container_runs_at_its_rate(tmp_path, docker_ready):
    plan = plan_of(LEAF_SPINE)
    with Fabric(plan, tmp_path / "run", hosts={"h0": DOCKER, "h2": DOCKER}) as fab:
        achieved, goodput = iperf_rates(fab, "h0", "h2", "leaf0")
    assert 0.9 * 50 <= achieved <= 1.1 * 50, f"h0->leaf0 carried {achieved:.1f} Mbit/s"
    assert 0.85 * 50 <= goodput <= 1.05 * 50, f"iperf3 goodput {goodput:.1f} Mbit/s"


def test_all_reduce_is_correct_across_containers_and_namespace_hosts(tmp_path, docker_ready):
    plan = plan_of(LEAF_SPINE)
    hosts = {"h0": DOCKER, "h1": DOCKER, "h2": DOCKER}
    with Fabric(plan, tmp_path / "run", hosts=hosts) as fab:
        # a container sees the run directory only (bind-mounted at the same path)
        result = run_on_fabric(fab, ["h0", "h1", "h2", "h3"],
                               out_dir=tmp_path / "run" / "jobs" / "j", algorithm="ring",
                               sizes=[1 << 20], iterations=2, warmup=1, wall_timeout=120)
    assert result.rows and all(r.correct for r in result.rows)


def test_kill_9_mid_run_then_clean_leaves_no_container_veth_or_bridge(tmp_path, docker_ready):
    spec = {"name": "kill-containers", "fabric": LEAF_SPINE, "policy": "ecmp",
            "hosts": {"runtime": "docker"},
            "jobs": [{"name": "j", "hosts": ["h0", "h2"],
                      "workload": {"kind": "allreduce", "sizes": ["4MiB"], "iterations": 50}}]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    run = fabriclab("run", str(path), "--out", str(out), "--no-report",
                    failpoint="collective:KILL")
    log, _ = run.communicate(timeout=300)
    assert run.returncode == -signal.SIGKILL, log
    state = run_of(out)
    assert state is not None and state.containers
    assert our_containers(state), "the killed run left no container?"
    result = subprocess.run([FABRICLAB, "clean"], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"run {state.run_id}: removed" in result.stdout
    assert our_containers(state) == []
    assert cleanup.leftovers(state) == [] and not state.path.exists()
    assert residue() == []


def test_a_missing_image_is_one_sentence_and_leaves_nothing(tmp_path, docker_ready):
    plan = plan_of(LEAF_SPINE)
    fab = Fabric(plan, tmp_path / "run",
                 hosts={"h0": HostRuntime(runtime="docker", image="fabriclab/no-such-image")})
    with pytest.raises(FabricLabError, match="fabriclab/no-such-image is not on this machine: "
                                             "build the project's images with `fabriclab "
                                             "images`") as err:
        fab.start()
    assert "\n" not in str(err.value)
    assert residue() == []
    assert not any(Path("/sys/class/net", s.name).exists() for s in plan.switches)


def test_a_fabric_that_starts_the_engine_stops_it_and_only_it(tmp_path, docker_ready):
    """Last in the module: it stops the engine the fixture started, to start from none."""
    if not docker_ready:
        pytest.skip("a Docker engine this test session did not start is running: left alone")
    assert docker_engine.stop(docker_ready) == [] and not docker_engine.answers()
    docker_ready.clear()  # nothing left for the fixture to stop
    plan = plan_of(LEAF_SPINE)
    fab = Fabric(plan, tmp_path / "run", hosts={"h0": DOCKER})
    fab.start()
    state = cleanup.RunState(**vars(fab.state))
    try:
        assert state.engine, "the fabric started the engine but did not record it"
        assert pings(fab, "h0", plan.node("h3").ip())
    finally:
        assert fab.stop() == []
    assert not docker_engine.answers()
    assert cleanup.engine_processes(state) == [] and not state.path.exists()
