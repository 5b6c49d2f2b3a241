"""A transport registered from outside the package (tests/plugins/fl_transport_demo.py) runs
All-Reduces over loopback workers with exact results; registry attributes, not literals, say
which transport, policy and schedule comparisons measure the others against."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from collective_helpers import allreduce_counts, inputs

from analysis.compare import AXES
from testbed.core.registry import POLICIES, SCHEDULES, TRANSPORTS
from workloads.launcher import local_configs

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture
def copy_transport(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    TRANSPORTS.register("copy", "fl_transport_demo:CopyTransport")
    yield TRANSPORTS.get("copy")
    TRANSPORTS.unregister("copy")


@pytest.mark.parametrize(("world", "dims", "algorithm"),
                         [(3, [3], "ring"), (4, [4], "halving-doubling"),
                          (6, [3, 2], "themis")])
def test_a_plug_in_transport_runs_allreduces_exactly(tmp_path, copy_transport, world, dims,
                                                     algorithm) -> None:
    counts = [1, 7, 100_003]
    cfgs = local_configs(ranks=world, dims=dims, algorithm=algorithm, sizes=[4],
                         out_dir=tmp_path, transport="copy", timeout=10.0, chunks=3)
    want = [np.sum([inputs(r, c) for r in range(world)], axis=0) for c in counts]
    for rank_out in allreduce_counts(cfgs, counts):
        for w, buf in zip(want, rank_out, strict=True):
            np.testing.assert_array_equal(buf, w)


def test_references_are_registry_attributes(copy_transport) -> None:
    assert POLICIES.references() == ("ecmp", "ecmp-l3")
    assert TRANSPORTS.references() == ("rpc",)
    assert SCHEDULES.references() == ("baseline",)
    assert AXES["transport"].reference == ("rpc",)
    assert not copy_transport.reference and not copy_transport.wire_speed
    assert TRANSPORTS.get("zerocopy").wire_speed


def test_a_plug_in_can_be_the_reference(monkeypatch, copy_transport) -> None:
    monkeypatch.setattr(copy_transport, "reference", True)
    assert AXES["transport"].reference == ("rpc", "copy")
