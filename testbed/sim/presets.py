"""Cluster presets: a paper's own setup for ``simulate-cluster --preset NAME`` and sweeps.

A preset gives simulate-cluster parameters per routing policy (a paper's electrical and
optical fabrics differ in shape). Pure data and lookups; :func:`testbed.sim.cluster_run.
resolve_preset` applies one, a parameter given with a value other than its default winning.

``vclos-paper``: arXiv 2308.05692 (vClos / OCS-vClos) as its simulator RapidNetSim runs it
(``large_exp_8192/5000_241``): 8192 GPUs, 5000 jobs of :func:`testbed.sim.traces.
vclos_paper_trace`; ECMP and static vClos on 128 leaves of 64 GPUs and 64 spines; OCS-vClos
on 256 leaves of 32 GPUs, 128 spines and 32 OCSes (a leaf has one port on each OCS, a spine
two). Where fabriclab departs from RapidNetSim, and why: docs/vclos-paper.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.core.errors import FabricLabError
from testbed.sim.traces import PAPER_TRACE

_VCLOS_PAPER_COMMON: dict[str, Any] = {"trace": PAPER_TRACE, "jobs": 5000, "link_gbit_s": 100.0}
_VCLOS_PAPER_STATIC: dict[str, Any] = {"leaves": 128, "spines": 64, "hosts_per_leaf": 64}
_VCLOS_PAPER_OCS: dict[str, Any] = {"leaves": 256, "spines": 128, "hosts_per_leaf": 32,
                                    "ocs_count": 32, "spine_ports_per_ocs": 2}

# name -> (parameters for every policy, parameters per policy kind: allocates_as value)
PRESETS: dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]]]] = {
    "vclos-paper": (_VCLOS_PAPER_COMMON, {"ecmp": _VCLOS_PAPER_STATIC,
                                          "vclos": _VCLOS_PAPER_STATIC,
                                          "ocs-vclos": _VCLOS_PAPER_OCS}),
}


def check_preset(name: str) -> str:
    """``name`` if it is a preset ('' for none), else one sentence naming the choices."""
    if name and name not in PRESETS:
        raise FabricLabError(f"--preset {name!r} is unknown; use one of {', '.join(PRESETS)}")
    return name


def preset_params(name: str, allocates_as: str) -> Mapping[str, Any]:
    """The parameters preset ``name`` sets for a policy that allocates as ``allocates_as``."""
    common, per_kind = PRESETS[check_preset(name)]
    return {**common, **per_kind.get(allocates_as, {})}
