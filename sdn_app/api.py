"""The controller's HTTP JSON API as a plain WSGI app (served on a Unix socket only root can
reach: :mod:`sdn_app.listeners`).

    GET /health  /topology  /jobs  /circuits  /ports
    POST /jobs {job_id, hosts | hosts_wanted, policy}  -> allocation, or 409 with the reason
    DELETE /jobs/<id>

Malformed requests get 400 with a message and unknown jobs 404; an unexpected error in a
handler becomes a 500 with its message, never a crashed controller. A request whose Host is
not :data:`~sdn_app.listeners.API_HOST` gets 421 (what a browser sends after DNS rebinding),
and a body that is not declared ``application/json`` 415: JSON only.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from sdn_app.listeners import API_HOST

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
JobId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
HostName = Annotated[str, StringConstraints(pattern=r"^h[0-9]{1,4}$")]


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job_id: JobId
    hosts: Annotated[list[HostName], Field(min_length=1, max_length=4096)] | None = None
    hosts_wanted: Annotated[int, Field(ge=1, le=4096)] | None = None
    policy: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> JobRequest:
        if (self.hosts is None) == (self.hosts_wanted is None):
            raise ValueError("give exactly one of hosts or hosts_wanted")
        return self


class Backend(Protocol):
    def health(self) -> dict[str, Any]: ...
    def topology(self) -> dict[str, Any]: ...
    def list_jobs(self) -> list[dict[str, Any]]: ...
    def create_job(self, req: JobRequest) -> dict[str, Any]: ...
    def delete_job(self, job_id: str) -> dict[str, Any]: ...
    def circuits(self) -> list[dict[str, Any]]: ...
    def ports(self) -> dict[str, Any]: ...


_STATUS = {200: "200 OK", 201: "201 Created", 400: "400 Bad Request", 404: "404 Not Found",
           405: "405 Method Not Allowed", 409: "409 Conflict", 413: "413 Payload Too Large",
           415: "415 Unsupported Media Type", 421: "421 Misdirected Request",
           500: "500 Internal Server Error", 503: "503 Service Unavailable"}
_JOB_PATH = re.compile(r"^/jobs/([^/]+)$")


def make_app(backend: Backend) -> Callable:
    """A WSGI application serving ``backend``."""

    def app(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        try:
            status, body = _route(backend, environ)
        except ApiError as exc:
            status, body = exc.status, {"error": exc.message}
        except Exception as exc:  # the API must never take the controller down
            log.exception("API handler failed")
            status, body = 500, {"error": f"internal error: {exc}"}
        data = json.dumps(body).encode()
        start_response(_STATUS.get(status, f"{status} Error"),
                       [("Content-Type", "application/json"),
                        ("Content-Length", str(len(data)))])
        return [data]

    return app


def _route(backend: Backend, environ: dict[str, Any]) -> tuple[int, Any]:
    host = environ.get("HTTP_HOST", "")
    if host != API_HOST:
        raise ApiError(421, f"Host {host[:64]!r} is not {API_HOST!r}: refused")
    method = environ.get("REQUEST_METHOD", "GET")
    path = environ.get("PATH_INFO", "/").rstrip("/") or "/"
    getters = {"/health": backend.health, "/topology": backend.topology,
               "/jobs": backend.list_jobs, "/circuits": backend.circuits,
               "/ports": backend.ports}
    if path == "/jobs" and method == "POST":
        return 201, backend.create_job(_job_request(environ))
    if path in getters:
        if method != "GET":
            raise ApiError(405, f"{method} is not allowed on {path}")
        return 200, getters[path]()
    m = _JOB_PATH.match(path)
    if m:
        if method != "DELETE":
            raise ApiError(405, f"{method} is not allowed on {path}; use DELETE")
        return 200, backend.delete_job(m.group(1))
    raise ApiError(404, f"no such endpoint: {path}")


def _job_request(environ: dict[str, Any]) -> JobRequest:
    kind = environ.get("CONTENT_TYPE", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise ApiError(415, f"Content-Type {kind[:64]!r} is not application/json")
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "Content-Length is not a number") from None
    if length > MAX_BODY:
        raise ApiError(413, f"request body over {MAX_BODY} bytes")
    raw = environ["wsgi.input"].read(length) if length else b""
    try:
        data = json.loads(raw or b"null")
    except ValueError:
        raise ApiError(400, "request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object")
    try:
        return JobRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        msg = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise ApiError(400, f"{where}: {msg.removeprefix('Value error, ')}") from None
