"""Reading run directories written by older fabriclab versions: every shim, and only here.

A run directory says which layout it has in ``run.json``'s ``schema``
(:data:`testbed.core.rundir.RUN_SCHEMA`). The cut-off: this module reads

- schema 2 (today's) as written;
- schema 1, every run directory written before ``run.json`` named its schema (or before
  ``run.json`` existed), back to the first layout: jobs.json records without their ``dims``
  (then in each worker's config), keys that spelled a rate without its unit
  (``mbps``, renamed here), a fabric spec in its old names (:func:`upgrade_fabric`), no
  ``rate_scale`` (the rates were emulated as written: 1), and ``jobs.json`` records without
  their dimensions' kinds and host rates (``dim_kinds``, ``dim_host_rates_bps``: taken here,
  once, from ``topology.json``, as the run's fabric had them; a record without
  ``dim_rates_bps`` either plans at those host rates).

A directory with a newer schema is read as today's, with a note. What a :class:`~analysis.load.Run`
holds is always in today's names (docs/results.md); nothing else in ``analysis`` knows a run's
age.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from testbed.core.rundir import RUN_SCHEMA
from testbed.core.scaling import UNSCALED
from testbed.core.spec import upgrade_fabric

OLDEST_SCHEMA = 1
# Old name -> current name, for run directories written before every key named its unit.
OLD_LINK_COLUMNS = {"mbps": "capacity_mbit_s"}  # link_samples.parquet
_OLD_TOPOLOGY_LINK_KEYS = {"mbps": "mbit_s"}  # topology.json links
_OLD_FIDELITY_LINK_KEYS = {"configured_mbps": "configured_mbit_s",  # fidelity.json links
                           "peak_mbps": "peak_mbit_s"}


def schema(record: dict[str, Any] | None, notes: list[str]) -> int:
    """The layout of a run directory whose ``run.json`` is ``record`` (None: it has none):
    its ``schema``, else 1; a newer one than this fabriclab's adds a note."""
    found = (record or {}).get("schema", OLDEST_SCHEMA)
    if not isinstance(found, int) or found < OLDEST_SCHEMA:
        found = OLDEST_SCHEMA
    if found > RUN_SCHEMA:
        notes.append(f"the run directory's schema is {found}, newer than this fabriclab's "
                     f"({RUN_SCHEMA}): read as {RUN_SCHEMA}")
    return found


def _renamed(d: Any, old: dict[str, str]) -> Any:
    return {old.get(k, k): v for k, v in d.items()} if isinstance(d, dict) else d


def upgrade_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """spec.yaml with its fabric in today's names."""
    return {**spec, "fabric": upgrade_fabric(spec["fabric"])} if "fabric" in spec else spec


def upgrade_topology(topo: Any) -> Any:
    """topology.json with today's key names (its links' rates and its fabric spec)."""
    if not isinstance(topo, dict):
        return topo
    out = dict(topo)
    if isinstance(out.get("links"), list):
        out["links"] = [_renamed(lk, _OLD_TOPOLOGY_LINK_KEYS) for lk in out["links"]]
    if "spec" in out:
        out["spec"] = upgrade_fabric(out["spec"])
    return out


def upgrade_fidelity(fidelity: Any) -> dict[str, Any] | None:
    """fidelity.json with today's key names, or None if it is not a mapping."""
    if not isinstance(fidelity, dict):
        return None
    if isinstance(fidelity.get("links"), list):
        links = [_renamed(lk, _OLD_FIDELITY_LINK_KEYS) for lk in fidelity["links"]]
        fidelity = {**fidelity, "links": links}
    return fidelity


def rate_scale(*records: dict[str, Any]) -> float:
    """The scale the run's fabric was emulated at, as the first of ``records`` (its plan, or
    its calibration) that says recorded it; 1 for runs written before rate scaling."""
    for record in records:
        scale = record.get("rate_scale")
        if isinstance(scale, int | float) and not isinstance(scale, bool) and 0 < scale <= 1:
            return float(scale)
    return UNSCALED


def upgrade_job(job: dict[str, Any], topology: dict[str, Any],
                config: Callable[[], Any] = dict) -> dict[str, Any]:
    """A jobs.json record with its dimensions, their kinds and host rates. A schema 1 record
    without ``dims`` (the first layout) takes them from its rank 0 worker config
    (``config()``, read only then); its kinds and host rates come from the run's
    ``topology.json`` (what a host had in each dimension, as :func:`_topology_rates` reads
    it); without a fabric (a loopback job), from its switch dimensions' planning rates, which
    are a host's whole rate there; left out where neither says."""
    if "dims" not in job and job.get("hosts"):
        first = config()
        dims = first.get("dims") if isinstance(first, dict) else None
        if isinstance(dims, list) and dims:
            job = {**job, "dims": dims}
    dims = job.get("dims")
    if not isinstance(dims, list) or (job.get("dim_kinds") and job.get("dim_host_rates_bps")):
        return job
    spec = topology.get("spec") or {}
    fabric_dims = spec.get("dims") if spec.get("kind") == "multidim" else None
    kinds = ([str(d.get("kind", "switch")) for d in fabric_dims]
             if fabric_dims and len(fabric_dims) == len(dims) else ["switch"] * len(dims))
    rates = _topology_rates(topology)
    host_rates = [rates.get(d) or rates.get(0) for d in range(len(dims))]
    if not topology and set(kinds) == {"switch"}:
        host_rates = list(job.get("dim_rates_bps") or host_rates)
    out = {**job, "dim_kinds": job.get("dim_kinds") or kinds}
    if all(host_rates):
        out["dim_host_rates_bps"] = job.get("dim_host_rates_bps") or host_rates
        out.setdefault("dim_rates_bps", host_rates)
    return out


def _topology_rates(topology: dict[str, Any]) -> dict[int, float]:
    """A host's rate (bit/s) in every dimension of a schema 1 run's fabric: a multidim
    fabric's own (on a fully connected dimension the host's total over its links), else the
    slowest link of kind ``dim``/``ring`` of that dimension; on a leaf-spine fabric dimension
    0 is the host link (a leaf-spine job's every dimension crosses it)."""
    from analysis.metrics import DIM_LINK_KINDS  # (metrics reads runs through this module)

    spec = topology.get("spec") or {}
    if spec.get("kind") == "multidim" and spec.get("dims"):
        return {d: float(dim["mbit_s"]) * 1e6 for d, dim in enumerate(spec["dims"])}
    out: dict[int, float] = {}
    mesh: dict[tuple[int, str], float] = {}  # (dim, host): the sum of its fc links
    for lk in topology.get("links", []):
        if lk.get("kind") in DIM_LINK_KINDS and lk.get("dim") is not None:
            d, bps = int(lk["dim"]), float(lk["mbit_s"]) * 1e6
            if lk.get("kind") == "fc":
                for end in (lk["a"], lk["b"]):
                    mesh[(d, end)] = mesh.get((d, end), 0.0) + bps
            else:
                out[d] = min(out.get(d, math.inf), bps)
    for (d, _host), bps in mesh.items():
        out[d] = min(out.get(d, math.inf), bps)
    if not out:
        host = [float(lk["mbit_s"]) * 1e6 for lk in topology.get("links", [])
                if lk.get("kind") == "host"]
        if host:
            out[0] = min(host)
    return out
