"""zerocopy and rpc transports: identical exact results, rendezvous and protocol errors."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from collective_helpers import allreduce_counts, inputs

from testbed.core.errors import FabricLabError
from testbed.core.registry import TRANSPORTS
from workloads.collectives.ring import MAX_SLICES, SLICE_BYTES, slice_count
from workloads.launcher import local_configs, run_in_threads, run_local
from workloads.transports.rpc import RPC_MAX_MESSAGE, RpcTransport

pytest.importorskip("grpc")
pytest.importorskip("workloads.themis")


def run(tmp_path, transport, world, dims, algorithm, counts, **kw):
    cfgs = local_configs(ranks=world, dims=dims, algorithm=algorithm, sizes=[4],
                         out_dir=tmp_path, transport=transport, timeout=10.0, **kw)
    return allreduce_counts(cfgs, counts)


@pytest.mark.parametrize(
    ("world", "dims", "algorithm"),
    [(3, [3], "ring"), (4, [2, 2], "baseline"), (8, [2, 2, 2], "themis"), (6, [3, 2], "themis")],
)
def test_rpc_and_zerocopy_give_identical_exact_sums(tmp_path, world, dims, algorithm):
    counts = [1, 5, 1001]
    want = [np.sum([inputs(r, c) for r in range(world)], axis=0) for c in counts]
    got = {t: run(tmp_path / t, t, world, dims, algorithm, counts, chunks=3)
           for t in ("zerocopy", "rpc")}
    for t, results in got.items():
        for rank_out in results:
            for w, buf in zip(want, rank_out, strict=True):
                np.testing.assert_array_equal(buf, w, err_msg=t)


@pytest.mark.parametrize("transport", TRANSPORTS.names())
def test_pipelined_ring_slices_give_exact_sums(tmp_path, transport):
    """Shards of 3 to 16 slices (uneven lengths) on 5 ranks: every step overlaps the next."""
    counts = [5 * 196_608 + 3, 5 * 2**20 + 7]  # shards of 768 KiB and 4 MiB
    assert [slice_count(-(-c // 5)) for c in counts] == [3, 16]
    want = [np.sum([inputs(r, c) for r in range(5)], axis=0) for c in counts]
    for rank_out in run(tmp_path, transport, 5, [5], "ring", counts):
        for w, buf in zip(want, rank_out, strict=True):
            np.testing.assert_array_equal(buf, w)


def test_slice_count_bounds():
    assert slice_count(0) == slice_count(1) == 1
    assert slice_count(SLICE_BYTES // 4 * 5) == 5
    assert slice_count(10**9) == MAX_SLICES


def test_rpc_large_message_and_limits(tmp_path):
    assert RPC_MAX_MESSAGE >= 256 * 2**20 + 64
    assert dict(RpcTransport.options())["grpc.max_receive_message_length"] == RPC_MAX_MESSAGE
    count = 2 * 1024 * 1024 + 3  # 8 MiB > grpc's 4 MiB default limit
    (a,), (b,) = run(tmp_path, "rpc", 2, [2], "ring", [count])
    want = inputs(0, count) + inputs(1, count)
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b, want)


def test_rpc_workers_as_processes(tmp_path):
    res = run_local(ranks=4, dims=[2, 2], sizes=[4 * 333], algorithm="themis", chunks=3,
                    transport="rpc", iterations=1, warmup=0, timeout=20, wall_timeout=60,
                    out_dir=tmp_path)
    assert [r.correct for r in res.rows] == [True]


@pytest.mark.parametrize("transport", TRANSPORTS.names())
def test_rpc_and_zerocopy_missing_peer_is_a_rendezvous_error(tmp_path, transport):
    cfgs = local_configs(ranks=2, dims=[2], algorithm="ring", sizes=[4], out_dir=tmp_path,
                         transport=transport, timeout=1.0)
    with pytest.raises(FabricLabError, match="is that worker running"):
        run_in_threads(cfgs[:1], lambda w: None)


def test_disagreeing_schedules_are_detected_not_silently_wrong(tmp_path):
    cfgs = local_configs(ranks=2, dims=[2], algorithm="ring", sizes=[4], out_dir=tmp_path,
                         timeout=2.0)

    def body(worker):
        # Ranks pass different lengths: the receiver sees an unexpected header.
        worker.allreduce(np.ones(10 + worker.cfg.rank, dtype=np.float32))

    with pytest.raises(FabricLabError, match="disagree on the schedule"):
        run_in_threads(cfgs, body)


def stalled_ring(tmp_path, transport: str,
                 echo_timeout_s: float = 1.0) -> tuple[list[dict], Callable]:
    """Three ring ranks where rank 1 connects but never takes part: rank 2 waits for it (the
    root cause) and rank 0 waits for rank 2 (an echo), with ``echo_timeout_s`` as its timeout."""
    import time

    cfgs = local_configs(ranks=3, dims=[3], algorithm="ring", sizes=[4], out_dir=tmp_path,
                         transport=transport, timeout=1.0)
    cfgs[0]["timeout"] = echo_timeout_s

    def body(worker):
        if worker.cfg.rank == 1:
            time.sleep(2.5)  # connected, but never takes part
            return
        worker.allreduce(np.ones(100, dtype=np.float32))

    return cfgs, body


STALLED_ROOT_CAUSE = r"rank 2 waited more than 1 s for data from rank 1 .*stalled"


@pytest.mark.parametrize("transport", TRANSPORTS.names())
def test_stalled_peer_is_a_timeout_on_both_transports(tmp_path, transport):
    with pytest.raises(FabricLabError, match=STALLED_ROOT_CAUSE):
        run_in_threads(*stalled_ring(tmp_path, transport))


@pytest.mark.parametrize("transport", TRANSPORTS.names())
def test_echo_timing_out_first_does_not_hide_the_stalled_peer(tmp_path, transport):
    """Rank 0's timeout (blaming rank 2) fires first: rank 2 must still time out on its own
    and be reported, not be cut short into a "closed its connection" or "aborted" echo."""
    with pytest.raises(FabricLabError, match=STALLED_ROOT_CAUSE):
        run_in_threads(*stalled_ring(tmp_path, transport, echo_timeout_s=0.5))
