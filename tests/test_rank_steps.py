"""Flat collectives simulated rank by rank (testbed.sim.rank_steps): the lock step's time where
every path is alike, each rank's own chain of hops where paths differ, and one message after
another on a connection."""

from __future__ import annotations

import pytest

from testbed.sim.collectives import run_steps
from testbed.sim.flows import Network
from testbed.sim.rank_steps import Connection, run_rank_steps
from workloads.collectives.base import shard_bounds
from workloads.collectives.halving_doubling import COLLECTIVE as HALVING_DOUBLING
from workloads.collectives.ring import COLLECTIVE as RING
from workloads.collectives.ring import slice_count

RATE_BIT_S = 1e9


def _path(a: int, b: int) -> list[tuple[str, int]]:
    return [("up", a), ("down", b)]


def _network(delays_s: dict[tuple[str, int], float] | None = None) -> Network:
    net = Network(default_capacity=RATE_BIT_S)
    net.delays_s.update(delays_s or {})
    return net


def _rank_by_rank_s(collective, n: int, size: int, net: Network) -> float:
    pairs: dict[tuple[int, int], Connection] = {}

    def connection(a: int, b: int) -> Connection:
        return pairs.setdefault((a, b), Connection(net, _path(a, b)))

    ends: list[float] = []
    run_rank_steps(net, [collective.transfers("RS", n, size),
                         collective.transfers("AG", n, size / n)],
                   connection, collective.sim_slices(n, size), ends.append)
    net.run()
    (end,) = ends
    return end


def _lock_step_s(collective, n: int, size: int, net: Network) -> float:
    steps = [[(_path(a, b), nbytes) for a, b, nbytes in step]
             for step in collective.transfers("AR", n, size)]
    ends: list[float] = []
    run_steps(net, steps, ends.append)
    net.run()
    return ends[0]


@pytest.mark.parametrize("collective", [RING, HALVING_DOUBLING], ids=lambda c: c.name)
@pytest.mark.parametrize("size", [4096, 8 << 20])
@pytest.mark.parametrize("n", [2, 4, 8])
def test_alike_paths_take_the_lock_step_s_time(collective, size: int, n: int) -> None:
    assert _rank_by_rank_s(collective, n, size, _network()) == pytest.approx(
        _lock_step_s(collective, n, size, _network()), rel=1e-9)


def test_a_ring_pays_the_slow_hop_as_often_as_a_rank_s_chain_crosses_it() -> None:
    """4 ranks, hop 0->1 delayed by 5 ms. Each rank's chain is 6 consecutive hops of the
    4-hop ring, so the last rank's crosses the slow hop twice; in lock step all 6 steps wait
    for it."""
    delay_s, size, n = 5e-3, 4096, 4
    delayed = {("down", 1): delay_s}
    base = _rank_by_rank_s(RING, n, size, _network())
    assert RING.sim_slices(n, size) == 1
    assert _rank_by_rank_s(RING, n, size, _network(delayed)) - base == pytest.approx(
        2 * delay_s, rel=1e-6)
    assert _lock_step_s(RING, n, size, _network(delayed)) - base == pytest.approx(
        6 * delay_s, rel=1e-6)


def test_a_sliced_ring_hides_its_delay_behind_the_slices_in_flight() -> None:
    """8 MiB over 4 ranks: 2 MiB shards in 8 slices; 1 ms on every link. Each link stays busy
    while slices are on their way, so the collective pays its delay far fewer than 6 times."""
    n, size = 4, 8 << 20
    delays = {(way, r): 1e-3 for way in ("up", "down") for r in range(n)}
    bare = _rank_by_rank_s(RING, n, size, _network())
    sliced = _rank_by_rank_s(RING, n, size, _network(delays)) - bare
    assert RING.sim_slices(n, size) == 8
    assert sliced < 3 * 2e-3 < _lock_step_s(RING, n, size, _network(delays)) - bare


def test_a_connection_sends_one_message_after_another() -> None:
    net = _network({("up", 0): 1e-3})
    arrivals: list[float] = []
    conn = Connection(net, _path(0, 1))
    for _ in range(2):
        conn.send(125_000, lambda: arrivals.append(net.now))  # 1 ms each at 1 Gbit/s
    net.run()
    assert arrivals == pytest.approx([2e-3, 3e-3])


def test_the_ring_s_slices_are_the_workers() -> None:
    for n, size in [(2, 4096), (4, 1 << 20), (8, 64 << 20), (3, 3 << 20)]:
        elems = size // 4
        widest = max(hi - lo for lo, hi in shard_bounds(elems, n))
        assert RING.sim_slices(n, size) == slice_count(widest)


def test_zero_byte_steps_end_at_once() -> None:
    net = _network()
    ends: list[float] = []
    run_rank_steps(net, [[[(0, 1, 0.0), (1, 0, 0.0)]]], lambda a, b: Connection(net, _path(a, b)),
                   1, ends.append)
    assert ends == [0.0]
