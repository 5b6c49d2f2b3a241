"""What only a stock kernel offers: the Open vSwitch kernel datapath under a routed fabric
(root, and a kernel with the openvswitch module: the stock-kernel VM of ``make vm-check``)."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.fabric import Fabric

pytestmark = [pytest.mark.root, pytest.mark.slow]

LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
              "host_link_mbit_s": 20, "uplink_mbit_s": 20}


def _module_loads() -> bool:
    subprocess.run(["modprobe", "-q", "openvswitch"], capture_output=True, check=False)
    return Path("/sys/module/openvswitch").exists()


needs_module = pytest.mark.skipif(
    not _module_loads(), reason="this kernel has no openvswitch module (the stock-kernel VM "
    "has it: make vm-check)")


@needs_module
def test_an_ecmp_fabric_runs_on_the_kernel_datapath(tmp_path):
    plan = build_plan(parse_fabric({"fabric": LEAF_SPINE}))
    fab = Fabric(plan, tmp_path / "run", policy="ecmp")
    fab.start()
    try:
        assert fab.datapath == "kernel"
        shown = subprocess.run(["ovs-appctl", "dpif/show"], capture_output=True, text=True,
                               check=True).stdout
        assert "system@ovs-system" in shown, shown
        assert "netdev@" not in shown, shown
        for a, b in itertools.permutations(plan.hosts, 2):
            out = fab.host(a.name).cmd(f"ping -c1 -W3 {b.ip()}")
            assert " 0% packet loss" in out, f"{a.name} cannot reach {b.name}: {out}"
    finally:
        assert fab.stop() == []
