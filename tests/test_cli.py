"""The command line: bad input gets one sentence and exit code 2, nothing is left behind."""

from __future__ import annotations

import json

from testbed import cleanup
from testbed.cli import main


def test_topo_prints_counts_and_exports_json(tmp_path, capsys):
    out = tmp_path / "topo.json"
    assert main(["topo", "experiments/fabrics/multidim-2x4.yaml", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "multidim: 8 hosts, 4 switches (4 dim), 16 links (8 dim, 8 ring)" in text
    data = json.loads(out.read_text())
    assert len(data["hosts"]) == 8 and not list(tmp_path.glob("*.partial"))


def test_bad_spec_is_one_sentence_and_leaves_nothing(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text("fabric: {kind: leaf_spine, leaves: 2, spines: 0, hosts_per_leaf: 2,"
                    " host_link_mbps: 50, uplink_mbps: 5000}\n")
    before = set(cleanup.STATE_DIR.glob("*.json")) if cleanup.STATE_DIR.exists() else set()
    for command in (["calibrate", str(spec), "--out", str(tmp_path / "run")],
                    ["topo", str(spec)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "Traceback" not in err
        assert "fabric.spines: Input should be greater than or equal to 1" in err
        assert "fabric.uplink_mbps" in err and "1000" in err
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
