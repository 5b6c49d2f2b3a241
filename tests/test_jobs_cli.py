"""`fabriclab jobs`: against the controller's real API app, served on a Unix socket by a
stand-in with a real job book (no switches), found through an `up` record."""

from __future__ import annotations

import os
import socket
import socketserver
import threading
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

import pytest
from job_book import JobBook

from sdn_app.api import make_app
from sdn_app.jobs import JobManager
from testbed.cli import main
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import cleanup, preflight, procs, up_record
from testbed.emulator.up_record import UpRecord

FABRIC = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
          "host_link_mbit_s": 20, "uplink_mbit_s": 20}


class Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


class UnixWSGIServer(socketserver.UnixStreamServer, WSGIServer):
    """wsgiref's server on a Unix socket (what the controller serves its API on)."""

    def server_bind(self) -> None:
        socketserver.UnixStreamServer.server_bind(self)
        self.server_name, self.server_port = "unix", 0
        self.setup_environ()

    def get_request(self):
        sock, _ = self.socket.accept()
        return sock, ("unix", 0)  # wsgiref wants a (host, port) peer


def up_of(tmp_path: Path, api_socket: str | None, policy: str | None = "vclos") -> UpRecord:
    """A live `up` record (this process stands in for `up`) naming ``api_socket``."""
    me = procs.identify(os.getpid())
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    plan = build_plan(parse_fabric({"fabric": FABRIC}))
    record = UpRecord(me.pid, me.start_ticks, "fl-0123456789ab", str(run_dir), "spec.yaml",
                      policy, api_socket, None, 1.0, up_record.host_addresses(plan))
    record.save()
    return record


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")


@pytest.fixture
def controller(tmp_path):
    """The API app on a Unix socket, and the `up` record pointing at it."""
    plan = build_plan(parse_fabric({"fabric": FABRIC}))
    server = UnixWSGIServer(str(tmp_path / "api.sock"), Quiet)
    server.set_app(make_app(JobBook(JobManager(plan, "vclos"))))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield up_of(tmp_path, str(tmp_path / "api.sock"))
    server.shutdown()
    server.server_close()


def jobs(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["jobs", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err.strip()


def test_add_list_remove(controller, capsys):
    code, out, _ = jobs(capsys, "add", "a", "--hosts", "h0,h2")
    assert code == 0 and out.startswith("job a placed: h0, h2 (via spine")
    code, out, _ = jobs(capsys, "add", "b", "--size", "2", "--policy", "ecmp")
    assert code == 0 and "policy ecmp" in out
    code, out, _ = jobs(capsys, "list")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["job", "policy", "hosts", "spines", "circuits"]
    assert [ln.split()[0] for ln in lines[1:]] == ["a", "b"]
    assert lines[1].split()[2] == "h0,h2"
    code, out, _ = jobs(capsys, "list", "--run", controller.run_dir, "--json")
    assert code == 0 and '"job_id": "a"' in out
    code, out, _ = jobs(capsys, "remove", "a")
    assert code == 0 and out.strip() == "job a removed: h0, h2 free"
    jobs(capsys, "remove", "b")
    assert jobs(capsys, "list")[1].strip() == "no jobs placed"


@pytest.mark.parametrize(("argv", "words"), [
    (["add", "a b", "--size", "2"], "JOB_ID 'a b' is not a job name"),
    (["add", "a", "--hosts", "h0,,h2"], "'' is not a host name"),
    (["add", "a", "--hosts", "h0,h0"], "a host is listed twice"),
    (["add", "a", "--hosts", "h0,h9"], "h9 is not a host of the fabric up in"),
    (["add", "a", "--size", "0"], "--size is 0; it must be at least 1"),
    (["add", "a", "--size", "9"], "job a refused: not enough free hosts"),
    (["add", "a", "--size", "2", "--policy", "shortest"],
     "job a refused: policy: this fabric runs vclos; a job may ask for vclos or ecmp"),
    (["remove", "nope"], "job nope not released: no running job nope"),
    (["remove", "../x"], "JOB_ID '../x' is not a job name"),
])
def test_bad_input_is_one_sentence(controller, capsys, argv, words):
    code, _, err = jobs(capsys, *argv)
    assert code == 2 and words in err and "\n" not in err and "Traceback" not in err, err
    assert err.startswith("fabriclab jobs: error: ")


def test_every_action_needs_root(controller, capsys, monkeypatch):
    monkeypatch.setattr(preflight, "is_root", lambda: False)
    for argv in (["list"], ["add", "a", "--size", "1"], ["remove", "a"]):
        code, _, err = jobs(capsys, *argv)
        assert code == 2 and "needs root" in err


def test_no_up_running_is_one_sentence(capsys, tmp_path):
    code, _, err = jobs(capsys, "list")
    assert code == 2 and "no `fabriclab up` is running on this machine" in err
    code, _, err = jobs(capsys, "list", "--run", str(tmp_path))
    assert code == 2 and "holds no up.json" in err


def test_a_controller_that_does_not_answer(capsys, tmp_path):
    path = tmp_path / "api.sock"
    with socket.socket(socket.AF_UNIX) as s:  # a socket nothing listens on
        s.bind(str(path))
    up_of(tmp_path, str(path))
    code, _, err = jobs(capsys, "list")
    assert code == 2 and f"does not answer on the Unix socket {path} (Connection refused)" \
        in err and "controller.log" in err


def test_something_else_on_the_socket(capsys, tmp_path):
    with socket.socket(socket.AF_UNIX) as s:  # answers, but not HTTP
        s.bind(str(tmp_path / "api.sock"))
        s.listen()
        up_of(tmp_path, str(tmp_path / "api.sock"))

        def answer() -> None:
            conn, _ = s.accept()
            conn.recv(4096)
            conn.sendall(b"SSH-2.0-nope\r\n")
            conn.close()

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        code, _, err = jobs(capsys, "list")
        t.join(5)
    assert code == 2 and "is not the fabric's controller" in err, err


def test_a_static_fabric_places_no_jobs(capsys, tmp_path):
    up_of(tmp_path, None, policy=None)
    code, _, err = jobs(capsys, "list")
    assert code == 2 and "runs no controller (policy static)" in err
