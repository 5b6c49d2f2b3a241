"""High 1 of issue 27: root writes only into directories it made itself (or that no other user
can write), never follows a symlink it did not make, and writes atomically under a unique
temporary name. A run directory another user planted, or one under a directory another user
can write, is refused in one sentence.

Directories "of another user" are made here with ``chown`` to ``nobody``, so these tests need
root (as CI has) but no fabric.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

import pytest

from testbed.core import atomic
from testbed.core.errors import FabricLabError
from testbed.core.rundir import new_run_dir
from testbed.core.safe_paths import make_dir, open_append, own_or_new_dir, require_own_dir

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def nobody() -> int:
    return pwd.getpwnam("nobody").pw_uid


def others_dir(path: Path) -> Path:
    """A directory that belongs to ``nobody``, as one planted by another local user would."""
    path.mkdir()
    os.chown(path, nobody(), -1)
    return path


@needs_root
def test_a_run_directory_planted_by_another_user_is_refused(tmp_path):
    planted = others_dir(tmp_path / "run")
    with pytest.raises(FabricLabError, match="belongs to uid"):
        own_or_new_dir(planted)
    with pytest.raises(FabricLabError, match="exists already"):
        make_dir(planted)


@needs_root
def test_a_run_under_a_directory_another_user_owns_is_refused(tmp_path):
    parent = others_dir(tmp_path / "shared")
    with pytest.raises(FabricLabError, match=r"shared belongs to uid .*only you \(or root\)"):
        make_dir(parent / "run")
    with pytest.raises(FabricLabError, match="belongs to uid"):
        new_run_dir(parent, "x")
    assert list(parent.iterdir()) == []


def test_a_run_under_a_directory_others_can_write_is_refused_unless_sticky(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(FabricLabError, match="writable by other users"):
        make_dir(shared / "run")
    shared.chmod(0o1777)  # like /tmp: others cannot rename or remove what we make there
    assert make_dir(shared / "run").is_dir()


def test_a_symlinked_run_directory_is_refused_and_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "run"
    link.symlink_to(target)
    with pytest.raises(FabricLabError, match="symlink"):
        require_own_dir(link)
    with pytest.raises(FabricLabError, match="exists already"):
        make_dir(link)
    assert list(target.iterdir()) == []


@needs_root
def test_a_symlink_of_another_user_on_the_way_is_refused(tmp_path):
    target = tmp_path / "results"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    os.lchown(link, nobody(), -1)
    with pytest.raises(FabricLabError, match="symlink of uid"):
        make_dir(link / "run")


def test_new_run_dirs_skip_a_planted_name_and_are_made_fresh(tmp_path, monkeypatch):
    monkeypatch.setattr("time.strftime", lambda _fmt: "20260101-000000")
    (tmp_path / "20260101-000000-x").symlink_to("/")
    made = new_run_dir(tmp_path, "x")
    assert made.name == "20260101-000000-x-2" and not made.is_symlink() and made.is_dir()


def test_a_log_opened_for_append_refuses_a_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "controller.log").symlink_to(victim)
    with pytest.raises(FabricLabError, match="symlink"):
        open_append(tmp_path / "controller.log")
    assert victim.read_text() == "keep\n"


def test_atomic_writes_replace_a_planted_symlink_and_leave_no_temporary(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "summary.json").symlink_to(victim)
    (tmp_path / "summary.json.partial").symlink_to(victim)  # the old fixed temporary name
    atomic.write_json(tmp_path / "summary.json", {"ok": True})
    assert victim.read_text() == "keep\n"
    assert not (tmp_path / "summary.json").is_symlink()
    assert (tmp_path / "summary.json").read_text().strip().startswith("{")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "summary.json", "summary.json.partial", "victim"]


def test_atomic_writes_take_the_mode_asked_for(tmp_path):
    atomic.write_json(tmp_path / "state.json", {}, mode=0o600)
    assert stat.S_IMODE((tmp_path / "state.json").stat().st_mode) == 0o600
    atomic.write_text(tmp_path / "shared.txt", "x")
    assert stat.S_IMODE((tmp_path / "shared.txt").stat().st_mode) == 0o644


def test_benchmarks_make_their_run_directories_with_mkdtemp():
    root = Path(__file__).resolve().parents[1] / "benchmarks"
    fixed = [p.name for p in root.glob("*.py") if '"/tmp/' in p.read_text()
             or "'/tmp/" in p.read_text()]
    assert fixed == []


def test_calibrate_into_an_existing_directory_is_refused_before_anything_starts(
        tmp_path, capsys):
    from testbed.cli import main

    fabric = Path(__file__).resolve().parents[1] / "experiments/fabrics/multidim-2x4.yaml"
    (tmp_path / "out").mkdir()
    assert main(["calibrate", str(fabric), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "exists already" in err and "Traceback" not in err
    assert list((tmp_path / "out").iterdir()) == []


def fake_checkout(tmp_path: Path) -> Path:
    co = tmp_path / "checkout"
    (co / "testbed").mkdir(parents=True)
    (co / "pyproject.toml").write_text("")
    (co / "testbed" / "cli.py").write_text("")
    return co


@needs_root
def test_root_refuses_a_checkout_another_user_owns_and_names_the_fix(tmp_path, monkeypatch,
                                                                     capsys):
    import testbed.cli as cli
    from testbed.core.safe_paths import checkout_problem

    co = fake_checkout(tmp_path)
    assert checkout_problem(co) is None
    os.chown(co / "testbed" / "cli.py", nobody(), -1)  # e.g. /vagrant, owned by vagrant
    problem = checkout_problem(co)
    assert "cli.py belongs to uid" in problem
    assert f"`chown -R root:root {co} && chmod -R go-w {co}`" in problem
    monkeypatch.setattr(cli, "CHECKOUT", co)
    assert cli.main(["topo", "x.yaml"]) == 2
    assert "refusing to run as root from" in capsys.readouterr().err
    os.chown(co / "testbed" / "cli.py", 0, -1)
    (co / "testbed" / "cli.py").chmod(0o664)
    assert "cli.py is writable by other users" in checkout_problem(co)
    (co / "testbed" / "cli.py").chmod(0o644)
    os.chown(co, nobody(), -1)
    assert "checkout belongs to uid" in checkout_problem(co)
