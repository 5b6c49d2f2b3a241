"""Which routing policies exist and which fabric kinds each applies to (pure data; the rules
each policy installs live in :mod:`sdn_app.program`)."""

from __future__ import annotations

from testbed.core.topology import FabricPlan

POLICIES = ("ecmp", "vclos", "ocs-vclos", "shortest")


def policy_for(plan: FabricPlan, policy: str | None) -> str:
    """The policy to run: the given one, checked against the fabric, or the fabric's default."""
    if policy is None:
        return {"multidim": "shortest", "leaf_spine": "ecmp"}.get(plan.kind, "ocs-vclos")
    allowed = {"multidim": ("shortest",), "leaf_spine": ("ecmp", "vclos"),
               "ocs_leaf_spine": ("ocs-vclos",)}[plan.kind]
    if policy not in allowed:
        raise ValueError(f"policy {policy!r} does not apply to a {plan.kind} fabric; "
                         f"use {' or '.join(allowed)}")
    return policy
