"""Sweep files: a base run and a grid of values, expanded into simulate-cluster runs.

```yaml
name: ocs-vs-vclos          # optional
base: {leaves: 8, spines: 4, hosts_per_leaf: 4, jobs: 200}
grid: {policy: [vclos, ocs-vclos], seed: [1, 2, 3]}
```

``base`` and ``grid`` take simulate-cluster's parameters by its names (its flags with ``_``);
the runs are the cartesian product of the grid's lists over the base. :func:`expand` is pure:
it checks every value and names the field of the first bad one, and gives every run a key
(a digest of all its parameters) that stays the same from one sweep to the next.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sdn_app.allocation.ocs import REWIRINGS, rewiring_name
from testbed.core.errors import FabricLabError, SpecError
from testbed.core.limits import grid_points_error
from testbed.core.registry import QUEUES
from testbed.core.spec import load_yaml
from testbed.sim.cluster import SIM_PLACEMENTS
from testbed.sim.cluster_run import DEFAULTS, cluster_config
from testbed.sim.job_plans import cluster_collective, cluster_policy
from testbed.sim.presets import check_preset
from testbed.sim.trace_loading import TRACE_FORMS, TRACE_KINDS, check_trace

D = DEFAULTS
KEY_CHARS = 16


def _as_field_error(check: Callable[[str], Any], value: str, flag: str = "") -> Any:
    """``check(value)``, its error as a field's (pydantic's ValueError, without the CLI's
    ``flag`` in front, which the field's path replaces)."""
    try:
        return check(value)
    except FabricLabError as exc:
        raise ValueError(str(exc).removeprefix(flag)) from None


class ClusterParams(BaseModel):
    """simulate-cluster's parameters, with its defaults and its limits."""

    model_config = ConfigDict(extra="forbid", strict=True)

    leaves: int = Field(D["leaves"], ge=1)
    spines: int = Field(D["spines"], ge=1)
    hosts_per_leaf: int = Field(D["hosts_per_leaf"], ge=1)
    ocs_count: int | None = Field(D["ocs_count"], ge=0)
    spine_ports_per_ocs: int = Field(D["spine_ports_per_ocs"], ge=0)
    placement: str = D["placement"]
    rewiring: str = D["rewiring"]
    policy: str = D["policy"]
    trace: str = D["trace"]
    jobs: int = Field(D["jobs"], ge=1)
    load: float = Field(D["load"], gt=0, le=10, allow_inf_nan=False)
    seed: int = Field(D["seed"], ge=0)
    link_gbit_s: float = Field(D["link_gbit_s"], gt=0, allow_inf_nan=False)
    rounds: int = Field(D["rounds"], ge=1)
    collective: str = D["collective"]
    preset: str = D["preset"]
    gpus_per_server: int = Field(D["gpus_per_server"], ge=1)
    queue: str = D["queue"]
    host_link_delay_us: float = Field(D["host_link_delay_us"], ge=0, allow_inf_nan=False)
    uplink_delay_us: float = Field(D["uplink_delay_us"], ge=0, allow_inf_nan=False)

    @field_validator("preset")
    @classmethod
    def _preset(cls, value: str) -> str:
        return _as_field_error(check_preset, value, "--preset ")

    @field_validator("collective")
    @classmethod
    def _collective(cls, value: str) -> str:
        """A known collective; an older spelling (hierarchical) becomes its name now."""
        return _as_field_error(cluster_collective, value, "collective ")

    @field_validator("placement", "rewiring")
    @classmethod
    def _known(cls, value: str, info: Any) -> str:
        choices = {"placement": SIM_PLACEMENTS, "rewiring": tuple(REWIRINGS)}[info.field_name]
        if info.field_name == "rewiring":
            value = rewiring_name(value)  # an older name (exact) becomes its name now
        if value not in choices:
            raise ValueError(f"{value!r} is unknown; use one of {', '.join(choices)}")
        return value

    @field_validator("policy")
    @classmethod
    def _policy(cls, value: str) -> str:
        _as_field_error(cluster_policy, value)
        return value

    @field_validator("queue")
    @classmethod
    def _queue(cls, value: str) -> str:
        return _as_field_error(QUEUES.check, value)

    @field_validator("trace")
    @classmethod
    def _trace(cls, value: str) -> str:
        try:
            check_trace(value)
        except FabricLabError:
            raise ValueError(f"{value!r} is unknown; use {TRACE_FORMS}") from None
        return value


class SweepSpec(BaseModel):
    """A sweep file: ``name``, ``base`` and ``grid``."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")
    base: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)


@dataclass(frozen=True)
class Point:
    """One run of a sweep: its key, every parameter, and a label of its grid values."""

    key: str
    params: dict[str, Any]
    label: str


def keyed_params(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters a run's key and its done check compare: all of them, defaults included,
    but ``queue`` only when it is not fifo and the link delays only when not 0 (so runs from
    before queue disciplines and link delays keep their keys)."""
    return {k: v for k, v in params.items() if not (k in UNKEYED_DEFAULTS and v == D[k])}


