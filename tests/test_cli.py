"""The command line: bad input gets one sentence and exit code 2, nothing is left behind."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.core.errors import FabricLabError
from testbed.core.out_dir import MARKER, mark_out_dir
from testbed.core.traces import read_table
from testbed.emulator import cleanup
from workloads import launcher

SMALL_ALLREDUCE = ["allreduce", "--ranks", "2", "--size", "64:128", "--iters", "1",
                   "--warmup", "0", "--timeout", "10"]


@pytest.fixture
def private_tempdir(tmp_path, monkeypatch) -> Path:
    """Make tempfile's default directory this test's own, so no other run's
    ``fabriclab-allreduce-*`` directories come or go during the test."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def allreduce_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("fabriclab-allreduce-*"))


def test_topo_prints_counts_and_exports_json(tmp_path, capsys):
    out = tmp_path / "new"
    assert main(["topo", "experiments/fabrics/multidim-2x4.yaml", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "multidim: 8 hosts, 4 switches (4 dim), 16 links (8 dim, 8 ring)" in text
    data = json.loads((out / "topology.json").read_text())
    assert len(data["hosts"]) == 8 and not list(out.glob("*.partial"))
    assert main(["topo", "experiments/fabrics/multidim-2x4.yaml", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == data


def test_bad_spec_is_one_sentence_and_leaves_nothing(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text("fabric: {kind: leaf_spine, leaves: 2, spines: 0, hosts_per_leaf: 2,"
                    " host_link_mbit_s: 50, uplink_mbit_s: 5000}\n")
    before = set(cleanup.STATE_DIR.glob("*.json")) if cleanup.STATE_DIR.exists() else set()
    for command in (["calibrate", str(spec), "--out", str(tmp_path / "run")],
                    ["topo", str(spec)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "Traceback" not in err
        assert "fabric.spines: Input should be greater than or equal to 1" in err
        assert "fabric.uplink_mbit_s" in err and "1000" in err
    assert not (tmp_path / "run").exists()
    after = set(cleanup.STATE_DIR.glob("*.json")) if cleanup.STATE_DIR.exists() else set()
    assert after == before


def test_missing_file_and_bad_flag(tmp_path, capsys):
    assert main(["topo", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read spec" in capsys.readouterr().err
    spec = "experiments/fabrics/default.yaml"
    assert main(["calibrate", spec, "--seconds", "1", "--out", str(tmp_path / "r")]) == 2
    assert "--seconds must be at least 2" in capsys.readouterr().err


def test_doctor_prints_one_line_per_check_with_fixes(capsys):
    code = main(["doctor"])
    out = capsys.readouterr().out
    for item in ("root", "htb qdisc", "/dev/net/tun", "ovs daemons", "ovs datapath", "mnexec",
                 "iperf3", "mininet", "os-ken", "docker engine"):
        assert item in out
    assert code in (0, 1)  # 1 only when a required item fails, and then a fix is printed
    if code == 1:
        assert "FAIL" in out


def test_clean_needs_root_or_reports(capsys):
    import os

    code = main(["clean"])
    captured = capsys.readouterr()
    if os.geteuid() == 0:
        assert code == 0 and ("nothing to clean" in captured.out or "removed" in captured.out)
    else:
        assert code == 2 and "needs root" in captured.err


def test_allreduce_without_out_leaves_no_temp_dir(private_tempdir, capsys):
    before = allreduce_dirs()
    assert main(SMALL_ALLREDUCE) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert "traces not kept (pass --out DIR to keep them)" in header
    assert "fabriclab-allreduce-" not in out
    data = [line for line in out.splitlines() if not line.startswith("#")]
    assert [line.split()[0] for line in data] == ["64", "128"]
    assert allreduce_dirs() == before


def test_allreduce_with_out_keeps_the_traces_there(tmp_path, private_tempdir, capsys):
    keep = tmp_path / "keep"
    before = allreduce_dirs()
    assert main([*SMALL_ALLREDUCE, "--out", str(keep)]) == 0
    assert f"traces in {keep}" in capsys.readouterr().out.splitlines()[0]
    colls = read_table(keep, "collectives").to_pandas()
    assert sorted(set(colls["rank"])) == [0, 1] and sorted(set(colls["size"])) == [64, 128]
    assert sorted(p.name for p in keep.glob("phases-rank*.parquet")) == [
        "phases-rank0.parquet", "phases-rank1.parquet"]
    assert allreduce_dirs() == before


def test_failed_or_interrupted_allreduce_leaves_no_temp_dir(private_tempdir, monkeypatch,
                                                            capsys):
    before = allreduce_dirs()
    with pytest.raises(FabricLabError, match="is that worker running"):
        launcher.run_local(ranks=2, sizes=[64], timeout=1.0, skip_ranks=(1,),
                           wall_timeout=30)
    assert allreduce_dirs() == before

    used: list[Path] = []

    def interrupted(configs: dict, out: Path, spawn: object, wall_timeout: float | None,
                    poll: object = None) -> None:
        used.append(out)
        (out / "config-rank0.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(launcher, "launch_workers", interrupted)
    assert main(SMALL_ALLREDUCE) == 130
    assert "interrupted" in capsys.readouterr().err
    assert len(used) == 1 and used[0].name.startswith("fabriclab-allreduce-")
    assert not used[0].exists() and allreduce_dirs() == before


def test_a_command_imports_only_its_own_module(tmp_path):
    """`fabriclab topo` loads neither pandas, the simulator, the emulator nor the SDN framework."""
    root = Path(__file__).resolve().parents[1]
    code = ("import sys; from testbed.cli import main; "
            f"rc = main(['topo', {str(root / 'experiments/fabrics/multidim-2x4.yaml')!r}, "
            f"'--out', {str(tmp_path / 'topo')!r}]); "
            "heavy = ('pandas', 'matplotlib', 'testbed.sim', 'testbed.emulator', 'mininet', "
            "'os_ken', 'analysis'); "
            "print(rc, sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout + out.stderr


def test_doctor_without_root_says_it_cannot_tell(tmp_path):
    """As a normal user the OVS sockets and qdiscs are out of reach: doctor says it cannot
    tell, instead of reporting OVS down and suggesting a restart of ovs-vswitchd."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parent.parent
    command = [sys.executable, "-m", "testbed.cli", "doctor"]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv is missing: cannot drop root for this test")
        command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *command]
        probe = subprocess.run([*command[:4], sys.executable, "-c", "import testbed"], cwd=root,
                               capture_output=True)
        if probe.returncode != 0:
            pytest.skip("this checkout (or its venv) is not readable by nobody, e.g. under "
                        "/root: no unprivileged user could run doctor from it")
    env = dict(os.environ, HOME=str(tmp_path), PYTHONDONTWRITEBYTECODE="1",
               COLUMNS="200")
    proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = {line.split("│")[1].strip(): line for line in proc.stdout.splitlines()
             if line.count("│") > 3}
    for item in ("ovs daemons", "ovs datapath", "htb qdisc"):
        assert "unknown" in lines[item] and "without root" in lines[item]
    assert "not running" not in proc.stdout and "restarts" not in proc.stdout


def _stale_out(tmp_path: Path) -> tuple[Path, Path]:
    """An earlier run's --out (marked as a command's output): a stale comparison/report.html,
    and a symlink to a file outside it (which emptying must remove, never follow)."""
    out, outside = tmp_path / "out", tmp_path / "outside.txt"
    mark_out_dir(out)
    (out / "comparison").mkdir(parents=True)
    (out / "comparison" / "report.html").write_text("stale")
    outside.write_text("not fabriclab's")
    (out / "link").symlink_to(outside)
    (out / "dirlink").symlink_to(tmp_path)
    return out, outside


@pytest.mark.parametrize("argv", [
    ["simulate-cluster", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2",
     "--jobs", "3"],
    ["topo", "experiments/fabrics/multidim-2x4.yaml"],
    ["export-astra", "--preset", "2d-switch"],
    ["report", str(Path(__file__).parent / "data" / "run-tiny")],
    ["allreduce", "--ranks", "2", "--size", "4KiB", "--iters", "1", "--warmup", "0"],
], ids=lambda v: v[0])
def test_force_empties_the_out_first_and_touches_nothing_outside(tmp_path, capsys, argv):
    out, outside = _stale_out(tmp_path)
    assert main([*argv, "--out", str(out)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main([*argv, "--out", str(out), "--force"]) == 0
    left = sorted(p.name for p in out.iterdir())
    assert "comparison" not in left and "link" not in left and "dirlink" not in left, left
    assert outside.read_text() == "not fabriclab's" and (tmp_path / "outside.txt").exists()


@pytest.mark.parametrize("argv", [
    ["topo", "experiments/fabrics/multidim-2x4.yaml"],
    ["export-astra", "--preset", "2d-switch"],
    ["simulate-cluster", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2",
     "--jobs", "3"],
], ids=lambda v: v[0])
def test_force_never_empties_a_directory_no_command_wrote(tmp_path, capsys, argv):
    """``--out ~ --force`` as root must not wipe a home: only a marked output is emptied."""
    precious = tmp_path / "home" / "thesis.tex"
    precious.parent.mkdir()
    precious.write_text("years of work")
    assert main([*argv, "--out", str(precious.parent), "--force"]) == 2
    assert "not a directory a fabriclab command wrote" in capsys.readouterr().err
    assert precious.read_text() == "years of work"
    assert sorted(p.name for p in precious.parent.iterdir()) == ["thesis.tex"]


def test_an_output_is_marked_and_then_force_replaces_it(tmp_path, capsys):
    out = tmp_path / "topo"
    assert main(["topo", "experiments/fabrics/multidim-2x4.yaml", "--out", str(out)]) == 0
    assert (out / MARKER).is_file()
    assert main(["topo", "experiments/fabrics/multidim-2x4.yaml", "--out", str(out),
                 "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "topology.json"]


def test_import_astra_replaces_its_file_only_with_force(tmp_path, capsys):
    from testbed.core import astra_formats as af
    from testbed.core.presets import PRESETS

    net, spec = tmp_path / "net.yml", tmp_path / "spec.yaml"
    net.write_text(af.network_yaml(af.from_preset(PRESETS["2d-switch"])[0]))
    spec.write_text("old")
    assert main(["import-astra", str(net), "--scale-down", "--out", str(spec)]) == 2
    assert spec.read_text() == "old"
    assert main(["import-astra", str(net), "--scale-down", "--out", str(spec), "--force"]) == 0
    assert "fabric:" in spec.read_text()


def test_report_refuses_to_empty_a_run_it_reports_on(tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "data" / "run-tiny", run)
    assert main(["report", str(run), "--out", str(run), "--force"]) == 2
    assert "holds the run" in capsys.readouterr().err
    assert (run / "summary.json").is_file()


def test_run_makes_a_new_run_directory_and_touches_nothing_there(tmp_path, capsys):
    out = tmp_path / "results"
    out.mkdir()
    (out / "keep.txt").write_text("an earlier result")
    spec = tmp_path / "tiny.yaml"
    spec.write_text("name: tiny\nfabric: {kind: leaf_spine, leaves: 2, spines: 1, "
                    "hosts_per_leaf: 1, host_link_mbit_s: 100, uplink_mbit_s: 100}\njobs:\n"
                    "  - {name: a, hosts_wanted: 2, workload: {kind: allreduce, sizes: [4KiB]}}\n")
    for _ in range(2):
        assert main(["run", str(spec), "--backend", "sim", "--no-report", "--out",
                     str(out)]) == 0
    runs = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(runs) == 2 and all(p.name.endswith(("-tiny", "-tiny-2")) for p in runs), runs
    assert (out / "keep.txt").read_text() == "an earlier result"
