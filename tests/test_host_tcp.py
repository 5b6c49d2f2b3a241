"""The fabric's ``tcp_congestion``: names checked before anything is made (no root)."""

from __future__ import annotations

import pytest

from testbed.core.errors import FabricLabError, SpecError
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import host_tcp

FABRIC = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
          "host_link_mbit_s": 50, "uplink_mbit_s": 50}


def plan_with(**fields):
    return build_plan(parse_fabric({"fabric": {**FABRIC, **fields}}))


def test_unset_keeps_the_kernel_default_and_checks_nothing() -> None:
    plan = plan_with()
    assert plan.spec.tcp_congestion is None
    host_tcp.check(plan)


@pytest.mark.parametrize("bad", ["cubic; reboot", "Cubic", "", "x" * 17, "../bbr"])
def test_a_name_that_is_no_congestion_control_is_refused_by_the_spec(bad: str) -> None:
    with pytest.raises(SpecError, match=r"fabric\.tcp_congestion: .* is not a TCP congestion"):
        plan_with(tcp_congestion=bad)


def test_a_name_the_kernel_lacks_is_refused_in_one_sentence_naming_the_field() -> None:
    plan = plan_with(tcp_congestion="nosuchcc")
    with pytest.raises(FabricLabError) as err:
        host_tcp.check(plan)
    text = str(err.value)
    assert text.startswith("fabric.tcp_congestion:") and "nosuchcc" in text
    assert "\n" not in text


@pytest.mark.skipif("reno" not in host_tcp.available(), reason="no /proc/sys/net here")
def test_a_loaded_name_passes() -> None:
    host_tcp.check(plan_with(tcp_congestion="reno"))  # reno is always built in


ROUTES = [{"type": "unicast", "dst": "10.0.0.0/8", "dev": "h0-eth0", "protocol": "kernel",
           "scope": "link", "prefsrc": "10.0.0.1", "flags": []},
          {"dst": "10.8.0.0/16", "gateway": "10.0.0.254", "dev": "h0-eth0", "protocol": "boot",
           "scope": "global", "metric": 5, "metrics": [{"congestion": "bbr"}]}]


def test_each_route_is_named_again_with_the_congestion_control() -> None:
    assert host_tcp.route_changes(ROUTES, "cubic") == [
        ["route", "change", "10.0.0.0/8", "dev", "h0-eth0", "proto", "kernel", "scope", "link",
         "src", "10.0.0.1", "congctl", "cubic"],
        ["route", "change", "10.8.0.0/16", "via", "10.0.0.254", "dev", "h0-eth0", "proto",
         "boot", "scope", "global", "metric", "5", "congctl", "cubic"]]
    assert [host_tcp.route_congestion(r) for r in ROUTES] == [None, "bbr"]


@pytest.mark.parametrize("route", [{"dst": "10.0.0.0/8", "metrics": [{"mtu": 1400}]},
                                   {"dst": "default", "nexthops": [{"dev": "a"}, {"dev": "b"}]},
                                   {"dev": "h0-eth0"}])
def test_a_route_that_changing_would_alter_is_refused(route) -> None:
    with pytest.raises(FabricLabError, match=r"^fabric\.tcp_congestion: .* cannot name it .*"
                       r"add cubic to the machine's net\.ipv4\.tcp_allowed_congestion_control$"):
        host_tcp.route_changes([route], "cubic")
