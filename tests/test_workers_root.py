"""Worker processes inside Mininet hosts: real collectives through real shaped links (root)."""

from __future__ import annotations

import pandas as pd
import pytest

from testbed.core.spec import one_switch_fabric, parse_fabric
from testbed.core.topology import build_plan, one_switch_plan
from testbed.core.traces import read_table
from testbed.emulator.fabric import Fabric
from testbed.emulator.workers import run_on_fabric

pytestmark = [pytest.mark.root, pytest.mark.slow]

MULTIDIM = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                         {"size": 4, "mbit_s": 20, "kind": "ring"}]}


def plan_of(fabric):
    return build_plan(parse_fabric({"fabric": fabric}))


@pytest.mark.parametrize("algorithm", ["baseline", "themis"])
def test_hierarchical_allreduce_through_shaped_multidim_links(tmp_path, algorithm):
    plan = plan_of(MULTIDIM)
    hosts = [h.name for h in plan.hosts]
    sizes = [4 * 1001, 256 * 1024]  # an element count no dimension divides, and 256 KiB
    with Fabric(plan, tmp_path / "fabric") as fab:
        res = run_on_fabric(fab, hosts, out_dir=tmp_path / algorithm, algorithm=algorithm,
                            sizes=sizes, chunks=5, iterations=2, warmup=1, order="scf",
                            timeout=30, wall_timeout=180)
    assert [r.size for r in res.rows] == sizes
    assert all(r.correct for r in res.rows), "a rank's result is not the sum of all inputs"
    phases = read_table(tmp_path / algorithm, "phases").to_pandas()
    assert set(phases["rank"]) == set(range(8))
    assert set(phases["dim"]) == {0, 1}  # both dimensions carried chunk phases
    # the baseline All-Reduces on its last dimension; under the default astra-sim-1.0
    # semantics a Themis chunk Reduce-Scatters and All-Gathers there instead
    # (docs/themis-semantics.md)
    assert set(phases["op"]) == ({"RS", "AR", "AG"} if algorithm == "baseline"
                                 else {"RS", "AG"})
    if algorithm == "baseline":  # every chunk reduce-scatters on dimension 0 first
        first = phases.sort_values("start").groupby(["rank", "coll", "chunk"]).first()
        assert (first["dim"] == 0).all()


def test_flat_ring_on_one_shaped_switch_both_transports(tmp_path):
    plan = one_switch_plan(4, 50)
    hosts = [h.name for h in plan.hosts]
    with Fabric(plan, tmp_path / "fabric") as fab:
        rows = {}
        for transport in ("zerocopy", "rpc"):
            res = run_on_fabric(fab, hosts, out_dir=tmp_path / transport, algorithm="ring",
                                sizes=[4 * 4099, 1 << 20], transport=transport, iterations=2,
                                warmup=1, wall_timeout=120)
            rows[transport] = res.rows
    for transport, result in rows.items():
        assert all(r.correct for r in result), transport
        # 1 MiB over 50 Mbit/s links cannot beat the links: busbw stays under the rate
        assert result[-1].busbw * 8e9 < 50e6 * 1.05, transport
    assert isinstance(read_table(tmp_path / "rpc", "collectives").to_pandas(), pd.DataFrame)


SWITCHED = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                         {"size": 4, "mbit_s": 20, "kind": "switch"}]}
LEAF = one_switch_fabric(4, 50)


@pytest.mark.parametrize(("fabric", "config"), [
    (LEAF, {"algorithm": "halving-doubling"}),
    (SWITCHED, {"algorithm": "themis", "dim_algorithm": "halving-doubling", "chunks": 5,
                "order": "scf"}),
], ids=["flat", "themis-per-dimension"])
def test_halving_doubling_through_shaped_links(tmp_path, fabric, config):
    plan = plan_of(fabric)
    hosts = [h.name for h in plan.hosts]
    sizes = [4 * 1001, 256 * 1024]  # uneven shards, and 256 KiB
    with Fabric(plan, tmp_path / "fabric") as fab:
        res = run_on_fabric(fab, hosts, out_dir=tmp_path / "hd", sizes=sizes, iterations=2,
                            warmup=1, timeout=30, wall_timeout=180, **config)
    assert [r.size for r in res.rows] == sizes
    assert all(r.correct for r in res.rows), "a rank's result is not the sum of all inputs"
    phases = read_table(tmp_path / "hd", "phases").to_pandas()
    assert set(phases["rank"]) == set(range(len(hosts)))
    if config["algorithm"] == "themis":
        assert set(phases["dim"]) == {0, 1}
