"""The ``ps`` collective (parameter servers, one tensor per variable): exact sums on real
ranks over every transport, its variables and servers as the knobs say, and exact times and
bytes on the simulator."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from collective_helpers import allreduce_counts, inputs

from testbed.core.errors import SpecError
from testbed.core.experiment import expand
from testbed.core.registry import COLLECTIVES
from testbed.core.spec import one_switch_fabric
from testbed.sim.backend import GOODPUT, SimRunner
from workloads.collectives.parameter_server import ParameterServer, PsOptions
from workloads.launcher import local_configs, run_local

LADDER = ["zerocopy", "staged", "serialised", "rpc-lite", "rpc", "rpc-proto"]


def ps(**options) -> ParameterServer:
    return ParameterServer(PsOptions(**options))


def reduces_exactly(tmp_path, world: int, options: dict, transport: str = "zerocopy",
                    counts: tuple[int, ...] = (1, 7, 30_011)) -> None:
    cfgs = local_configs(ranks=world, dims=[world], algorithm="ps", sizes=[4],
                         out_dir=tmp_path, transport=transport, timeout=30.0,
                         options={"ps": options})
    want = [np.sum([inputs(r, c) for r in range(world)], axis=0) for c in counts]
    for rank_out in allreduce_counts(cfgs, list(counts)):
        for w, buf in zip(want, rank_out, strict=True):
            np.testing.assert_array_equal(buf, w)


@pytest.mark.parametrize("servers", [1, 2, 3, 4])
@pytest.mark.parametrize("world", [2, 3, 5, 8, 16])
def test_ps_is_exact_for_2_to_16_workers_and_1_to_4_servers(tmp_path, world, servers) -> None:
    reduces_exactly(tmp_path, world, {"servers": servers, "variables": 6})


@pytest.mark.parametrize("transport", LADDER)
def test_ps_is_exact_over_every_transport_with_a_models_variables(tmp_path, transport) -> None:
    reduces_exactly(tmp_path, 4, {"servers": 2, "model": "resnet50"}, transport,
                    counts=(5, 300_007))


def test_a_models_layers_are_the_variables_round_robin_over_the_servers() -> None:
    c = ps(servers=3, model="resnet-50")
    assert c.options.model == "resnet50"
    bounds = c.variable_bounds(25_557_032, 4)  # ResNet-50's parameters, one element each
    assert len(bounds) == 54 and bounds[0] == (0, 2_049_000)  # fc first (backprop order)
    assert bounds[-1][1] == 25_557_032 and all(
        b[0] == a[1] for a, b in itertools.pairwise(bounds))
    assert [c.server_of(v, 4) for v in range(5)] == [0, 1, 2, 0, 1]
    assert ps(servers=4).servers(2) == 2  # clipped to the group
    assert ps(servers=2).weights(5) == (1, 1) and ps(variables=3).weights(5) == (1, 1, 1)


def test_ps_transfers_push_then_pull_every_variable_and_count_bytes() -> None:
    c = ps(servers=2, variables=4)
    push, pull = c.transfers("AR", 3, 400.0)
    assert sorted(push) == sorted((w, v % 2, 100.0) for v in range(4) for w in range(3)
                                  if w != v % 2)
    assert sorted(pull) == sorted((s, w, b) for w, s, b in push)
    total = sum(b for step in (push, pull) for _, _, b in step)
    assert c.sent_bytes("AR", 3, 400.0) * 3 == pytest.approx(total)
    assert c.step_count("AR", 3) == 2
    with pytest.raises(Exception, match="flat job's algorithm only"):
        c.transfers("RS", 3, 400.0)


def test_ps_options_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown model 'vgg'"):
        PsOptions(model="vgg")
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        PsOptions(servers=0)
    assert COLLECTIVES.get("ps").options_model is PsOptions


def test_a_ps_worker_job_records_its_bytes(tmp_path) -> None:
    from testbed.core.traces import read_table

    res = run_local(ranks=4, sizes=[1 << 20], algorithm="ps", iterations=2, timeout=30.0,
                    options={"ps": {"servers": 2, "model": "transformer"}}, out_dir=tmp_path)
    assert [r.correct for r in res.rows] == [True]
    phases = read_table(tmp_path, "phases").to_pandas()
    assert (phases["sent_bytes"] == 2 * 3 * (1 << 20) // 4).all()


def sim_ps(tmp_path, world: int, servers: int) -> dict:
    data = {"name": "ps",
            "fabric": one_switch_fabric(world, 100),
            "jobs": [{"name": "p", "hosts_wanted": world, "algorithm": "ps",
                      "options": {"ps": {"servers": servers}},
                      "workload": {"kind": "allreduce", "sizes": ["4MiB"], "iterations": 2}}]}
    (exp,) = expand(data)
    run_dir = SimRunner(exp, tmp_path).run()
    return json.loads((run_dir / "summary.json").read_text())["jobs"]["p"]


@pytest.mark.parametrize(("world", "servers"), [(2, 1), (4, 1), (8, 2), (16, 4)])
def test_ps_on_the_simulator_takes_the_servers_links_time(tmp_path, world, servers) -> None:
    """Equal variables, one per server: each step is bound by a server's link carrying
    ``n-1`` workers' ``S/k`` each (k servers), at the TCP goodput of 100 Mbit/s."""
    job = sim_ps(tmp_path, world, servers)
    size_bits = 4 * (1 << 20) * 8
    want = 2 * (world - 1) * size_bits / servers / (100e6 * GOODPUT)
    assert job["mean_s"] == pytest.approx(want, rel=1e-6)


