"""A client of the controller's HTTP JSON API (``sdn_app.api``), which listens on 127.0.0.1
only. Light on purpose: ``fabriclab jobs`` talks to a running fabric's controller with it
without importing the controller framework."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from testbed.core.errors import FabricLabError

HOST = "127.0.0.1"


class ControllerError(FabricLabError):
    pass


class ControllerApi:
    """The API of the controller listening on ``HOST:api_port``."""

    def __init__(self, api_port: int, timeout_s: float = 30.0) -> None:
        self.api_port = api_port
        self.timeout_s = timeout_s

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.api_port}"

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def get(self, path: str) -> Any:
        status, body = self.request("GET", path)
        if status != 200:
            raise ControllerError(f"GET {path}: {status} {body.get('error', '')}")
        return body

    def create_job(self, job_id: str, *, hosts: list[str] | None = None,
                   hosts_wanted: int | None = None, policy: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"job_id": job_id}
        if hosts is not None:
            body["hosts"] = hosts
        if hosts_wanted is not None:
            body["hosts_wanted"] = hosts_wanted
        if policy is not None:
            body["policy"] = policy
        status, reply = self.request("POST", "/jobs", body)
        if status != 201:
            raise ControllerError(f"job {job_id} refused: {reply.get('error', status)}")
        return reply

    def delete_job(self, job_id: str) -> dict[str, Any]:
        status, reply = self.request("DELETE", f"/jobs/{job_id}")
        if status != 200:
            raise ControllerError(f"job {job_id} not released: {reply.get('error', status)}")
        return reply
