"""Ring and hierarchical All-Reduce: exact sums on every rank, ordering, timeouts, traces."""

from __future__ import annotations

import json
import math
import sys
import time

import numpy as np
import pytest
from collective_helpers import allreduce_counts, inputs
from hypothesis import given
from hypothesis import strategies as st

from testbed.core.errors import FabricLabError
from testbed.core.traces import bandwidths, read_table
from workloads.collectives import Group, shard_bounds
from workloads.collectives.ring import COLLECTIVE as RING
from workloads.hierarchical import Topology, phase_segments, schedule
from workloads.launcher import local_configs, run_in_threads, run_local
from workloads.schedule_engine import chunk_phases
from workloads.traces import TraceWriter

try:
    from workloads import themis
except ImportError:  # planner not written yet: only the hierarchical tests need it
    themis = None
needs_themis = pytest.mark.skipif(themis is None, reason="workloads.themis is not there yet")


def expected(world: int, count: int) -> np.ndarray:
    return np.sum([inputs(r, count) for r in range(world)], axis=0, dtype=np.float32)


def configs(tmp_path, world, dims=None, algorithm="ring", **kw):
    return local_configs(ranks=world, dims=dims or [world], algorithm=algorithm, sizes=[4],
                         out_dir=tmp_path, timeout=kw.pop("timeout", 10.0), **kw)


def allreduce_all(tmp_path, world, counts, dims=None, algorithm="ring", **kw):
    """All-Reduce every count on ``world`` in-process ranks; return each rank's results."""
    return allreduce_counts(configs(tmp_path, world, dims, algorithm, **kw), counts)


# ---------------------------------------------------------------- pieces


@given(st.integers(0, 1000), st.integers(1, 17))
def test_shard_bounds_cover_evenly(count, parts):
    b = shard_bounds(count, parts)
    assert len(b) == parts and b[0][0] == 0 and b[-1][1] == count
    assert all(b[i][1] == b[i + 1][0] for i in range(parts - 1))
    sizes = [hi - lo for lo, hi in b]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_topology_mixed_radix_dimension0_fastest():
    topo = Topology((2, 3, 2))
    assert [topo.coords(r) for r in (0, 1, 2, 5, 6, 11)] == [
        (0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 2, 0), (0, 0, 1), (1, 2, 1)]
    assert all(topo.rank_of(topo.coords(r)) == r for r in range(12))
    assert topo.neighbour(5, 1, 1) == 1 and topo.neighbour(1, 1, -1) == 5


# ---------------------------------------------------------------- flat ring


@pytest.mark.parametrize("world", range(1, 9))
def test_ring_allreduce_exact_on_every_rank(tmp_path, world):
    counts = [1, 3, world + 1, 1001]
    results = allreduce_all(tmp_path, world, counts)
    for rank_out in results:
        for count, buf in zip(counts, rank_out, strict=True):
            np.testing.assert_array_equal(buf, expected(world, count))


def test_ring_reduce_scatter_and_all_gather(tmp_path):
    world, count = 5, 23  # shards of 5,5,5,4,4

    def body(worker):
        link = worker.transport.links[(0, 0)]
        group = Group(worker.cfg.rank, world, (link,))
        buf = inputs(worker.cfg.rank, count)
        lo, hi = RING.reduce_scatter(group, buf, coll=0)
        owned = buf[lo:hi].copy()
        RING.all_gather(group, buf, coll=1)
        return (lo, hi), owned, buf

    want = expected(world, count)
    for rank, ((lo, hi), owned, buf) in enumerate(run_in_threads(configs(tmp_path, world), body)):
        assert (lo, hi) == shard_bounds(count, world)[rank]
        np.testing.assert_array_equal(owned, want[lo:hi])
        np.testing.assert_array_equal(buf, want)


