"""Issue 27 on real fabrics (root, Open vSwitch): a fabric refuses a run directory another
user planted, and configures its hosts and kernel bridges with batches on standard input, so
nothing root later runs is ever a file in the run directory."""

from __future__ import annotations

import os
import pwd

import pytest

from testbed.core.errors import FabricLabError
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan, ring_neighbours
from testbed.emulator import cleanup, runlock
from testbed.emulator.fabric import Fabric

pytestmark = [pytest.mark.root]

ONE_SWITCH = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
              "host_link_mbit_s": 50, "uplink_mbit_s": 50}
MULTIDIM = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                         {"size": 3, "mbit_s": 20, "kind": "ring"}]}


def plan_of(fabric: dict):
    return build_plan(parse_fabric({"fabric": fabric}))


def refused(run_dir, match: str) -> None:
    with pytest.raises(FabricLabError, match=match):
        Fabric(plan_of(ONE_SWITCH), run_dir).start()
    assert runlock.holder() is None  # the lock was released


def test_a_fabric_refuses_a_run_directory_another_user_planted(tmp_path):
    planted = tmp_path / "run"
    planted.mkdir()
    os.chown(planted, pwd.getpwnam("nobody").pw_uid, -1)
    refused(planted, "belongs to uid")
    assert list(planted.iterdir()) == []


def test_a_fabric_refuses_a_symlinked_run_directory(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "run").symlink_to(target)
    refused(tmp_path / "run", "symlink")
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("switches", ["ovs", "kernel"])
def test_hosts_and_kernel_bridges_are_configured_from_stdin_not_files(tmp_path, switches):
    plan = plan_of(MULTIDIM)
    with Fabric(plan, tmp_path / "run", switches=switches) as fab:
        state = cleanup.RunState(**vars(fab.state))
        nxt, _ = ring_neighbours(0, 1, plan.spec.sizes)  # a route and ARP entry from the batch
        for ip in (plan.hosts[1].nic(0).ip, plan.hosts[nxt].nic(1, "prev").ip):
            assert " 0% packet loss" in fab.host("h0").cmd(f"ping -c1 -W2 {ip}")
        written = {p.relative_to(tmp_path / "run").as_posix()
                   for p in (tmp_path / "run").rglob("*")}
    assert not any(p.startswith("setup") for p in written), written
    assert cleanup.leftovers(state) == []


def test_a_run_whose_buffers_would_not_fit_is_refused_before_anything_starts(
        tmp_path, monkeypatch, capsys):
    import yaml

    from testbed.cli import main
    from testbed.emulator import preflight

    spec = tmp_path / "big.yaml"
    spec.write_text(yaml.safe_dump({"name": "big", "fabric": ONE_SWITCH, "jobs": [
        {"name": "a", "hosts_wanted": 2,
         "workload": {"kind": "allreduce", "sizes": ["1GiB"]}}]}))
    monkeypatch.setattr(preflight, "mem_available_bytes", lambda: 1024**3)
    assert main(["run", str(spec), "--out", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert "8.0 GiB of buffers" in err and "Traceback" not in err
    assert not (tmp_path / "results").exists()