UNKEYED_DEFAULTS = ("queue", "host_link_delay_us", "uplink_delay_us")


def point_key(params: dict[str, Any]) -> str:
    """A stable digest of a run's parameters (:func:`keyed_params`)."""
    text = json.dumps(keyed_params(params), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_CHARS]


def _explain(where: str, exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(str(err["loc"][-1]), ClusterParams.model_fields, n=1)
        msg = (f"unknown parameter; use one of {', '.join(ClusterParams.model_fields)}"
               + (f" (did you mean {close[0]}?)" if close else ""))
    elif "input" in err and err["type"] != "missing":
        shown = repr(err["input"])
        msg = f"{shown if len(shown) <= 60 else shown[:57] + '...'}: {msg}"
    return f"{where}.{field}: {msg}" if where else f"{field}: {msg}"


def _checked(data: dict[str, Any], where: str) -> ClusterParams:
    try:
        return ClusterParams.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_explain(where, exc)) from None


def _absolute_trace(params: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """A trace file named relative to the sweep file, made absolute (workers differ in cwd);
    a trace whose argument is no file (``rapidnetsim:GAP_S``) stays as it is."""
    kind, _, arg = params["trace"].partition(":")
    if kind in TRACE_KINDS and arg and not Path(arg).is_absolute():
        return {**params, "trace": f"{kind}:{(base_dir / arg).as_posix()}"}
    return params


def _label(values: dict[str, Any]) -> str:
    text = " ".join(f"{k}={v}" for k, v in values.items()) or "base"
    return text if len(text) <= 80 else text[:77] + "..."


def expand(spec: SweepSpec, base_dir: Path = Path()) -> list[Point]:
    """The sweep's runs in grid order (the last grid key varies fastest), every value
    checked: a bad one is one sentence naming ``base.FIELD``, ``grid.FIELD[i]`` or the run."""
    base = _checked(spec.base, "base").model_dump()
    for name in [n for n in spec.grid if n not in ClusterParams.model_fields]:
        raise SpecError(f"grid.{name}: unknown parameter; use one of "
                        f"{', '.join(ClusterParams.model_fields)}")
    for name in [n for n in spec.grid if n in spec.base]:
        raise SpecError(f"grid.{name}: also set in base; give it in one of them")
    if problem := grid_points_error([len(v) for v in spec.grid.values()]):
        raise SpecError(problem)
    for name, values in spec.grid.items():
        if not values:
            raise SpecError(f"grid.{name}: empty list; give at least one value")
        for i, value in enumerate(values):
            try:
                ClusterParams.model_validate({**spec.base, name: value})
            except ValidationError as exc:
                raise SpecError(_explain("grid", exc).replace(
                    f"grid.{name}:", f"grid.{name}[{i}]:", 1)) from None
            if value in values[:i]:
                raise SpecError(f"grid.{name}[{i}]: {value!r} is already in the list")
    points = []
    for combo in itertools.product(*spec.grid.values()):
        values = dict(zip(spec.grid, combo, strict=True))
        params = _absolute_trace(_checked({**base, **values}, "grid").model_dump(), base_dir)
        try:
            cluster_config(params)
        except FabricLabError as exc:
            raise SpecError(f"the run {_label(values)}: {exc}") from None
        points.append(Point(point_key(params), params, _label(values)))
    return points


def expand_all(specs: Sequence[SweepSpec], base_dir: Path = Path()) -> list[Point]:
    """Several sweeps' runs as one list, in order (a grid cannot tie values together, e.g.
    leaves with spines: one spec per tie); a run two specs share is kept once."""
    points: dict[str, Point] = {}
    for spec in specs:
        for point in expand(spec, base_dir):
            points.setdefault(point.key, point)
    return list(points.values())


def varying(points: Sequence[Point]) -> list[str]:
    """The parameters whose value differs between ``points``, ``seed`` excepted: what groups
    a sweep's runs in its report."""
    names = points[0].params if points else {}
    return [n for n in names if n != "seed" and len({repr(p.params[n]) for p in points}) > 1]


def load_sweep(path: str | Path) -> tuple[SweepSpec, list[Point]]:
    """Read, check and expand a sweep file; one sentence naming the field if it is wrong."""
    path = Path(path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping with base and grid")
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        msg = "unknown key; use name, base, grid" if err["type"] == "extra_forbidden" \
            else err["msg"]
        raise SpecError(f"{path}: {field}: {msg}") from None
    try:
        return spec, expand(spec, path.resolve().parent)
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None
