"""A client of the controller's HTTP JSON API (``sdn_app.api``), which listens on a Unix
socket only root can reach (:mod:`sdn_app.listeners`). Light on purpose: ``fabriclab jobs``
talks to a running fabric's controller with it without importing the controller framework."""

from __future__ import annotations

import http.client
import json
import select
import socket
import time
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


REPLY_POLL_S = 0.2  # how often a request waiting for its reply asks whether the server is gone


class ControllerApi:
    """The API of the controller listening on the Unix socket ``api_socket``.

    A request waits up to ``timeout_s`` for its reply, but gives up at once when
    :meth:`gone` says the server exited: the listening socket outlives a dead controller (its
    owner keeps it for the restart), so a request would otherwise wait out the whole timeout."""

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
            self._await_reply(conn.sock, f"{method} {path}")
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"{}")
        finally:
            conn.close()

    def gone(self) -> str | None:
        """Why the server can no longer answer (it exited), or None if it may still."""
        return None

    def _await_reply(self, sock: socket.socket, what: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not select.select([sock], [], [], REPLY_POLL_S)[0]:
            if reason := self.gone():
                raise ControllerError(f"{what}: no reply, {reason}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{what}: no reply within {self.timeout_s:g} s")

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