def test_large_message_full_duplex_does_not_deadlock(tmp_path):
    """Shards far larger than socket buffers need the concurrent send/receive."""
    count = 3 * 1024 * 1024 + 7  # 12 MiB
    results = allreduce_all(tmp_path, 3, [count])
    for (buf,) in results:
        np.testing.assert_array_equal(buf, expected(3, count))


# ---------------------------------------------------------------- hierarchical


SHAPES = [[1, 1], [2, 2], [2, 4], [4, 2], [2, 2, 2], [3, 5], [1, 4], [4, 1, 2]]


@needs_themis
@pytest.mark.parametrize("dims", SHAPES, ids=lambda d: "x".join(map(str, d)))
@pytest.mark.parametrize("algorithm", ["baseline", "themis"])
def test_hierarchical_exact_on_every_rank(tmp_path, dims, algorithm):
    world = math.prod(dims)
    counts = [1, 7, 1003]  # chunks=5 divides none of them (one chunk only for count 1)
    results = allreduce_all(tmp_path, world, counts, dims, algorithm, chunks=5,
                            dim_bandwidths=[1.0 + d for d in range(len(dims))])
    for rank_out in results:
        for count, buf in zip(counts, rank_out, strict=True):
            np.testing.assert_array_equal(buf, expected(world, count))


@needs_themis
@pytest.mark.parametrize(("order", "max_active"), [("scf", 1), ("fifo", 2), ("scf", 3)])
def test_hierarchical_orders_and_parallel_slots(tmp_path, order, max_active):
    dims = [2, 2, 2]
    results = allreduce_all(tmp_path, 8, [999, 4096], dims, "themis", chunks=7, order=order,
                            max_active=max_active)
    for rank_out in results:
        for count, buf in zip([999, 4096], rank_out, strict=True):
            np.testing.assert_array_equal(buf, expected(8, count))


def test_chunk_phases_and_segments():
    dims = (2, 3)
    phases = chunk_phases(themis.ChunkPlan(0, 120, (1, 0)), dims)
    assert [(p.dim, p.op) for p in phases] == [(1, "RS"), (0, "AR"), (1, "AG")]
    assert [p.size for p in phases] == [120, 40, 40]
    assert [p.sent for p in phases] == [80, 40, 80] and [p.steps for p in phases] == [2, 2, 2]
    # coords (1, 2): RS on dim 1 keeps the third of 30 elements, AG restores them.
    assert phase_segments(phases, 10, 30, (1, 2), dims) == [(10, 40), (30, 40), (10, 40)]


@needs_themis
@pytest.mark.parametrize("order", ["fifo", "scf"])
@pytest.mark.parametrize("max_active", [1, 2])
def test_schedule_is_deterministic_complete_and_feasible(order, max_active):
    dims, bws = [4, 2, 3], [3.0, 1.0, 2.0]
    plans = themis.plan(dims, bws, 4 * 10007, 9, "themis", align=4)
    a = schedule(plans, dims, bws, order, max_active)
    b = schedule(list(plans), list(dims), list(bws), order, max_active)
    assert a == b
    served = [ph for seq in a.sequences.values() for ph in seq]
    all_phases = [ph for phases in a.chunks for ph in phases]
    assert sorted(served, key=repr) == sorted(all_phases, key=repr)
    assert {k[1] for k in a.sequences} <= set(range(max_active))
    # Executing the sequences in order, each phase waiting for its chunk predecessor, can
    # never get stuck (whatever the speeds): repeatedly run any runnable queue head.
    queues = {k: list(v) for k, v in a.sequences.items()}
    done = set()
    while any(queues.values()):
        progressed = False
        for q in queues.values():
            while q and (q[0].index == 0 or (q[0].chunk, q[0].index - 1) in done):
                done.add((q[0].chunk, q[0].index))
                q.pop(0)
                progressed = True
        assert progressed, "the per-dimension orders deadlock"
    assert len(done) == len(all_phases)


