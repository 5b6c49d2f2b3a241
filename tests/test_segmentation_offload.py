"""What hosts hand their interfaces: wire-sized packets (``segmentation_offload: false``, or a
lossy fabric) or segments capped at ``segment_max_ms`` of their path (pure: the commands are
recorded, not run)."""

from __future__ import annotations

import subprocess

import pytest

from testbed.core.experiment import expand
from testbed.core.topology import build_plan
from testbed.emulator import segmentation


def _plan(**fabric):
    (exp,) = expand({"name": "x", "fabric": {
        "kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 1,
        "host_link_mbit_s": 100, "uplink_mbit_s": 40, **fabric},
        "jobs": [{"name": "a", "hosts": ["h0", "h1"],
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"]}}]})
    return build_plan(exp.fabric, exp.rate_scale)


def _commands(monkeypatch, plan) -> list[list[str]]:
    """The commands :func:`segmentation.apply` runs, each followed by the lines it was fed."""
    calls: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(
        cmd + (kw.get("input") or "").splitlines()) or subprocess.CompletedProcess(cmd, 0, "",
                                                                                   ""))
    segmentation.apply(plan, {"h0": 1, "h1": 2})
    return calls


@pytest.mark.parametrize(("fabric", "turned_off"), [
    ({}, False), ({"segmentation_offload": False}, True), ({"host_link_loss": 0.01}, True),
    ({"host_link_loss": 0.01, "segment_max_ms": 1}, True)])
def test_hosts_send_wire_sized_packets_when_asked_or_when_links_lose(monkeypatch, fabric,
                                                                       turned_off):
    calls = _commands(monkeypatch, _plan(**fabric))
    assert bool(calls) is turned_off
    if turned_off:
        assert [c[-4:] for c in calls] == [["tso", "off", "gso", "off"]] * 2


def test_segments_are_capped_at_their_time_on_the_slowest_link_they_may_cross(monkeypatch):
    # 1 ms of the 40 Mbit/s uplinks (slower than the 100 Mbit/s host links) is 5000 bytes.
    calls = _commands(monkeypatch, _plan(segment_max_ms=1))
    assert calls == [["nsenter", f"--net=/proc/{pid}/ns/net", "ip", "-batch", "-",
                      f"link set dev {h}-eth0 gso_max_size 5000"]
                     for h, pid in (("h0", 1), ("h1", 2))]


@pytest.mark.parametrize(("mbit_s", "ms", "cap"), [
    (100, 1, 12500), (40, 1, 5000), (1000, 1, None), (100, 6, None), (1, 1, 3000)])
def test_the_cap_is_the_rate_times_the_time_between_two_frames_and_64_kib(mbit_s, ms, cap):
    assert segmentation.segment_cap_bytes(mbit_s, ms) == cap


def test_a_cap_is_a_positive_time():
    from testbed.core.errors import SpecError

    with pytest.raises(SpecError, match="segment_max_ms"):
        _plan(segment_max_ms=0)
