"""The record a running `fabriclab up` leaves and how `fabriclab jobs` finds it: live only
while the very process that wrote it runs (PID and start time), stale ones named and cleaned."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from testbed.core.errors import FabricLabError
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import cleanup, procs, up_record
from testbed.emulator.up_record import UpRecord

FABRIC = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
          "host_link_mbps": 20, "uplink_mbps": 20}
RUN_ID = "fl-0123456789ab"


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")


def record(tmp_path: Path, *, start_ticks: int | None = None, started: float = 1.0) -> UpRecord:
    """A record as `up` writes it (by default for this very process, so it is live)."""
    me = procs.identify(os.getpid())
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    plan = build_plan(parse_fabric({"fabric": FABRIC}))
    return UpRecord(me.pid, start_ticks or me.start_ticks, RUN_ID, str(run_dir), "spec.yaml",
                    "vclos", "/run/fabriclab/controller-x/api.sock", 40002, started,
                    up_record.host_addresses(plan))


def test_a_live_record_is_found_by_default_and_by_run_dir(tmp_path):
    r = record(tmp_path)
    r.save()
    assert up_record.find() == r
    assert up_record.find(Path(r.run_dir)) == r
    assert json.loads((Path(r.run_dir) / up_record.NAME).read_text())["api_socket"] == \
        "/run/fabriclab/controller-x/api.sock"
    r.forget()
    assert not r.registry_path.exists() and (Path(r.run_dir) / up_record.NAME).exists()


def test_the_newest_live_record_wins(tmp_path):
    old, new = record(tmp_path, started=1.0), record(tmp_path, started=2.0)
    old.save()
    UpRecord(**{**vars(new), "run_id": "fl-ba9876543210"}).save()
    assert up_record.find().started == 2.0


def test_a_stale_record_is_named_and_clean_removes_it(tmp_path):
    me = procs.identify(os.getpid())
    stale = record(tmp_path, start_ticks=me.start_ticks + 1)  # this PID, another process
    stale.save()
    with pytest.raises(FabricLabError, match="is no longer running") as exc:
        up_record.find(Path(stale.run_dir))
    assert f"process {me.pid} has ended" in str(exc.value)
    with pytest.raises(FabricLabError, match=r"no `fabriclab up` is running on this machine "
                       r"\(1 record of a stopped one left: `fabriclab clean` removes them\)"):
        up_record.find()
    (line,) = up_record.forget_stale()
    assert "removed the record of a stopped `fabriclab up`" in line
    assert not stale.registry_path.exists()
    with pytest.raises(FabricLabError, match="no `fabriclab up` is running on this machine: "):
        up_record.find()


def test_a_run_dir_that_is_not_an_ups_is_named(tmp_path):
    with pytest.raises(FabricLabError, match="no such directory"):
        up_record.find(tmp_path / "nope")
    with pytest.raises(FabricLabError, match=r"holds no up\.json"):
        up_record.find(tmp_path)
    (tmp_path / "up.json").write_text('{"pid": "1"}')
    with pytest.raises(FabricLabError, match="is not a `fabriclab up` record"):
        up_record.find(tmp_path)


def test_an_unreadable_record_is_left_untouched(tmp_path):
    up_record.registry().mkdir(parents=True)
    odd = up_record.registry() / "fl-000000000000.json"
    odd.write_text("not json")
    (line,) = up_record.forget_stale()
    assert "left untouched" in line and odd.exists()


def test_malformed_records_are_refused():
    good = {"pid": 5, "start_ticks": 7, "run_id": RUN_ID, "run_dir": "/r", "spec": "s",
            "policy": None, "api_socket": None, "openflow_port": None, "started": 1.0}
    assert UpRecord(**good).api_socket is None
    for bad in ({"pid": "5"}, {"api_socket": 40001}, {"openflow_port": 70000},
                {"run_id": "x; rm"}, {"hosts": []}, {"pid": True}):
        with pytest.raises(ValueError):
            UpRecord(**{**good, **bad})