def test_ps_runs_only_as_a_flat_algorithm() -> None:
    data = {"name": "ps", "fabric": {"kind": "multidim", "dims": [
        {"size": 2, "mbit_s": 10}, {"size": 2, "mbit_s": 10}]},
        "jobs": [{"name": "p", "hosts_wanted": 4, "algorithm": "themis",
                  "dim_algorithm": "ps", "workload": {"kind": "allreduce", "sizes": ["1MiB"]}}]}
    with pytest.raises(SpecError, match="dim_algorithm: ps runs only as a flat job's algorithm"):
        expand(data)


class _Recorder:
    """A link that records what is sent over it and receives ones."""

    def __init__(self, to: int, sent: list) -> None:
        self.to, self.sent = to, sent

    def start_send(self, tag, arr) -> None:
        self.sent.append((self.to, tag.step, tag.slice, arr.size))

    def finish_send(self, tag, quiet: bool = False) -> None:
        pass

    def scratch(self, count: int) -> np.ndarray:
        return np.empty(count, dtype=np.float32)

    def receive(self, tag, target: np.ndarray) -> None:
        target[:] = 1


def test_a_dnn_buckets_variables_go_to_the_servers_of_their_global_indices() -> None:
    """Position 1 of 3, two servers: of a bucket holding variables 5 (elements 0-4) and 6
    (4-10), it serves 5 (5 % 2 = 1) and pushes 6 to position 0, wherever they sit in the
    bucket; a variable with no element is not sent."""
    from workloads.collectives.base import Group

    sent: list = []
    n, p = 3, 1
    links = tuple(_Recorder((p + k) % n, sent) for k in range(1, n))  # link k-1 sends to p+k
    buf = np.zeros(10, dtype=np.float32)
    ps(servers=2).all_reduce_variables(Group(p, n, links), buf, coll=0,
                                       variables=[(5, 0, 4), (6, 4, 10), (7, 10, 10)])
    PUSH, PULL = 0, 1
    assert sorted(sent) == [(0, PUSH, 6, 6), (0, PULL, 5, 4), (2, PULL, 5, 4)]
    assert buf[:4].tolist() == [2] * 4  # its own 0 plus the two workers' pushes of 1
    assert buf[4:].tolist() == [1] * 6  # pulled from the server of 6


def test_ps_in_an_unbucketed_dnn_job_is_exact_and_sends_each_layer_once(tmp_path) -> None:
    from testbed.core.traces import read_table
    from workloads.dnn import profile

    res = run_local(ranks=3, algorithm="ps", transport="rpc-lite", timeout=30.0,
                    options={"ps": {"servers": 2}}, out_dir=tmp_path,
                    dnn={"model": "resnet50", "scale": 1e-3, "compute_scale": 0,
                         "bucket_cap_mb": 0, "iterations": 1, "warmup": 0})
    assert res.dnn is not None and res.dnn["correct"]
    buckets = read_table(tmp_path, "buckets").to_pandas()
    layers = profile("resnet50", 1e-3, 0, bucket_cap_mb=0).buckets
    assert len(buckets) == 3 * 54 and buckets["correct"].all()
    assert sorted(set(buckets["bytes"])) == sorted({b.bytes for b in layers})


def test_the_simulator_sends_each_layer_whole_to_the_server_of_its_index(tmp_path) -> None:
    """An unbucketed DNN job, no compute, 3 workers and 2 servers on one switch: each layer is
    one collective, pushed whole by the 2 other workers into its server's link and pulled back
    out of it, so it takes 2·2·bytes at the link's goodput. Split over both servers (as the
    simulator did before it placed variables), each would take half that."""
    import pandas as pd

    from workloads.dnn import profile

    data = {"name": "psdnn",
            "fabric": one_switch_fabric(3, 100),
            "solo_baselines": False,
            "jobs": [{"name": "p", "hosts_wanted": 3, "algorithm": "ps",
                      "options": {"ps": {"servers": 2}},
                      "workload": {"kind": "dnn", "model": "resnet50", "scale": 1e-3,
                                   "compute_scale": 0, "bucket_cap_mb": 0,
                                   "iterations": 1, "warmup": 0}}]}
    (exp,) = expand(data)
    run_dir = SimRunner(exp, tmp_path).run()
    buckets = pd.read_parquet(run_dir / "jobs" / "p" / "buckets-rank0.parquet").sort_values(
        "bucket")
    layers = profile("resnet50", 1e-3, 0, bucket_cap_mb=0).buckets
    assert len(buckets) == len(layers) == 54
    want = [2 * 2 * b.bytes * 8 / (100e6 * GOODPUT) for b in layers]
    got = (buckets["end"] - buckets["start"]).tolist()
    assert got == pytest.approx(want, rel=1e-6)
