"""Routing policies, one module each, registered in :data:`testbed.core.registry.POLICIES`.

Built in: ``ecmp``, ``ecmp-l3``, ``vclos``, ``ocs-vclos`` (leaf-spine and OCS fabrics) and
``shortest`` (multidim). A new policy subclasses :class:`~sdn_app.policies.base.RoutingPolicy`
and registers itself (see docs/extending.md).
"""

from __future__ import annotations

from sdn_app.policies.base import RoutingPolicy
from testbed.core.errors import SpecError
from testbed.core.experiment import STATIC_POLICY
from testbed.core.registry import POLICIES
from testbed.core.topology import FabricPlan

# The policy a fabric runs when the experiment names none.
DEFAULTS = {"leaf_spine": "ecmp", "ocs_leaf_spine": "ocs-vclos", "multidim": "shortest"}


def get(name: str) -> RoutingPolicy:
    """The registered policy called ``name`` (a RegistryError names the choices)."""
    return POLICIES.get(name)


def applicable(kind: str, simulator: bool = False) -> list[str]:
    """Names of the registered policies that route a ``kind`` fabric (with ``simulator``,
    also the cluster simulator's references)."""
    return [n for n, p in POLICIES.items()
            if kind in p.fabric_kinds and (simulator or not p.simulator_only)]


def controller_policy(plan: FabricPlan, name: str | None) -> str | None:
    """What the controller runs for an experiment's ``policy``: as :func:`policy_for`, or
    None for ``static`` (no controller; the fabric's proactive rules)."""
    return None if name == STATIC_POLICY else policy_for(plan, name)


def policy_for(plan: FabricPlan, name: str | None) -> str:
    """The policy to run: ``name``, checked against the fabric, or the fabric's default."""
    if name is None:
        return DEFAULTS[plan.kind]
    if get(name).simulator_only:
        raise SpecError(f"policy: {name} is a reference of the cluster simulator "
                        "(fabriclab simulate-cluster); an experiment needs a policy a fabric "
                        f"can run: {' or '.join(applicable(plan.kind))}")
    if plan.kind not in get(name).fabric_kinds:
        raise SpecError(f"policy: {name} does not route a {plan.kind} fabric; use "
                        f"{' or '.join(applicable(plan.kind))}")
    return name
