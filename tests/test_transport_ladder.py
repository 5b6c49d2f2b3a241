"""The transport ladder (zerocopy, staged, serialised, rpc-lite, rpc, rpc-proto): every rung
runs All-Reduces exactly on loopback ranks, counts the copies it makes, and a worker records
its CPU time and copied bytes per collective."""

from __future__ import annotations

import numpy as np
import pytest
from collective_helpers import allreduce_counts, inputs

from testbed.core.registry import TRANSPORTS
from testbed.core.traces import read_table
from workloads.launcher import local_configs, run_local
from workloads.transports.base import Tag
from workloads.transports.tensorproto import message_class, read_tensor, transfer

LADDER = ["zerocopy", "staged", "serialised", "rpc-lite", "rpc", "rpc-proto"]
# Copies a byte moved, as each rung counts its own (both sides together).
COPIES = {"zerocopy": 0, "staged": 2, "serialised": 7, "rpc-lite": 7, "rpc": 4, "rpc-proto": 6}


@pytest.mark.parametrize("transport", LADDER)
@pytest.mark.parametrize(("world", "algorithm"), [(2, "ring"), (3, "ring"),
                                                  (4, "halving-doubling")])
def test_every_rung_reduces_exactly(tmp_path, transport, world, algorithm) -> None:
    counts = [1, 7, 100_003]
    cfgs = local_configs(ranks=world, dims=[world], algorithm=algorithm, sizes=[4],
                         out_dir=tmp_path, transport=transport, timeout=20.0)
    want = [np.sum([inputs(r, c) for r in range(world)], axis=0) for c in counts]
    for rank_out in allreduce_counts(cfgs, counts):
        for w, buf in zip(want, rank_out, strict=True):
            np.testing.assert_array_equal(buf, w)


@pytest.mark.parametrize("transport", LADDER)
def test_workers_record_cpu_and_the_copies_each_rung_counts(tmp_path, transport) -> None:
    size = 1 << 20
    res = run_local(ranks=2, sizes=[size], transport=transport, iterations=2, warmup=1,
                    timeout=30.0, out_dir=tmp_path)
    assert all(r.correct for r in res.rows)
    colls = read_table(tmp_path, "collectives").to_pandas()
    phases = read_table(tmp_path, "phases").to_pandas()
    colls, phases = colls[~colls["warmup"]], phases[~phases["warmup"]]
    assert (colls["cpu"] > 0).all()
    # a 2-rank ring sends S per rank: the copies a byte are the copied bytes over those
    copies = colls["copied_bytes"].sum() / phases["sent_bytes"].sum()
    assert copies == pytest.approx(COPIES[transport], abs=0.01)


def test_the_ladder_is_registered_and_only_rpc_is_the_reference() -> None:
    assert set(LADDER) <= set(TRANSPORTS.names())
    assert TRANSPORTS.references() == ("rpc",)
    assert [TRANSPORTS.get(t).wire_speed for t in LADDER] == [True] + [False] * 5


def test_a_transfer_message_round_trips_and_rejects_a_wrong_tensor() -> None:
    arr = np.arange(10, dtype=np.float32)
    msg, copied = transfer(1, 2, 3, Tag(4, 5, 6, 7, 8), arr)
    assert copied == 2 * arr.nbytes
    back = message_class("Transfer").FromString(msg.SerializeToString())
    assert (back.sender, back.channel, back.slot, back.coll, back.slice) == (1, 2, 3, 4, 8)
    out = np.empty(10, dtype=np.float32)
    read_tensor(back.tensor, out, "here")
    np.testing.assert_array_equal(out, arr)
    with pytest.raises(Exception, match="expected float32 and 36 bytes"):
        read_tensor(back.tensor, np.empty(9, dtype=np.float32), "here")