@needs_themis
def test_schedule_orders_differ_between_fifo_and_scf():
    dims = [4, 4]
    plans = themis.plan(dims, [1.0, 1.0], 4 * 4096, 8, "themis", align=4)
    fifo = schedule(plans, dims, order="fifo").sequences
    scf = schedule(plans, dims, order="scf").sequences
    assert fifo != scf


# ---------------------------------------------------------------- processes, timeouts


@needs_themis
def test_launcher_processes_ring_and_themis_exact(tmp_path):
    ring = run_local(ranks=5, sizes=[4 * 1001, 4 * 64], algorithm="ring", iterations=2,
                     warmup=1, timeout=20, wall_timeout=60, out_dir=tmp_path / "ring")
    assert [r.count for r in ring.rows] == [64, 1001]
    assert all(r.correct and r.time_us > 0 and r.algbw > 0 for r in ring.rows)
    for r in ring.rows:  # nccl-tests units: GB/s, busbw = algbw * 2(n-1)/n
        assert r.algbw == pytest.approx(r.size / (r.time_us / 1e6) / 1e9)
        assert r.busbw == pytest.approx(r.algbw * 2 * 4 / 5)
    hier = run_local(ranks=6, dims=[2, 3], sizes=[4 * 777], algorithm="themis", chunks=4,
                     iterations=2, timeout=20, wall_timeout=60, out_dir=tmp_path / "themis")
    assert [r.correct for r in hier.rows] == [True]


@needs_themis
def test_missing_rank_fails_with_clear_error_not_hang(tmp_path):
    start = time.monotonic()
    with pytest.raises(FabricLabError) as info:
        run_local(ranks=4, dims=[2, 2], sizes=[4096], algorithm="baseline", timeout=1.5,
                  skip_ranks=(2,), wall_timeout=30, out_dir=tmp_path)
    assert time.monotonic() - start < 15
    msg = str(info.value)
    assert "rank 2" in msg and "is that worker running?" in msg and "\n" not in msg


def test_stalled_peer_times_out_during_collective(tmp_path):
    start = time.monotonic()
    with pytest.raises(FabricLabError, match=r"waited more than 1\.5 s for data from rank 1"):
        run_local(ranks=3, sizes=[4096], algorithm="ring", timeout=1.5, stall_ranks=(1,),
                  wall_timeout=30, out_dir=tmp_path)
    assert time.monotonic() - start < 15
    errors = [json.loads(p.read_text()) for p in tmp_path.glob("error-rank*.json")]
    assert {e["kind"] for e in errors} & {"timeout"}
    # A failed worker leaves only files named partial.
    assert not [p for p in tmp_path.glob("*.parquet") if ".partial" not in p.name]


@needs_themis
def test_in_process_stall_raises_timeout(tmp_path):
    """A rank that connects but never sends makes the others fail, not hang."""

    def body(worker):
        if worker.cfg.rank == 0:
            time.sleep(2)
            return None
        worker.allreduce(np.ones(10, dtype=np.float32))

    with pytest.raises(FabricLabError, match="that peer is stalled"):
        run_in_threads(configs(tmp_path, 2, [2], "baseline", timeout=1.0), body)


def test_interrupt_leaves_no_worker_behind(tmp_path):
    import signal
    import subprocess

    import psutil

    code = ("import sys; from workloads.launcher import run_local; "
            "run_local(ranks=4, sizes=[4 << 20], iterations=1000, timeout=30, "
            f"out_dir={str(tmp_path)!r})")
    # SIGINT restored in the child: a shell starts background jobs with it ignored, and
    # the child would inherit that (then no KeyboardInterrupt, whatever this test sends)
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    children: list[psutil.Process] = []
    deadline = time.monotonic() + 20
    while len(children) < 4 and time.monotonic() < deadline:
        children = psutil.Process(proc.pid).children()
        time.sleep(0.1)
    assert len(children) == 4
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert "KeyboardInterrupt" in err
    _, alive = psutil.wait_procs(children, timeout=5)
    assert alive == []


