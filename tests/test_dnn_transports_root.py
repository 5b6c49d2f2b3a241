"""Whole DNN iterations per transport on a real fabric (root): a ResNet-50 replay whose
gradients go per layer, unbucketed, to parameter servers (``ps``, ``bucket_cap_mb: 0``), exact
over zerocopy and over grpc with protobuf messages (rpc-proto), one collective per layer."""

from __future__ import annotations

import pytest
from test_fabric_root import plan_of

from testbed.core.spec import one_switch_fabric
from testbed.core.traces import read_table
from testbed.emulator.fabric import Fabric
from testbed.emulator.workers import run_on_fabric
from workloads.dnn import profile

pytestmark = [pytest.mark.root, pytest.mark.slow]

ONE_SWITCH = one_switch_fabric(3, 200, "multidim")


def test_unbucketed_ps_iterations_are_exact_over_zerocopy_and_rpc_proto(tmp_path):
    layers = profile("resnet50", 1e-3, bucket_cap_mb=0).buckets
    dnn = {"model": "resnet50", "scale": 1e-3, "compute_scale": 1e-3, "bucket_cap_mb": 0,
           "iterations": 2, "warmup": 1}
    with Fabric(plan_of(ONE_SWITCH), tmp_path / "run", switches="kernel") as fab:
        for transport in ("zerocopy", "rpc-proto"):
            out = tmp_path / transport
            res = run_on_fabric(fab, ["h0", "h1", "h2"], out_dir=out, algorithm="ps",
                                transport=transport, options={"ps": {"servers": 2}}, dnn=dnn,
                                timeout=60.0)
            assert res.rows and all(r.correct for r in res.rows)
            its = read_table(out, "iterations").to_pandas()
            assert len(its) == 3 * 3 and its["correct"].all()
            assert (its["transport"] == transport).all() and (its["buckets"] == 54).all()
            buckets = read_table(out, "buckets").to_pandas()
            assert len(buckets) == 3 * 3 * len(layers) and buckets["correct"].all()
            assert (its["time"] > 0).all()
