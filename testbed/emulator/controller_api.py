"""A client of the controller's HTTP JSON API (``sdn_app.api``), which listens on a Unix
socket only root can reach (:mod:`sdn_app.listeners`). Light on purpose: ``fabriclab jobs``
talks to a running fabric's controller with it without importing the controller framework."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

from sdn_app.listeners import API_HOST
from testbed.core.errors import FabricLabError

HOST = "127.0.0.1"  # where the OpenFlow listener is (the switches connect over TCP)


class ControllerError(FabricLabError):
    pass


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (the Host header is :data:`API_HOST`)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__(API_HOST, timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class ControllerApi:
    """The API of the controller listening on the Unix socket ``api_socket``."""

    def __init__(self, api_socket: str, timeout_s: float = 30.0) -> None:
        self.api_socket = str(api_socket)
        self.timeout_s = timeout_s

    @property
    def url(self) -> str:
        return f"the Unix socket {self.api_socket}"

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        conn = _UnixConnection(self.api_socket, self.timeout_s)
        try:
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"{}")
        finally:
            conn.close()

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
