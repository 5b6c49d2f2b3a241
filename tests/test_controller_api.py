"""The controller API client against a server that accepts and never answers: what a
controller that died leaves behind, since its owner keeps the listening socket open for the
restart (no root needed)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from testbed.emulator.controller_api import ControllerApi, ControllerError


@pytest.fixture
def silent_socket(tmp_path: Path):
    """A listening Unix socket nobody reads from: connects succeed, replies never come."""
    path = tmp_path / "api.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(8)
    yield str(path)
    sock.close()


class _DiesSoon(ControllerApi):
    """A client whose server is known to exit ``after_s`` after the client was made."""

    def __init__(self, path: str, after_s: float) -> None:
        super().__init__(path, timeout_s=30.0)
        self.dies_at = time.monotonic() + after_s

    def gone(self) -> str | None:
        return "the controller exited (code -9)" if time.monotonic() >= self.dies_at else None


def test_a_request_to_a_server_that_exits_meanwhile_fails_at_once_not_at_the_timeout(
        silent_socket):
    api = _DiesSoon(silent_socket, after_s=0.3)
    t0 = time.monotonic()
    with pytest.raises(ControllerError, match=r"GET /health: no reply, the controller exited"):
        api.get("/health")
    assert time.monotonic() - t0 < 5.0  # the timeout is 30 s


def test_a_request_with_no_reply_times_out_as_an_os_error(silent_socket):
    api = ControllerApi(silent_socket, timeout_s=0.5)
    with pytest.raises(OSError, match=r"GET /health: no reply within 0.5 s"):
        api.get("/health")


def test_a_reply_that_comes_is_read(tmp_path):
    path = tmp_path / "api.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            time.sleep(0.5)  # longer than one poll of the reply
            body = b'{"ok": true}'
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    t = threading.Thread(target=answer)
    t.start()
    try:
        assert ControllerApi(str(path), timeout_s=10.0).get("/health") == {"ok": True}
    finally:
        t.join(timeout=10)
        server.close()
