"""Every registered routing policy on a real fabric (root): Mininet, OVS, the controller and
real workers run the contract experiment of test_policies.py, and where a policy's route is
deterministic the bytes the emulator counted went exactly where the simulator's paths say."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_policies import cases, contract_experiment, place, plan_of

from sdn_app.policies import get
from testbed.core.experiment import expand
from testbed.emulator.runner import Runner

pytestmark = [pytest.mark.root, pytest.mark.slow]


def carried_bytes(run_dir: Path) -> dict[tuple[str, str], int]:
    """Bytes each leaf-spine link direction carried over the run."""
    df = pd.read_parquet(run_dir / "link_samples.parquet")
    fabric = df[df["src"].str.match(r"(leaf|spine)\d") & df["dst"].str.match(r"(leaf|spine)\d")]
    g = fabric.groupby(["src", "dst"])["bytes"]
    return {k: int(v) for k, v in (g.max() - g.min()).items()}


def predicted_links(name: str, kind: str, hosts_by_job: dict[str, list[str]]) -> set:
    """Leaf-spine link directions the ring's flows (rank i -> rank i+1) take by the policy."""
    plan = plan_of(kind)
    policy = get(name)
    out = set()
    for alloc in place(name, plan):
        hosts = [(plan.node(h).leaf, plan.node(h).slot) for h in hosts_by_job[alloc.job_id]]
        assert sorted(hosts) == sorted(alloc.hosts)  # the controller placed as we do
        for i, src in enumerate(hosts):
            dst = hosts[(i + 1) % len(hosts)]
            for link in policy.path(alloc, src, dst, plan.spec.spines):
                if link[0] == "ls":
                    out.add((f"leaf{link[1]}", f"spine{link[2]}"))
                elif link[0] == "sl":
                    out.add((f"spine{link[1]}", f"leaf{link[2]}"))
    return out


@pytest.mark.parametrize(("name", "kind"), cases())
def test_policy_runs_on_a_real_fabric(name: str, kind: str, tmp_path: Path) -> None:
    (exp,) = expand(contract_experiment(name, kind))
    runner = Runner(exp, tmp_path)
    run_dir = runner.run()
    assert runner.status == "ok", runner.error
    summary = json.loads((run_dir / "summary.json").read_text())
    assert all(j["correct"] for j in summary["jobs"].values())
    jobs = json.loads((run_dir / "jobs.json").read_text())
    assert {j["policy"] for j in jobs} == {name}
    if kind != "leaf_spine" or get(name).per_flow_paths:
        return
    predicted = predicted_links(name, kind, {j["name"]: j["hosts"] for j in jobs})
    carried = carried_bytes(run_dir)
    # One ring flow carries 2 iterations x 2(n-1)/n x 256 KiB; ACKs on the way back are ~3%.
    flow_bytes = 2 * 1.5 * 256 * 1024
    busy = {link for link, b in carried.items() if b > 0.5 * flow_bytes}
    assert predicted, "the contract experiment must cross leaves"
    assert busy == predicted, (sorted(busy), sorted(predicted))
    assert all(b < 0.25 * flow_bytes for link, b in carried.items() if link not in busy)
