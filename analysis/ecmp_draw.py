"""What a run's ECMP draw was: fixed by its jobs' ``source_port_seed`` or random, and the
chance that a uniform 5-tuple hash puts two of its jobs on one leaf-spine link."""

from __future__ import annotations

from typing import Any

from analysis.load import Run
from sdn_app.policies.ecmp import collision_chance
from testbed.core.registry import POLICIES


def ring_flows(jobs: list[dict[str, Any]], leaf_of: dict[str, int]) -> list[tuple[str, int, int]]:
    """The cross-leaf connections of flat ring jobs, rank i to rank i+1, as ``(job, source
    leaf, destination leaf)``."""
    flows = []
    for job in jobs:
        hosts = job.get("hosts") or []
        for i, src in enumerate(hosts if len(hosts) > 1 else []):
            dst = hosts[(i + 1) % len(hosts)]
            if leaf_of[src] != leaf_of[dst]:
                flows.append((str(job["name"]), leaf_of[src], leaf_of[dst]))
    return flows


def draw_sentence(run: Run, tenants: list[dict[str, Any]], policy: str) -> str:
    """``ECMP's draw is fixed by source_port_seed 1 (...)``, or ``""`` where the policy does
    not hash or the fabric is not a leaf-spine one."""
    spec = run.topology.get("spec") or {}
    if (policy not in POLICIES.names() or not getattr(POLICIES.get(policy), "hashed", False)
            or run.topology.get("kind") != "leaf_spine"):
        return ""
    seeds = {j.get("source_port_seed") for j in tenants}
    if len(seeds) > 1:
        return "ECMP's draw is fixed for some jobs only (their source_port_seed differ)"
    seed = seeds.pop() if seeds else None
    draw = ("ECMP's draw is a new one each run (ephemeral source ports)" if seed is None else
            f"ECMP's draw is fixed by source_port_seed {seed}, the same every run")
    if any(j.get("algorithm", "ring") != "ring" for j in tenants):
        return draw  # the chance below counts ring connections only
    leaf_of = {h["name"]: int(h["leaf"]) for h in run.topology.get("hosts") or []}
    chance = collision_chance(ring_flows(tenants, leaf_of), int(spec.get("spines") or 1))
    if chance is None:
        return f"{draw} (too many connections to count the chance of a collision)"
    would = "two jobs share a link" if seed is None else \
        "with random source ports two jobs would share a link"
    return f"{draw}; {would} in {chance:.1%} of draws"
