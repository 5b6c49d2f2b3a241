"""Bad input at the command line (no root): one sentence naming the field or the path, exit 2,
no traceback and no half-written file; and what should work does (`topo` on an experiment)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testbed.cli import main

ROOT = Path(__file__).parent.parent
FABRIC = str(ROOT / "experiments" / "fabrics" / "multidim-2x4.yaml")
DEMO = str(ROOT / "experiments" / "demo.yaml")
SMALL = ["simulate-cluster", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2",
         "--jobs", "3"]


@pytest.fixture
def files(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_bytes(b"name: \xff\xfe\n")
    (tmp_path / "bad.csv").write_bytes(b"job_id,gpu_num\n\xff,1\n")
    (tmp_path / "afile").write_text("")
    (tmp_path / "adir").mkdir()
    (tmp_path / "var.yaml").write_text(
        "name: v\nfabric: {kind: leaf_spine, leaves: 2, spines: 2, hosts_per_leaf: 2, "
        "host_link_mbit_s: 20, uplink_mbit_s: 20}\njobs:\n  - {name: a, hosts_wanted: 2, "
        "workload: {kind: allreduce, sizes: [4KiB]}}\nvariants:\n  - {name: ok}\n"
        "  - {name: big, job_overrides: {hosts_wanted: 9}}\n")
    (tmp_path / "typo.yaml").write_text(
        "name: t\nfabric: {kind: leaf_spine, leaves: 2, spines: 2, hosts_per_leef: 2, "
        "host_link_mbit_s: 20, uplink_mbit_s: 20}\njobs:\n  - {name: a, hosts_wantd: 2, "
        "workload: {kind: allreduce, sizes: [4KiB]}}\n")
    return tmp_path


@pytest.mark.parametrize(("argv", "words"), [
    (["topo", "bad.yaml"], "bad.yaml is not UTF-8 text (byte 6"),
    (["run", "bad.yaml", "--backend", "sim"], "bad.yaml is not UTF-8 text"),
    (["topo", FABRIC, "--out", "afile"], "--out afile is a file; name a directory"),
    (["topo", FABRIC, "--out", "afile/sub"], "afile/sub: Not a directory"),
    (["run", DEMO, "--backend", "sim", "--out", "afile"], "--out afile is a file"),
    ([*SMALL, "--trace", "helios:bad.csv", "--out", "o"], "bad.csv is not a text (UTF-8) CSV"),
    ([*SMALL, "--out", ""], "--out is empty"),
    ([*SMALL, "--seed", "-1", "--out", "o"], "--seed is -1; it must be 0 or more"),
    ([*SMALL, "--jobs", "0", "--out", "o"], "--jobs is 0; it must be at least 1"),
    ([*SMALL, "--load", "0", "--out", "o"], "--load is 0.0; it must be in (0, 2]"),
    ([*SMALL, "--load", "3", "--out", "o"], "--load is 3.0; it must be in (0, 2]: it is the "
     "offered GPU-time ÷ the cluster's, and above 1 the queue only grows"),
    ([*SMALL, "--rounds", "0", "--out", "o"], "--rounds is 0; it must be at least 1"),
    ([*SMALL, "--spines", "0", "--out", "o"], "--spines is 0; it must be at least 1"),
    ([*SMALL, "--ocs-count", "-1", "--out", "o"], "--ocs-count is -1; it must be at least 0"),
    ([*SMALL, "--link-gbit-s", "-1", "--out", "o"], "--link-gbit-s is -1.0; it must be a posi"),
    ([*SMALL, "--link-gbps", "0", "--out", "o"], "--link-gbit-s is 0.0; it must be a positive"),
    ([*SMALL, "--label", " ", "--out", "o"], "--label is empty; give the run a name"),
    ([*SMALL, "--label", "a\nb", "--out", "o"], "--label holds the unprintable character '\\n'"),
    ([*SMALL, "--label", "x" * 81, "--out", "o"], "--label is 81 characters long; it must be at"),
    (["report", "/nonexistent-run"], "/nonexistent-run does not exist"),
    (["plan", "--dims", "4x4", "--bw", "100,50", "--size", "12XB"],
     "--size '12XB' is not a size; write e.g. 64, 1KiB"),
    (["model", "--dims", "4x4", "--bw", "-100,50", "--size", "1MiB", "--chunks", "4"],
     "--bw '-100,50' must be positive Gbit/s values"),
    (["simulate-cluster", "--label", "-x", "--out", ""], "--out is empty"),
    (["run", "typo.yaml", "--backend", "sim"],
     "jobs.0.hosts_wantd: unknown key; did you mean hosts_wanted?"),
    (["topo", "typo.yaml"], "fabric.hosts_per_leef: unknown key; did you mean hosts_per_leaf?"),
    (["model", "--dims", "1", "--bw", "1", "--size", "1MiB", "--chunks", "4"],
     "--dims 1 is a single host: there is nothing to all-reduce"),
    (["run", "var.yaml", "--backend", "sim", "--out", "r"],
     "var.yaml (run v-big): jobs.0.hosts_wanted: 9 hosts, the fabric has 4"),
    (["allreduce", "--ranks", "2", "--size", "4KiB", "--warmup", "-1"],
     "--warmup is -1; it must be at least 0"),
    (["allreduce", "--ranks", "2", "--size", "4KiB", "--timeout", "0"],
     "--timeout is 0.0; it must be more than 0 seconds"),
    (["allreduce", "-b", "8K", "-e", "1K"],
     "-e/--maxbytes (1024 bytes) is below -b/--minbytes (8192 bytes)"),
    (["allreduce", "-b", "1K", "-e", "8K", "-f", "1"],
     "-f/--stepfactor is '1'; it must be a whole number of 2 or more"),
    (["allreduce", "-b", "1KB"], "-b/--minbytes '1KB' is not a size"),
    (["allreduce", "-b", "2", "-e", "8"], "-b/--minbytes gives 2 bytes, below one float32"),
    (["allreduce", "--size", "4KiB", "-e", "8K"],
     "give the sizes either as --size or as -b/-e/-f, not both"),
    (["allreduce", "--size", "4KiB", "--csv", "nodir/x.csv"],
     "cannot write nodir/x.csv: No such file or directory"),
    (["allreduce", "--size", "4KiB", "--csv", "adir"], "cannot write adir: Is a directory"),
    (["allreduce", "--size", "4KiB", "--csv", "afile/x.csv"],
     "cannot write afile/x.csv: Not a directory"),
    (["allreduce", "--size", "4KiB", "--csv", ""], "--csv is empty"),
], ids=lambda v: " ".join(v)[:60] if isinstance(v, list) else None)
def test_one_sentence_and_nothing_left(files: Path, capsys, argv: list[str], words: str) -> None:
    before = sorted(p.name for p in files.rglob("*"))
    assert main(argv) == 2
    *warnings, err = capsys.readouterr().err.strip().splitlines()
    assert words in err and err.startswith("fabriclab ") and "Traceback" not in err, err
    assert all(w.startswith("warning: ") for w in warnings), warnings
    assert sorted(p.name for p in files.rglob("*")) == before  # nothing half-written


def test_topo_reads_the_fabric_block_of_an_experiment(files: Path, capsys) -> None:
    assert main(["topo", DEMO]) == 0
    assert "leaf_spine: 8 hosts" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "not_loaded"), [
    (["--help"], ("pandas", "matplotlib", "networkx", "pydantic", "testbed.sim", "sdn_app",
                   "dask", "distributed")),
    (["sweep", "--help"], ("dask", "distributed", "pandas", "testbed.sim")),
    (["topo", FABRIC], ("pandas", "matplotlib", "networkx", "testbed.sim", "sdn_app")),
    (["topo", FABRIC, "--servers", str(ROOT / "experiments" / "servers" / "example.yaml")],
     ("pandas", "matplotlib", "networkx", "testbed.sim", "testbed.emulator", "sdn_app")),
    (["report", "--help"], ("pandas", "matplotlib")),
    (["up", "--help"], ("pandas", "mininet", "os_ken", "sdn_app")),
    (["jobs", "list", "--help"], ("pandas", "mininet", "os_ken", "sdn_app", "pydantic")),
    (["allreduce", "--help"], ("pandas", "pyarrow", "numpy", "workloads.launcher")),
])
def test_light_commands_load_no_heavy_module(argv: list[str], not_loaded: tuple[str, ...]) -> None:
    """What makes `fabriclab --help` and `topo` start fast (startup time itself is not
    asserted: the machine is shared)."""
    code = ("import sys, contextlib, io\nfrom testbed.cli import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main({argv!r})\n"
            f"print([m for m in {not_loaded!r} if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout + proc.stderr


SWEEP = str(ROOT / "experiments" / "sweeps" / "vclos-paper.yaml")
RUN_TINY = str(ROOT / "tests" / "data" / "run-tiny")


@pytest.mark.parametrize(("argv", "words"), [
    (["allreduce", "--ranks", "2", "--size", "4KiB", "--out", "full"],
     "--out full exists and is not empty (1 entries: old.txt); choose a new directory, or add "
     "--force to empty it first"),
    (["import-astra", "net.yml", "--out", "afile"],
     "--out afile exists; choose a new file, or add --force to replace it"),
    (["export-astra", "--preset", "2d-switch", "--out", "full"], "--out full exists and is not"),
    (["calibrate", FABRIC, "--out", "full"], "--out full exists and is not empty"),
    (["report", RUN_TINY, "--out", "full"], "--out full exists and is not empty"),
    ([*SMALL, "--out", "full"], "--out full exists and is not empty"),
    (["sweep", SWEEP, "--out", "full"], "--out full holds old.txt, which no sweep writes: it is "
     "not a sweep's directory"),
    (["topo", FABRIC, "--out", "full"], "--out full exists and is not empty"),
], ids=lambda v: v[0] if isinstance(v, list) else None)
def test_every_command_refuses_a_non_empty_out(files: Path, capsys, argv: list[str],
                                               words: str) -> None:
    from testbed.core import astra_formats as af
    from testbed.core.presets import PRESETS

    (files / "net.yml").write_text(af.network_yaml(af.from_preset(PRESETS["2d-switch"])[0]))
    (files / "full").mkdir()
    (files / "full" / "old.txt").write_text("an earlier run's")
    test_one_sentence_and_nothing_left(files, capsys, argv, words)
    assert (files / "full" / "old.txt").read_text() == "an earlier run's"
