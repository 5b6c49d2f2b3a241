"""`fabriclab up` without a fabric (no root): its bad input, what it prints, and its
keep-up-then-tear-down flow (record, run lock, signals) around a stand-in fabric.
No test here may bring a real fabric up: Fabric.start fails the test if it is ever called."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from testbed.cli import main, up
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator import cleanup, procs, runlock, up_record
from testbed.emulator.up_record import UpRecord

ROOT = Path(__file__).parent.parent
FABRIC = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
          "host_link_mbps": 20, "uplink_mbps": 20}
RUN_ID = "fl-0123456789ab"


@pytest.fixture(autouse=True)
def no_fabric(tmp_path, monkeypatch):
    """A private state directory, no real bring-up, and the signal handlers restored."""
    from testbed.emulator.fabric import Fabric

    def refuse(self):
        raise AssertionError("a unit test must not bring a fabric up")

    monkeypatch.setattr(Fabric, "start", refuse)
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def plan():
    return build_plan(parse_fabric({"fabric": FABRIC}))


API = "/run/fabriclab/controller-x/api.sock"


def record(tmp_path: Path, api_socket: str | None = API) -> UpRecord:
    """A record as `up` writes it, for this very process."""
    me = procs.identify(os.getpid())
    return UpRecord(me.pid, me.start_ticks, RUN_ID, str(tmp_path / "run"), "spec.yaml",
                    "vclos" if api_socket else None, api_socket, 40002, 1.0,
                    up_record.host_addresses(plan()))


def spec(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(f"fabric: {json.dumps(FABRIC)}\n{extra}")
    return str(path)


# -- bad input: one sentence, nothing made ---------------------------------------------------


@pytest.mark.parametrize(("extra", "argv", "words"), [
    ("", ["--policy", "nope"], "nope"),
    ("", ["--policy", "shortest"], "policy: shortest does not route a leaf_spine fabric"),
    ("policy: [ecmp]\n", [], "policy: expected a policy name"),
    ("policy: shortest\n", [], "does not route a leaf_spine fabric"),
])
def test_bad_policy_is_one_sentence(tmp_path, capsys, extra, argv, words):
    assert main(["up", spec(tmp_path, extra), "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fabriclab up: error: ") and words in err and "\n" not in err, err
    assert not (tmp_path / "out").exists()


def test_bad_spec_is_one_sentence(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("fabric: {kind: leaf_spine, leaves: 0}\n")
    assert main(["up", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "fabric.leaves" in err and "\n" not in err


def test_without_root_it_says_so_and_makes_nothing(tmp_path, capsys, monkeypatch):
    from testbed.emulator import preflight

    monkeypatch.setattr(preflight, "is_root", lambda: False)
    assert main(["up", spec(tmp_path), "--out", str(tmp_path / "out"), "--wait"]) == 2
    assert "needs root" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not cleanup.STATE_DIR.exists()


def test_static_policy_and_the_files_own(tmp_path):
    p = plan()
    assert up.resolve_policy(p, "static", {}, "x") is None
    assert up.resolve_policy(p, None, {"policy": "vclos"}, "x") == "vclos"
    assert up.resolve_policy(p, "ecmp", {"policy": "vclos"}, "x") == "ecmp"
    assert up.resolve_policy(p, None, {}, "x") == "ecmp"  # the leaf-spine default


# -- keeping a stand-in fabric up, then tearing it down -------------------------------------


class StandIn:
    """What `up` uses of a Fabric, with no network behind it."""

    def __init__(self, plan, run_dir: Path, policy: str | None = "vclos", ocs_delay=0.0,
                 servers=None):
        self.plan, self.run_dir, self.policy = plan, Path(run_dir), policy
        self.state = SimpleNamespace(run_id=RUN_ID)
        self.controller = SimpleNamespace(api_socket=API, of_port=40002) if policy else None
        self.restarts: list[float] = []
        self.stopped = 0
        self.left: list[str] = []

    def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)

    def health(self) -> None:
        return None

    def stop(self) -> list[str]:
        self.stopped += 1
        self.state = None
        return self.left


@pytest.fixture
def stand_in(monkeypatch):
    """`up` builds a StandIn instead of a Fabric; the StandIn made is kept here."""
    from testbed.emulator import fabric

    made: list[StandIn] = []

    def build(*args, **kwargs):
        made.append(StandIn(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(fabric, "Fabric", build)
    return made


def test_up_records_itself_holds_the_lock_and_tears_down_on_ctrl_c(tmp_path, capsys,
                                                                    monkeypatch, stand_in):
    seen = {}

    def watch(fab):
        seen["record"] = up_record.find()
        seen["lock"] = runlock.holder()
        raise KeyboardInterrupt

    monkeypatch.setattr(up, "watch", watch)
    assert up.keep_up(plan(), "vclos", "spec.yaml", tmp_path / "out", interactive=False) == 0
    (fab,) = stand_in
    assert fab.stopped == 1 and fab.run_dir.parent == tmp_path / "out"
    assert fab.run_dir.name.endswith("-up")
    r = seen["record"]
    assert (r.run_id, r.api_socket, r.pid, Path(r.run_dir)) == (RUN_ID, API, os.getpid(),
                                                             fab.run_dir)
    assert r.hosts["h3"] == ["10.0.0.4"]
    assert seen["lock"]["what"] == "fabriclab up spec.yaml"
    assert seen["lock"]["stop"] == f"press Ctrl-C where it runs, or stop it with `kill " \
                                   f"{os.getpid()}`"
    assert runlock.holder() is None  # released
    assert not r.registry_path.exists() and (fab.run_dir / up_record.NAME).exists()
    out = capsys.readouterr().out
    assert f"controller API  the Unix socket {API}, root only" in out
    assert "fabriclab jobs add pinned --hosts h0,h3" in out
    assert f"nsenter --net={cleanup.STATE_DIR}/netns/{RUN_ID}/h0 ping -c1 10.0.0.4" in out
    assert out.rstrip().endswith("fabric down: nothing left")


def test_sigterm_tears_down_and_a_second_one_is_held(tmp_path, monkeypatch, stand_in):
    def watch(fab):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not end the wait")

    def stop(self):
        os.kill(os.getpid(), signal.SIGTERM)  # during the teardown: ignored, not raised
        self.stopped += 1
        self.state = None
        return []

    monkeypatch.setattr(up, "watch", watch)
    monkeypatch.setattr(StandIn, "stop", stop)
    assert up.keep_up(plan(), "vclos", "spec.yaml", tmp_path / "out", interactive=False) == 0
    assert stand_in[0].stopped == 1


def test_an_ignored_sighup_stays_ignored_and_a_held_ctrl_c_still_reports(
        tmp_path, capsys, monkeypatch, stand_in):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup

    def watch(fab):
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        raise KeyboardInterrupt

    def stop(self):  # Fabric.stop raises a Ctrl-C it held back, after the teardown
        self.state = None
        self.leftovers = []
        raise KeyboardInterrupt

    monkeypatch.setattr(up, "watch", watch)
    monkeypatch.setattr(StandIn, "stop", stop)
    assert up.keep_up(plan(), "vclos", "spec.yaml", tmp_path / "out", interactive=False) == 0
    assert capsys.readouterr().out.rstrip().endswith("fabric down: nothing left")


def test_leftovers_and_a_dead_fabric_are_exit_1(tmp_path, capsys, monkeypatch, stand_in):
    monkeypatch.setattr(up, "watch", lambda fab: "Open vSwitch stopped during the run")
    monkeypatch.setattr(StandIn, "stop", lambda self: ["bridge leaf0"])
    assert up.keep_up(plan(), "vclos", "spec.yaml", tmp_path / "out", interactive=False) == 1
    err = capsys.readouterr().err
    assert "teardown left bridge leaf0: run `fabriclab clean`" in err
    assert "fabriclab up: error: Open vSwitch stopped" in err


def test_watch_warns_once_and_ends_only_when_ovs_is_gone(monkeypatch, capsys):
    from testbed.emulator import preflight

    answers = iter([None, "job a: link leaf1-spine0 is down", "job a: link leaf1-spine0 is down",
                    "Open vSwitch stopped"])
    monkeypatch.setattr(up.time, "sleep", lambda s: None)
    ovs = iter([True, True, False])
    monkeypatch.setattr(preflight, "ovs_running", lambda: next(ovs))
    fab = SimpleNamespace(restarts=[], health=lambda: next(answers))
    assert up.watch(fab) == "Open vSwitch stopped"
    assert capsys.readouterr().out.count("warning: job a: link leaf1-spine0 is down") == 1


def test_no_controller_means_no_job_lines(tmp_path):
    lines = up.where(record(tmp_path, api_socket=None), plan(), interactive=True)
    text = "\n".join(lines)
    assert "controller API" not in text and "jobs cannot be placed" in text
    assert "`exit` or Ctrl-D in the CLI tears it all down" in text
    assert "Mininet's CLI (`h0 ping -c1 h3`" in text


def test_the_cli_checks_the_fabric_before_each_command(tmp_path, monkeypatch, capsys):
    """Mininet's CLI over a stand-in network, fed from a pipe: each command line is preceded
    by a health check; a problem is said once, a restarted controller is said."""
    cli = pytest.importorskip("mininet.cli")
    from mininet.log import lg

    from testbed.emulator.mn_cli import FabricCLI

    monkeypatch.setattr(cli.CLI, "readlineInited", True)  # no ~/.mininet_history written
    r, w = os.pipe()
    os.write(w, b"\n\n\nexit\n")
    os.close(w)
    stdin = os.fdopen(r)
    monkeypatch.setattr("sys.stdin", stdin)
    answers = iter([None, "job a: link leaf1-spine0 is down", "job a: link leaf1-spine0 is down",
                    None])
    fab = SimpleNamespace(net={}, restarts=[])

    def health():
        if len(fab.restarts) == 0:
            fab.restarts.append(1.0)  # the first check restarts a dead controller
        return next(answers)

    fab.health = health
    FabricCLI(fab, stdin=stdin)
    err = capsys.readouterr().err
    assert err.count("warning: job a: link leaf1-spine0 is down") == 1
    assert err.count("restarted it") == 1
    assert lg.getEffectiveLevel() > 30  # quiet again for the teardown (error level)
    stdin.close()


def test_up_makes_a_new_run_directory_and_touches_nothing_in_out(tmp_path, monkeypatch,
                                                                  stand_in):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("an earlier result")

    def watch(fab):
        raise KeyboardInterrupt

    monkeypatch.setattr(up, "watch", watch)
    for _ in range(2):
        assert up.keep_up(plan(), "vclos", "spec.yaml", out, interactive=False) == 0
    first, second = stand_in
    assert first.run_dir != second.run_dir and first.run_dir.parent == second.run_dir.parent
    assert (out / "keep.txt").read_text() == "an earlier result"
