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