# ---------------------------------------------------------------- traces


@needs_themis
def test_traces_complete_and_consistent(tmp_path):
    res = run_local(ranks=4, dims=[2, 2], sizes=[4 * 501], algorithm="themis", chunks=3,
                    iterations=2, warmup=1, timeout=20, wall_timeout=60, out_dir=tmp_path)
    assert res.rows[0].correct
    assert not list(tmp_path.glob("*.partial.parquet"))
    phases = read_table(tmp_path, "phases").to_pandas()
    colls = read_table(tmp_path, "collectives").to_pandas()
    assert len(colls) == 4 * 3  # ranks × (warmup + iterations)
    assert set(colls["correct"]) == {True}
    # 3 chunks × 4 phases per collective per rank: under the astra-sim-1.0 semantics (the
    # default) a themis chunk runs RS, RS, AG, AG (its last dimension RS and AG, no AR).
    assert len(phases) == 4 * 3 * 3 * 4
    assert set(phases["op"]) == {"RS", "AG"}
    assert (phases["end"] >= phases["start"]).all()
    assert set(phases["run_id"]) == set(colls["run_id"]) and len(set(colls["run_id"])) == 1
    row = colls.iloc[0]
    algbw, _busbw = bandwidths(int(row["size"]), float(row["time"]), 4)
    assert row["algbw"] == pytest.approx(algbw) and row["busbw"] == pytest.approx(algbw * 1.5)
    # Each phase records its group (the dimension's 2 ranks) and what the rank sent in it:
    # RS sends half its input, AG half its (gathered) output, on a group of two.
    assert set(phases["group"]) == {2}
    assert (phases["sent_bytes"] == phases["bytes"] // 2).all()


def test_trace_writer_partial_then_final(tmp_path):
    tw = TraceWriter(tmp_path, 3)
    tw.collectives.append({"run_id": "r", "job_id": "j", "rank": 3, "coll": 0, "iteration": 0,
                           "warmup": False, "size": 4, "count": 1, "world": 2,
                           "algorithm": "ring", "transport": "zerocopy", "chunks": 1,
                           "start": 0.0, "time": 1.0, "algbw": 0.0, "busbw": 0.0,
                           "correct": True})
    tw.flush_partial()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "collectives-rank3.partial.parquet", "phases-rank3.partial.parquet"]
    assert read_table(tmp_path, "collectives").num_rows == 0  # partials are not results
    tw.finish()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "collectives-rank3.parquet", "phases-rank3.parquet"]
    assert read_table(tmp_path, "collectives").num_rows == 1


# ---------------------------------------------------------------- CLI


def cli(argv: list[str]) -> int:
    """``fabriclab ARGV`` in this process (the CLI imports only the command's own module)."""
    from testbed.cli import main

    return main(argv)


@needs_themis
def test_cli_allreduce_json(capsys):
    code = cli(["allreduce", "--ranks", "4", "--size", "1KiB:4KiB", "--algo", "themis",
                "--dims", "2x2", "--chunks", "3", "--iters", "1", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    rows = json.loads(out)["rows"]  # out of place (input kept), then in place, per size
    assert [(r["size_bytes"], r["placement"]) for r in rows] == [
        (s, p) for s in (1024, 2048, 4096) for p in ("out-of-place", "in-place")]
    assert [r["count_elements"] for r in rows[1::2]] == [256, 512, 1024]
    assert all(r["correct"] for r in rows)


def test_cli_table_and_bad_dims(capsys):
    assert cli(["allreduce", "--ranks", "2", "--size", "64", "--iters", "1"]) == 0
    out = capsys.readouterr().out
    data = [line for line in out.splitlines() if not line.startswith("#")]
    assert "busbw" in out and [line.split()[:2] for line in data] == [["64", "16"]]
    assert cli(["allreduce", "--ranks", "4", "--dims", "3x2", "--size", "1KiB"]) == 2
    assert "3x2" in capsys.readouterr().err
