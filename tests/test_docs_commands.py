"""Every command line README.md and BENCHMARKS.md show resolves and parses as written (no
root needed): from the checkout, with Debian's default sudo PATH, the program exists, `make`
targets exist, scripts exist and their arguments parse (`--help` appended), and `fabriclab`
arguments parse with the real parser. Lines with placeholders (SPEC, NAME, a|b) are skipped;
the VM line (`vagrant ...`) is checked for its inner command only.

The quick lines (:data:`QUICK`) then run for real, verbatim, through ``bash -c`` with that PATH,
in a scratch directory (root for doctor and clean). The others take minutes (make demo, the
emulated benchmarks, calibrate) or need a fabric kept up (up, jobs): the root tests and
BENCHMARKS.md's own runs exercise those."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.cli import build_parser
from testbed.emulator.preflight import is_root

ROOT = Path(__file__).parent.parent
SUDO_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's secure_path
PROGRAMS = ("fabriclab", ".venv/bin/python", ".venv/bin/fabriclab", "make", "bash", "vagrant")
FABRICLAB = ("fabriclab", ".venv/bin/fabriclab")
QUICK = re.compile(
    r"^fabriclab (plan|model|topo|doctor|clean|allreduce --ranks 4 -b) |^fabriclab (doctor|clean)$"
    r"|^(\.venv/bin/)?fabriclab run \S+ --backend sim|^fabriclab sweep "
    r"|^\.venv/bin/python benchmarks/"
    r"(model_shapes|allocator_fragmentation|transport_loopback)\.py$")
NEEDS_ROOT = ("fabriclab doctor", "fabriclab clean")
PLACEHOLDER = re.compile(r"\b(SPEC|NAME|DIR|FILE|CONFIG|N)\b|\||\.\.\.|\[")


def command_lines() -> list[str]:
    """Shell lines of ```sh blocks, and inline `code` spans that start with a program."""
    out = []
    for doc in ("README.md", "BENCHMARKS.md"):
        text = (ROOT / doc).read_text()
        for block in re.findall(r"```sh\n(.*?)```", text, re.S):
            out += [line.split("  #")[0].strip() for line in block.splitlines()]
        out += [span for span in re.findall(r"`([^`\n]+)`", text)
                if span.split(" ")[0] in PROGRAMS and not mention(span)]
    return sorted({line for line in out if line and not PLACEHOLDER.search(line)})


def mention(span: str) -> bool:
    """Prose naming a command (`fabriclab report`, `vagrant up`), not a line to run."""
    words = span.split()
    if words[0] == "vagrant":
        return "-c" not in words
    return len(words) < 2 or (words[0] in FABRICLAB and len(words) == 2
                              and words[1] not in ("doctor", "clean"))


def inner(line: str) -> list[str]:
    """The command a line runs (for the VM line, the one run inside the VM)."""
    words = shlex.split(line)
    if words[0] == "vagrant":
        words = shlex.split(words[words.index("-c") + 1].split("&&")[-1])
        assert words[0] == "sudo", "inside the VM the command needs sudo"
        words = words[1:]
    return words


def test_the_docs_show_commands() -> None:
    lines = command_lines()
    assert any(line.startswith("make demo") for line in lines)
    assert any(line.startswith("make test") for line in lines)
    assert len(lines) > 20


@pytest.mark.parametrize("line", command_lines())
def test_command_runs_as_written(line: str) -> None:
    assert not line.startswith("sudo "), "a root shell has no sudo: say 'as root' instead"
    words = inner(line)
    program, args = words[0], words[1:]
    if program in FABRICLAB:
        if is_root():  # install.sh links it onto root's PATH and Debian's sudo PATH
            found = subprocess.run(["bash", "-c", "command -v fabriclab"], capture_output=True,
                                   text=True, env={"PATH": SUDO_PATH})
            assert found.returncode == 0, "fabriclab is not on the sudo PATH: run make install"
        assert os.access(ROOT / "bin" / "fabriclab", os.X_OK)
        command = next((a for a in args if not a.startswith("-")), None)
        try:
            build_parser(command).parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"{line!r}: arguments do not parse (exit {exc.code})")
    elif program == "make":
        targets = re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M)
        assert all(a in targets for a in args), f"{line!r}: not a make target"
    elif program == "bash":
        assert (ROOT / args[0]).is_file(), f"{line!r}: no such script"
    else:  # .venv/bin/python benchmarks/x.py ...: the script exists and its flags parse
        script = ROOT / args[0]
        assert script.is_file(), f"{line!r}: no such script"
        # Only a script with a parser may be given --help (it would run the benchmark else).
        assert "argparse" in script.read_text(), f"{script.name} takes no --help"
        proc = subprocess.run([sys.executable, *args, "--help"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, f"{line!r}: {proc.stderr.strip()[-300:]}"


QUICK_LINES = [line for line in command_lines() if QUICK.search(line)]


def test_quick_lines_cover_every_kind_of_command() -> None:
    for start in ("fabriclab plan", "fabriclab model", "fabriclab topo", "fabriclab allreduce",
                  "fabriclab doctor", "fabriclab clean", ".venv/bin/python benchmarks/"):
        assert any(line.startswith(start) for line in QUICK_LINES), start
    assert any("--backend sim" in line for line in QUICK_LINES)


@pytest.mark.parametrize("line", QUICK_LINES)
def test_quick_line_runs_verbatim_through_the_sudo_path(line: str, tmp_path: Path) -> None:
    if line in NEEDS_ROOT and not is_root():
        pytest.skip("needs root")
    env = {"PATH": SUDO_PATH, "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    if subprocess.run(["bash", "-c", "command -v fabriclab"], env=env,
                      capture_output=True).returncode != 0:
        pytest.skip("fabriclab is not installed on this machine's PATH (make install, as root)")
    for name in ("experiments", "benchmarks", ".venv"):  # the checkout, as seen from its root
        (tmp_path / name).symlink_to(ROOT / name)
    proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"{line!r} exit {proc.returncode}: {proc.stderr.strip()[-500:]}"
    assert proc.stdout.strip(), f"{line!r} printed nothing"
    assert "Traceback" not in proc.stderr
