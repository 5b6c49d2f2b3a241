"""The controller's HTTP API and job book-keeping, without a controller (pure WSGI calls)."""

from __future__ import annotations

import io
import json

import pytest
from job_book import JobBook

from sdn_app.api import make_app
from sdn_app.jobs import JobManager
from sdn_app.listeners import API_HOST
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan

LS = {"kind": "leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 4,
      "host_link_mbit_s": 20, "uplink_mbit_s": 20}


class Book(JobBook):
    """A backend whose port statistics fail."""

    def ports(self):
        raise RuntimeError("stats exploded")


def call(app, method, path, body=None, raw=None, headers=None):
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": str(len(data)),
               "wsgi.input": io.BytesIO(data), "HTTP_HOST": API_HOST,
               "CONTENT_TYPE": "application/json", **(headers or {})}
    got = {}

    def start_response(status, headers):
        got["status"] = int(status.split()[0])

    out = json.loads(b"".join(app(environ, start_response)))
    return got["status"], out


@pytest.fixture
def app(tmp_path):
    plan = build_plan(parse_fabric({"fabric": LS}))
    return make_app(Book(JobManager(plan, "vclos", tmp_path / "jobs.json")))


def test_job_lifecycle(app):
    status, job = call(app, "POST", "/jobs", {"job_id": "a", "hosts_wanted": 8})
    assert status == 201 and len(job["host_names"]) == 8 and len(job["spines"]) == 4
    assert call(app, "GET", "/jobs")[1][0]["job_id"] == "a"
    status, job = call(app, "POST", "/jobs", {"job_id": "b", "hosts": ["h8", "h9", "h12", "h13"]})
    assert status == 201 and job["leaves"] == [2, 3] and len(job["spines"]) == 2
    assert call(app, "DELETE", "/jobs/a")[0] == 200
    assert call(app, "DELETE", "/jobs/a") == (404, {"error": "no running job a"})
    assert call(app, "GET", "/topology")[1]["kind"] == "leaf_spine"


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"job_id": "x"}, 400, "exactly one of hosts or hosts_wanted"),
    ({"job_id": "x", "hosts_wanted": 2, "hosts": ["h0"]}, 400, "exactly one"),
    ({"job_id": "x; rm -rf /", "hosts_wanted": 2}, 400, "job_id"),
    ({"job_id": "x", "hosts": ["h0", "$(reboot)"]}, 400, "hosts.1"),
    ({"job_id": "x", "hosts": ["h99"]}, 400, "h99 is not a host"),
    ({"job_id": "x", "hosts_wanted": 0}, 400, "hosts_wanted"),
    ({"job_id": "x", "hosts_wanted": 2, "colour": 1}, 400, "colour: unknown key"),
    ({"job_id": "x", "hosts_wanted": 2, "policy": "ocs-vclos"}, 400, "policy"),
    ({"job_id": "x", "hosts_wanted": 17}, 409, "not enough free hosts"),
    ({"job_id": "x", "hosts": ["h0", "h4", "h5"]}, 409, "same number of hosts"),
])
def test_bad_requests_get_a_reason(app, body, status, words):
    got, reply = call(app, "POST", "/jobs", body)
    assert got == status and words in reply["error"]


def test_malformed_input_never_crashes(app):
    assert call(app, "POST", "/jobs", raw=b"{not json")[0] == 400
    reply = call(app, "POST", "/jobs", raw=b"[1, 2]")[1]
    assert reply["error"] == "request body must be a JSON object"
    assert call(app, "POST", "/jobs", raw=b"x" * 70_000)[0] == 413
    assert call(app, "GET", "/nowhere")[0] == 404
    assert call(app, "PUT", "/jobs/a")[0] == 405
    assert call(app, "POST", "/health")[0] == 405
    status, reply = call(app, "GET", "/ports")  # a failing handler is a 500, not a crash
    assert status == 500 and "stats exploded" in reply["error"]
    assert call(app, "GET", "/health") == (200, {"ok": True})


def test_fragmentation_is_a_conflict_with_its_reason(app):
    # leaves 0 and 3 keep 2 free hosts each, but no spine has free links to both
    call(app, "POST", "/jobs", {"job_id": "j0", "hosts_wanted": 2})
    call(app, "POST", "/jobs", {"job_id": "j1", "hosts_wanted": 6})
    call(app, "POST", "/jobs", {"job_id": "j2", "hosts_wanted": 6})
    call(app, "DELETE", "/jobs/j0")
    status, reply = call(app, "POST", "/jobs", {"job_id": "x", "hosts_wanted": 4})
    assert status == 409 and "fragmented" in reply["error"]
    status, reply = call(app, "POST", "/jobs", {"job_id": "x", "hosts_wanted": 4,
                                                "policy": "ecmp"})
    assert status == 201 and reply["leaves"] == [0, 3] and reply["spines"] == []


def test_controller_allocator_takes_the_fabric_rewiring(tmp_path):
    fabric = LS | {"kind": "ocs_leaf_spine", "ocs_count": 4, "ocs_rewiring": "augment"}
    manager = JobManager(build_plan(parse_fabric({"fabric": fabric})), "ocs-vclos")
    assert manager.cluster.rewiring == "augment"
    status, job = call(make_app(Book(manager)), "POST", "/jobs",
                       {"job_id": "a", "hosts_wanted": 8})
    # augment tries the default wiring first: spines, not the direct circuits `any` picks.
    assert status == 201 and len(job["spines"]) == 4 and len(job["ocs_ports"]) == 8


def test_jobs_survive_a_restart(tmp_path):
    plan = build_plan(parse_fabric({"fabric": LS}))
    first = JobManager(plan, "vclos", tmp_path / "jobs.json")
    app = make_app(Book(first))
    call(app, "POST", "/jobs", {"job_id": "a", "hosts_wanted": 8})
    again = JobManager(plan, "vclos", tmp_path / "jobs.json")
    again.load()
    assert again.list_jobs() == first.list_jobs()
    assert again.cluster.jobs["a"] == first.cluster.jobs["a"]


def test_multidim_jobs_are_host_lists(tmp_path):
    plan = build_plan(parse_fabric({"fabric": {"kind": "multidim", "dims": [
        {"size": 2, "mbit_s": 10}, {"size": 4, "mbit_s": 10}]}}))
    app = make_app(Book(JobManager(plan, "shortest")))
    status, job = call(app, "POST", "/jobs", {"job_id": "t", "hosts_wanted": 8})
    assert status == 201 and job["host_names"] == [f"h{i}" for i in range(8)]
    assert call(app, "POST", "/jobs", {"job_id": "u", "hosts": ["h1"]})[0] == 409
