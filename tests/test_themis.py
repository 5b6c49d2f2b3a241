"""Themis chunk planner (workloads.themis), predictive model (workloads.model) and their CLI."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed import cli
from testbed.core.errors import FabricLabError
from workloads.model import predict, simulate
from workloads.themis import ChunkPlan, bytes_sent_per_dim, chunk_offsets, plan, split_sizes

MIB = 1024**2
GBIT = 1e9

# Shapes and targets from ASTRA-sim's Themis paper: 256 MiB in 64 chunks.
EXPECTED = [
    # dims, Gbit/s, baseline utilisation, themis utilisation, intra-dimension order, semantics
    ((4, 4, 4), (200, 100, 50), 0.75, 0.99, "scf", "fabriclab"),
    ((16, 16), (100, 100), 0.53, 1.0, "fifo", "fabriclab"),
    ((16, 16), (100, 100), 0.53, 1.0, "scf", "fabriclab"),
    # ASTRA-sim 1.0's queues: SCF serves All-Gathers (small inputs) first and sends each
    # chunk's next-to-last phase to the back, which costs a few percent here.
    ((4, 4, 4), (200, 100, 50), 0.75, 0.955, "scf", "astra-sim-1.0"),
    ((4, 4, 4), (200, 100, 50), 0.75, 0.965, "fifo", "astra-sim-1.0"),
    ((16, 16), (100, 100), 0.53, 1.0, "fifo", "astra-sim-1.0"),
    ((16, 16), (100, 100), 0.53, 0.972, "scf", "astra-sim-1.0"),
]

shapes = st.lists(st.integers(1, 6), min_size=1, max_size=4)


@st.composite
def networks(draw, max_chunks: int = 24):
    sizes = draw(shapes)
    bandwidths = draw(
        st.lists(st.floats(0.5, 500.0), min_size=len(sizes), max_size=len(sizes))
    )
    chunks = draw(st.integers(1, max_chunks))
    total = draw(st.integers(chunks, 64 * MIB))
    return tuple(sizes), tuple(bandwidths), total, chunks


def _prod(values) -> int:
    return math.prod(values)


# --- planner -----------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(networks(), st.sampled_from(["themis", "baseline"]))
def test_chunk_zero_gets_baseline_order_and_ag_mirrors_rs(net, policy):
    sizes, bandwidths, total, chunks = net
    plans = plan(sizes, bandwidths, total, chunks, policy=policy)
    baseline = tuple(d for d, n in enumerate(sizes) if n > 1)
    assert plans[0].rs_order == baseline
    for i, p in enumerate(plans):
        assert p.index == i
        assert sorted(p.rs_order) == list(baseline)  # every non-trivial dim exactly once
        # astra-sim-1.0 (the default): a balanced chunk All-Gathers on its last dim too
        assert p.split_last == (policy == "themis" and bool(p.rs_order))
        assert p.ag_order == tuple(reversed(p.rs_order if p.split_last else p.rs_order[:-1]))
        if policy == "baseline":
            assert p.rs_order == baseline
    fabric = plan(sizes, bandwidths, total, chunks, policy=policy, semantics="fabriclab")
    assert not any(p.split_last for p in fabric)
    assert all(p.ag_order == tuple(reversed(p.rs_order[:-1])) for p in fabric)


def test_ag_order_is_reverse_of_rs_without_the_all_reduce_dimension():
    p = ChunkPlan(index=3, size=100, rs_order=(2, 0, 1))
    assert p.ag_order == (0, 2)
    assert ChunkPlan(index=0, size=1, rs_order=(1,)).ag_order == ()


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**9), st.integers(1, 300), st.sampled_from([1, 2, 4, 8, 3]))
def test_sizes_sum_to_total_and_follow_align(total, chunks, align):
    if chunks > max(total // align, 1):
        with pytest.raises(FabricLabError, match="chunks"):
            split_sizes(total, chunks, align)
        return
    sizes = split_sizes(total, chunks, align)
    assert len(sizes) == chunks
    assert sum(sizes) == total
    assert all(s >= 1 for s in sizes)
    # Every chunk but the last is a multiple of align; the last carries total % align extra.
    assert all(s % align == 0 for s in sizes[:-1])
    assert sizes[-1] % align == total % align
    aligned = [*sizes[:-1], sizes[-1] - total % align]
    assert max(aligned) - min(aligned) <= align  # as even as possible
    plans = plan((2, 2), (1.0, 1.0), total, chunks, align=align)
    assert [p.size for p in plans] == sizes
    assert all(off % align == 0 for off in chunk_offsets(plans))


def test_float32_alignment_example():
    sizes = split_sizes(256 * MIB, 64, align=4)
    assert sizes == [4 * MIB] * 64
    assert split_sizes(40, 3, align=4) == [16, 12, 12]
    assert split_sizes(42, 3, align=4) == [16, 12, 14]  # the 2 leftover bytes go last


def _sent_per_stage(p: ChunkPlan, sizes) -> tuple[Fraction, Fraction]:
    """Bytes a host sends in the RS half and the AG half of one chunk, from its order alone."""
    rs = ag = Fraction(0)
    s = Fraction(p.size)
    for d in p.rs_order:  # RS stage on d (the AR on the last one is its RS + its AG)
        n = sizes[d]
        rs += s * (n - 1) / n
        s /= n
    for d in reversed(p.rs_order):  # AG stage on d, from shard s to n*s
        n = sizes[d]
        ag += s * (n - 1)
        s *= n
    assert s == p.size
    return rs, ag


@settings(max_examples=150, deadline=None)
@given(networks())
def test_bytes_sent_per_chunk_do_not_depend_on_the_order(net):
    sizes, bandwidths, total, chunks = net
    hosts = _prod(sizes)
    for policy in ("themis", "baseline"):
        plans = plan(sizes, bandwidths, total, chunks, policy=policy)
        for p in plans:
            rs, ag = _sent_per_stage(p, sizes)
            expected = Fraction(p.size) * (1 - Fraction(1, hosts))
            assert rs == expected
            assert ag == expected
        per_dim = bytes_sent_per_dim(plans, sizes)
        assert sum(per_dim) == pytest.approx(2 * total * (1 - 1 / hosts), rel=1e-9)


def test_size_one_dimensions_are_skipped():
    plans = plan((4, 1, 4, 1), (200, 100, 50, 10), 256 * MIB, 64)
    assert all(1 not in p.rs_order and 3 not in p.rs_order for p in plans)
    assert plans[0].rs_order == (0, 2)
    assert {p.rs_order for p in plans} <= {(0, 2), (2, 0)}
    # A size-1 dimension changes nothing: same orders and times as without it.
    with_one = predict((4, 1, 4), (200e9, 1e9, 50e9), 256 * MIB, 64)
    without = predict((4, 4), (200e9, 50e9), 256 * MIB, 64)
    assert [p.rs_order for p in with_one.plans] == [
        tuple(0 if d == 0 else 2 for d in p.rs_order) for p in without.plans
    ]
    assert with_one.time_s == pytest.approx(without.time_s)
    assert with_one.utilisation == pytest.approx(without.utilisation)
    assert with_one.dims[1].busy_s == 0
    # Only one dimension with peers: every chunk just all-reduces there.
    assert {p.rs_order for p in plan((1, 8, 1), (1, 1, 1), 1000, 10)} == {(1,)}
    # A single host: nothing to do in any dimension.
    assert {p.rs_order for p in plan((1, 1), (1, 1), 1000, 10)} == {()}


def test_greedy_follows_the_loads():
    # 16x16 at equal rates: after chunk 0 (0 then 1) dimension 1 is far less loaded, so
    # chunk 1 starts there; then they alternate and the loads stay balanced.
    plans = plan((16, 16), (100, 100), 256 * MIB, 64)
    assert plans[0].rs_order == (0, 1)
    assert plans[1].rs_order == (1, 0)
    assert sum(p.rs_order == (0, 1) for p in plans) == 32
    sent = bytes_sent_per_dim(plans, (16, 16))
    assert sent[0] == pytest.approx(sent[1])


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"dim_sizes": ()}, "dim_sizes"),
        ({"dim_sizes": (4, 0)}, r"dim_sizes\[1\]"),
        ({"dim_sizes": (4, 2.5)}, r"dim_sizes\[1\]"),
        ({"dim_bandwidths": (1.0, 0.0)}, r"dim_bandwidths\[1\]"),
        ({"dim_bandwidths": (1.0, -3)}, r"dim_bandwidths\[1\]"),
        ({"dim_bandwidths": (1.0, math.inf)}, r"dim_bandwidths\[1\]"),
        ({"dim_bandwidths": (1.0,)}, "dim_bandwidths has 1 values"),
        ({"chunks": 0}, "chunks"),
        ({"chunks": 1001}, "chunks"),
        ({"total_bytes": 0}, "total_bytes"),
        ({"policy": "random"}, "policy"),
        ({"align": 0}, "align"),
        ({"align": 4, "chunks": 251}, "chunks"),
    ],
)
def test_bad_input_raises_one_sentence_naming_the_argument(kwargs, word):
    args = {"dim_sizes": (4, 4), "dim_bandwidths": (1.0, 1.0), "total_bytes": 1000,
            "chunks": 10, **kwargs}
    with pytest.raises(FabricLabError, match=word) as info:
        plan(**args)
    message = str(info.value)
    assert "\n" not in message
    assert message.count(". ") == 0


def test_model_rejects_bad_order_and_single_host():
    with pytest.raises(FabricLabError, match="order"):
        predict((4, 4), (1e9, 1e9), 1000, 4, order="lifo")
    with pytest.raises(FabricLabError, match="single host"):
        predict((1, 1), (1e9, 1e9), 1000, 4)
    with pytest.raises(FabricLabError, match="rs_order"):
        simulate([ChunkPlan(0, 100, (0, 0))], (4, 4), (1e9, 1e9))


# --- model -------------------------------------------------------------------------------


def test_model_matches_hand_computed_schedule():
    # 2x2 at 8 bit/s = 1 byte/s per dimension, 8 bytes in 2 chunks of 4, baseline order.
    # c0 RS d0 (sends 2) [0,2]; c1 RS d0 [2,4]; c0 AR d1 on 2 bytes (sends 2) [2,4];
    # c0 AG d0 from the 2-byte shard (sends 2) [4,6]; c1 AR d1 [4,6]; c1 AG d0 [6,8].
    pred = predict((2, 2), (8.0, 8.0), 8, 2, policy="baseline")
    got = [(r.chunk, r.dim, r.op, r.bytes, r.sent, r.start, r.end) for r in pred.schedule]
    assert got == [
        (0, 0, "RS", 4, 2, 0, 2),
        (1, 0, "RS", 4, 2, 2, 4),
        (0, 1, "AR", 2, 2, 2, 4),
        (0, 0, "AG", 2, 2, 4, 6),
        (1, 1, "AR", 2, 2, 4, 6),
        (1, 0, "AG", 2, 2, 6, 8),
    ]
    assert pred.time_s == 8
    assert pred.ideal_time_s == 6  # 2 * 8 * (1 - 1/4) / 2
    assert pred.utilisation == pytest.approx(6 / 8)
    assert [d.busy_s for d in pred.dims] == [8, 4]
    assert [d.utilisation for d in pred.dims] == [1.0, 0.5]
    # One chunk over 4x2: RS d0 6 s, AR d1 on 2 bytes 2 s, AG d0 from a 2-byte shard 6 s.
    single = predict((4, 2), (8.0, 8.0), 8, 1, semantics="fabriclab")
    assert [(r.op, r.end - r.start) for r in single.schedule] == [("RS", 6), ("AR", 2), ("AG", 6)]
    # astra-sim-1.0 splits a themis chunk's AR on its last dimension into RS 1 s + AG 1 s.
    single = predict((4, 2), (8.0, 8.0), 8, 1)
    assert [(r.dim, r.op, r.end - r.start) for r in single.schedule] == [
        (0, "RS", 6), (1, "RS", 1), (1, "AG", 1), (0, "AG", 6)]
    # One dimension: a single ring All-Reduce reaches utilisation 1.
    assert predict((4,), (8.0,), 8, 1).utilisation == pytest.approx(1.0)


def test_fifo_and_scf_pick_differently():
    plans = [ChunkPlan(0, 8, (0, 1)), ChunkPlan(1, 4, (0, 1))]
    fifo = simulate(plans, (2, 2), (8.0, 8.0), order="fifo", semantics="fabriclab")
    scf = simulate(plans, (2, 2), (8.0, 8.0), order="scf", semantics="fabriclab")
    assert fifo.schedule[0].chunk == 0  # both ready at 0: chunk index breaks the tie
    assert scf.schedule[0].chunk == 1  # the smaller phase goes first
    # astra-sim-1.0: chunk 0 is queued first and takes the idle dimension at once; scf only
    # reorders what waits (chunk 2, smaller, overtakes chunk 1)
    plans.append(ChunkPlan(2, 2, (0, 1)))
    fifo = simulate(plans, (2, 2), (8.0, 8.0), order="fifo")
    scf = simulate(plans, (2, 2), (8.0, 8.0), order="scf")
    assert [r.chunk for r in fifo.schedule if r.dim == 0][:3] == [0, 1, 2]
    assert [r.chunk for r in scf.schedule if r.dim == 0][:3] == [0, 2, 1]


def _check_schedule(pred) -> None:
    by_dim: dict[int, list] = {}
    by_chunk: dict[int, list] = {}
    for r in pred.schedule:
        by_dim.setdefault(r.dim, []).append(r)
        by_chunk.setdefault(r.chunk, []).append(r)
        bps = pred.dim_bandwidths_bps[r.dim] / 8
        assert r.end - r.start == pytest.approx(r.sent / bps, rel=1e-9)
    for runs in by_dim.values():  # one phase at a time per dimension
        runs.sort(key=lambda r: r.start)
        for a, b in itertools.pairwise(runs):
            assert b.start >= a.end - 1e-12
    for p in pred.plans:  # phases of a chunk in sequence, in the planned order
        runs = by_chunk[p.index]
        assert [r.dim for r in runs] == [*p.rs_order, *p.ag_order]
        middle = [] if p.split_last else ["AR"]  # split: RS and AG on the last dim too
        assert [r.op for r in runs] == ["RS"] * (len(p.rs_order) - len(middle)) + middle + [
            "AG"] * len(p.ag_order)
        for a, b in itertools.pairwise(runs):
            assert b.start >= a.end - 1e-12
    assert max(r.end for r in pred.schedule) == pytest.approx(pred.time_s)
    for d in pred.dims:
        busy = sum(r.end - r.start for r in by_dim.get(d.index, []))
        assert d.busy_s == pytest.approx(busy)
        assert 0 <= d.utilisation <= 1 + 1e-12


@settings(max_examples=120, deadline=None)
@given(networks(), st.sampled_from(["themis", "baseline"]), st.sampled_from(["fifo", "scf"]))
def test_utilisation_never_exceeds_one(net, policy, order):
    sizes, bandwidths, total, chunks = net
    if _prod(sizes) == 1:
        return
    pred = predict(sizes, [b * GBIT for b in bandwidths], total, chunks, policy, order)
    assert 0 < pred.utilisation <= 1.0
    assert pred.time_s >= pred.ideal_time_s
    _check_schedule(pred)


def test_model_is_deterministic():
    a = predict((4, 4, 4), (200e9, 100e9, 50e9), 256 * MIB, 64, order="scf")
    b = predict((4, 4, 4), (200e9, 100e9, 50e9), 256 * MIB, 64, order="scf")
    assert a == b


@pytest.mark.parametrize(("dims", "gbps", "base", "themis", "order", "semantics"), EXPECTED)
def test_expected_shapes(dims, gbps, base, themis, order, semantics):
    bw = [g * GBIT for g in gbps]
    b = predict(dims, bw, 256 * MIB, 64, policy="baseline", order="fifo", semantics=semantics)
    t = predict(dims, bw, 256 * MIB, 64, policy="themis", order=order, semantics=semantics)
    assert b.utilisation == pytest.approx(base, abs=0.03)
    assert t.utilisation == pytest.approx(themis, abs=0.03)
    _check_schedule(b)
    _check_schedule(t)


def test_expected_figures_exactly_as_modelled():
    """Pin the figures this model gives, so a change in them is noticed (see module doc)."""
    bw = (200e9, 100e9, 50e9)
    assert predict((4, 4, 4), bw, 256 * MIB, 64, "baseline").utilisation == pytest.approx(0.75)
    assert predict((4, 4, 4), bw, 256 * MIB, 64, "themis", "scf",
                   semantics="fabriclab").utilisation == pytest.approx(0.9746, abs=5e-4)
    assert predict((4, 4, 4), bw, 256 * MIB, 64, "themis", "scf").utilisation == pytest.approx(
        0.9552, abs=5e-4
    )
    assert predict((4, 4, 4), bw, 256 * MIB, 64, "themis", "fifo").utilisation == pytest.approx(
        0.9648, abs=5e-4
    )
    assert predict((16, 16), (1e11, 1e11), 256 * MIB, 64, "baseline").utilisation == (
        pytest.approx(17 / 32)  # dim 0 carries everything: (255/256) / (2 * 15/16)
    )
    assert predict((16, 16), (1e11, 1e11), 256 * MIB, 64, "themis").utilisation == (
        pytest.approx(1.0, abs=1e-3)
    )


@pytest.mark.parametrize(
    ("dims", "gbps"),
    [((8, 16), (300, 25)), ((2, 8), (100, 5)), ((4, 8), (100, 10)), ((4, 4, 4), (400, 200, 10))],
)
def test_no_gain_when_the_last_dimension_is_the_bottleneck(dims, gbps):
    bw = [g * GBIT for g in gbps]
    base = predict(dims, bw, 256 * MIB, 64, policy="baseline")
    for order in ("fifo", "scf"):
        them = predict(dims, bw, 256 * MIB, 64, policy="themis", order=order)
        assert them.utilisation <= base.utilisation + 0.01
    them = predict(dims, bw, 256 * MIB, 64, policy="themis", order="scf")
    assert them.utilisation == pytest.approx(base.utilisation, abs=0.01)
    if len(dims) == 2:
        assert all(p.rs_order == (0, 1) for p in them.plans)


def test_8x16_shape_from_the_paper():
    bw = (300 * GBIT, 25 * GBIT)
    base = predict((8, 16), bw, 256 * MIB, 64, policy="baseline")
    them = predict((8, 16), bw, 256 * MIB, 64, policy="themis", order="scf")
    assert them.time_s == pytest.approx(base.time_s)
    assert base.dims[1].utilisation > 0.98  # the outer dimension is the bottleneck


# --- CLI ---------------------------------------------------------------------------------


@pytest.fixture
def run_cli(capsys):

    def run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


COMMON = ("--dims", "4x4x4", "--bw", "200,100,50", "--size", "256MiB", "--chunks", "64")


def test_cli_plan_table(run_cli):
    code, out, err = run_cli("plan", *COMMON)
    assert code == 0, err
    assert "0→1→2" in out and "2→1→0" in out
    assert "4MiB" in out
    assert "sent/host" in out


def test_cli_plan_json(run_cli):
    code, out, _ = run_cli("plan", *COMMON, "--policy", "baseline", "--json", "--align", "4")
    assert code == 0
    doc = json.loads(out)
    assert len(doc["chunks"]) == 64
    assert all(c["rs_order"] == [0, 1, 2] and c["ag_order"] == [1, 0] for c in doc["chunks"])
    assert sum(c["size_bytes"] for c in doc["chunks"]) == 256 * MIB
    assert len(doc["dimensions"]) == 3
    assert doc["bw_gbit_s"] == [200, 100, 50] == [d["bw_gbit_s"] for d in doc["dimensions"]]
    assert all(d["sent_per_host_bytes"] > 0 for d in doc["dimensions"])


def test_cli_model_side_by_side(run_cli):
    code, out, err = run_cli("model", *COMMON)
    assert code == 0, err
    assert "baseline" in out and "themis" in out
    assert "0.750" in out and "0.965" in out  # astra-sim-1.0 semantics (the default)
    assert "speedup over baseline: 1.286x" in out
    code, out, err = run_cli("model", *COMMON, "--semantics", "fabriclab")
    assert code == 0, err
    assert "0.975" in out and "speedup over baseline: 1.299x" in out
    code, out, err = run_cli("model", *COMMON, "--order", "scf")
    assert code == 0, err
    assert "scf order" in " ".join(out.split())


def test_cli_model_one_policy_json(run_cli):
    code, out, _ = run_cli("model", *COMMON, "--policy", "themis", "--json")
    assert code == 0
    doc = json.loads(out)
    assert [p["policy"] for p in doc["predictions"]] == ["themis"]
    assert "speedup" not in doc
    pred = doc["predictions"][0]
    assert 0.95 < pred["utilisation"] <= 1
    assert len(pred["dimensions"]) == 3
    assert doc["bw_gbit_s"] == [200, 100, 50]
    assert {"chunk", "dim", "op", "input_bytes", "sent_bytes", "start_s",
            "end_s"} <= set(pred["schedule"][0])
    assert {"bw_gbit_s", "sent_per_host_bytes", "busy_s"} <= set(pred["dimensions"][0])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--dims", "4x4x4", "--bw", "200,100"), "--bw has 2 values but --dims has 3 dimensions"),
        (("--dims", "4x0", "--bw", "1,1"), "--dims"),
        (("--dims", "4,4", "--bw", "1,1"), "--dims"),
        (("--dims", "4x4", "--bw", "1,fast"), "--bw"),
        (("--dims", "4x4", "--bw", "1,-2"), "--bw"),
    ],
)
@pytest.mark.parametrize("command", ["plan", "model"])
def test_cli_bad_flags(run_cli, command, argv, message):
    code, _, err = run_cli(command, *argv, "--size", "1MiB", "--chunks", "4")
    assert code == 2
    assert message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--size", "1MiB", "--chunks", "0"), "--chunks"),
        (("--size", "8", "--chunks", "9"), "--chunks"),
        (("--size", "lots", "--chunks", "4"), "size"),
    ],
)
def test_cli_bad_size_or_chunks(run_cli, extra, message):
    code, _, err = run_cli("model", "--dims", "4x4", "--bw", "1,1", *extra)
    assert code == 2
    assert message in err
