"""The α-β model of a flat All-Reduce on a leaf-spine fabric (workloads.flat_model): each
step's slowest path delay plus its bytes at its share of its busiest link, recorded as a flat
job's model_s (pure, no root)."""

from __future__ import annotations

import pytest

from testbed.core.experiment import expand
from testbed.core.formulas import TCP_GOODPUT
from testbed.core.jobs import resolve
from testbed.core.topology import build_plan
from workloads.collectives.direct import Direct
from workloads.collectives.halving_doubling import COLLECTIVE as HALVING_DOUBLING
from workloads.collectives.ring import COLLECTIVE as RING
from workloads.flat_model import flat_allreduce_s
from workloads.model import job_model_s

HOSTS = [f"h{i}" for i in range(8)]
MIB = 1024 * 1024


def _plan(delay_us: float = 0.0):
    (exp,) = expand({"name": "m", "rate_scale": 0.001,
                     "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 1,
                                "hosts_per_leaf": 4, "host_link_mbit_s": 100000,
                                "uplink_mbit_s": 200000, "host_link_delay_us": delay_us,
                                "uplink_delay_us": delay_us},
                     "jobs": [{"name": "a", "hosts": HOSTS,
                               "workload": {"kind": "allreduce", "sizes": [4096]}}]},
                    shaped=False)
    return build_plan(exp.fabric, exp.rate_scale)


def test_the_flat_model_charges_halving_doubling_its_crowded_uplink() -> None:
    """On perfect wires, 2 leaves under one spine of twice a host's rate: a ring sends
    2·7/8·S at the host rate, halving-doubling's distance-4 rounds (S/2 each) run at half."""
    plan, size = _plan(), 64 * MIB
    goodput = 100e6 * TCP_GOODPUT / 8  # bytes/s of a host link, as emulated
    assert flat_allreduce_s(plan, HOSTS, RING, size) == pytest.approx(1.75 * size / goodput)
    assert flat_allreduce_s(plan, HOSTS, HALVING_DOUBLING, size) == pytest.approx(
        2.75 * size / goodput)


def test_the_flat_model_pays_the_delays_of_each_rank_s_chain_of_hops() -> None:
    """2 µs real per link at rate_scale 0.001: 2 ms emulated, 8 ms across the spine, 4 ms
    within a leaf. The ring h0..h7 crosses the spine at h3->h4 and h7->h0; each rank waits
    only for its predecessor, so the last to finish has a chain of 14 hops behind it, 4 of
    them across (not 14 steps each paying the crossing). Halving-doubling's 6 steps each pair
    every rank over one kind of path: across twice, within a leaf 4 times."""
    tiny = 4
    ring = flat_allreduce_s(_plan(2), HOSTS, RING, tiny) - flat_allreduce_s(_plan(), HOSTS,
                                                                             RING, tiny)
    hd = (flat_allreduce_s(_plan(2), HOSTS, HALVING_DOUBLING, tiny)
          - flat_allreduce_s(_plan(), HOSTS, HALVING_DOUBLING, tiny))
    assert ring == pytest.approx(4 * 8e-3 + 10 * 4e-3)
    assert hd == pytest.approx(2 * 8e-3 + 4 * 4e-3)


class _Chain(Direct):
    """A lock-step algorithm (no ``sim_slices``) whose second step's sender had its input
    early: 0->4 across the spine beside 1->2 within a leaf, then 2->3."""

    def rs_transfers(self, n: int, size_bytes: float) -> list[list[tuple[int, int, float]]]:
        return [[(0, 4, size_bytes), (1, 2, size_bytes)]]

    def ag_transfers(self, n: int, shard_bytes: float) -> list[list[tuple[int, int, float]]]:
        return [[(2, 3, shard_bytes)]]


def test_an_algorithm_the_simulator_runs_in_lock_step_is_modelled_in_lock_step() -> None:
    """Rank by rank, 2->3 could start at 4 ms and end at 8; in lock step (as the simulator
    runs an algorithm without ``sim_slices``) it waits for the 8 ms crossing: 12 ms."""
    chain, tiny = _Chain(), 4
    assert chain.sim_slices(len(HOSTS), tiny) is None
    took = (flat_allreduce_s(_plan(2), HOSTS, chain, tiny)
            - flat_allreduce_s(_plan(), HOSTS, chain, tiny))
    assert took == pytest.approx(8e-3 + 4e-3)




def test_a_flat_job_records_the_flat_model_and_a_multidim_fabric_none() -> None:
    (exp,) = expand({"name": "m", "fabric": {"kind": "leaf_spine", "leaves": 1, "spines": 1,
                                             "hosts_per_leaf": 4, "host_link_mbit_s": 100,
                                             "uplink_mbit_s": 100, "host_link_delay_us": 1000},
                     "jobs": [{"name": "a", "hosts": HOSTS[:4], "algorithm": "ring",
                               "workload": {"kind": "allreduce", "sizes": [4, 4096]}}]})
    plan = build_plan(exp.fabric)
    model = job_model_s(resolve(exp.jobs[0], plan, HOSTS[:4]), plan)
    assert model is not None and set(model) == {"4", "4096"}
    assert model["4"] == pytest.approx(6 * 2e-3, rel=1e-3)  # 6 steps of 2 links of 1 ms
