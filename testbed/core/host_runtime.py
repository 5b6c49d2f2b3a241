"""What an emulated host is: a network namespace (the default) or a Docker container.

    hosts: {runtime: docker, image: fabriclab/worker, cpus: 1, mem_limit: 512m}

A container host is attached to the fabric the way a namespace host is (same interface names,
addresses, static ARP, routes and shaping); see :mod:`testbed.emulator.containers`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The images `fabriclab images` builds; the names resolve to the tag of this checkout's code.
WORKER_IMAGE = "fabriclab/worker"
TORCH_IMAGE = "fabriclab/worker-torch"
# A Docker image reference (repository[:tag] or @digest), lower case as Docker demands.
IMAGE = r"^[a-z0-9][a-z0-9._/-]{0,127}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$"


class HostRuntime(BaseModel):
    """The runtime of some hosts, with the limits Docker enforces on a container."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    runtime: Literal["namespace", "docker"] = "namespace"
    image: Annotated[str, Field(pattern=IMAGE)] = WORKER_IMAGE
    cpus: Annotated[float, Field(gt=0, le=256)] | None = None
    mem_limit: Annotated[str, Field(pattern=r"^[0-9]{1,12}[bkmg]?$")] | None = None

    @model_validator(mode="after")
    def _docker_only(self) -> HostRuntime:
        given = self.model_fields_set & {"image", "cpus", "mem_limit"}
        if self.runtime == "namespace" and given:
            raise ValueError(f"{sorted(given)[0]} applies to runtime: docker only")
        return self

    @property
    def is_container(self) -> bool:
        return self.runtime == "docker"


NAMESPACE = HostRuntime()
