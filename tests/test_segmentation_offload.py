"""``segmentation_offload: false`` makes hosts send wire-sized packets (pure: ethtool is
recorded, not run)."""

from __future__ import annotations

import subprocess

import pytest

from testbed.core.experiment import expand
from testbed.core.topology import build_plan
from testbed.emulator import impairments


def _plan(**fabric):
    (exp,) = expand({"name": "x", "fabric": {
        "kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 1,
        "host_link_mbit_s": 10, "uplink_mbit_s": 10, **fabric},
        "jobs": [{"name": "a", "hosts": ["h0", "h1"],
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"]}}]})
    return build_plan(exp.fabric, exp.rate_scale)


@pytest.mark.parametrize(("fabric", "turned_off"), [
    ({}, False), ({"segmentation_offload": False}, True), ({"host_link_loss": 0.01}, True)])
def test_hosts_send_wire_sized_packets_when_asked_or_when_links_lose(monkeypatch, fabric,
                                                                       turned_off):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "", ""))
    impairments.no_segmentation_offload(_plan(**fabric), {"h0": 1, "h1": 2})
    assert bool(calls) is turned_off
    if turned_off:
        assert [c[-4:] for c in calls] == [["tso", "off", "gso", "off"]] * 2
