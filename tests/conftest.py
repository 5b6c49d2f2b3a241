"""Shared fixtures. Tests marked ``root`` need root, Mininet and running OVS daemons."""

from __future__ import annotations

import os

import pytest

from testbed.emulator.preflight import is_root, ovs_running


def _root_ready() -> str | None:
    if not is_root():
        return "needs root"
    if not ovs_running():
        return "Open vSwitch daemons are not running (`make install` as root starts them)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _root_ready()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        # In CI the root tests are the point: never let them vanish as skips.
        raise pytest.UsageError(f"CI run but root tests cannot run: {reason}")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))
