"""Every command line README.md, BENCHMARKS.md and docs/*.md show resolves and parses as
written (no root needed): from the checkout, with Debian's default sudo PATH, the program
exists, `make` targets exist, scripts exist and their arguments parse (`--help` appended), and
`fabriclab` arguments parse with the real parser. Lines with placeholders (SPEC, NAME, a|b)
are skipped; the VM line (`vagrant ...`) is checked for its inner command only.

Then every line that runs without root and finishes in seconds runs for real, verbatim,
through ``bash -c`` with this checkout's ``bin`` first on the PATH, in a fresh scratch
directory (the checkout's ``experiments``, ``benchmarks`` and ``tests`` linked in, so relative
paths resolve): a ```sh block's lines in order in one directory (a later line reads what an
earlier one wrote, e.g. ``export-astra`` then ``import-astra``), an inline line alone. The rest
are skipped with their reason: root (:func:`needs_root`: the emulator, doctor and clean, which
run here when the tests run as root), or minutes of work (:data:`SLOW`; BENCHMARKS.md records
those runs)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from testbed.cli import build_parser
from testbed.emulator.preflight import is_root

ROOT = Path(__file__).parent.parent
DOCS = ("README.md", "BENCHMARKS.md",
        *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))
SUDO_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's secure_path
PROGRAMS = ("fabriclab", ".venv/bin/python", ".venv/bin/fabriclab", "make", "bash", "vagrant")
FABRICLAB = ("fabriclab", ".venv/bin/fabriclab")
PLACEHOLDER = re.compile(r"\b(SPEC|NAME|DIR|FILE|CONFIG|N|POLICY)\b|\||\.\.\.|\[")
# fabriclab commands that need root (the emulator and the machine's state)
ROOT_COMMANDS = {"doctor", "clean", "calibrate", "up", "jobs", "images", "servers",
                 "vm"}  # vm: builds an image or a box, or boots a VM, for minutes
RUNS_AS_ROOT = ("fabriclab doctor", "fabriclab clean")  # run for real when the tests are root
# the pure benchmarks that take seconds (every other one takes minutes or root)
QUICK_BENCHMARKS = re.compile(r"^\.venv/bin/python benchmarks/(model_shapes|themis_systems|"
                              r"allocator_fragmentation|transport_loopback)\.py$")
SLOW = {  # lines without root that take more than seconds: what they cost
    "fabriclab run experiments/themis-e2e.yaml --backend sim": "90 runs at 1024 NPUs, a minute",
    "fabriclab simulate-cluster --preset vclos-paper": "8192 GPUs and 5000 jobs, minutes",
    "fabriclab allreduce --ranks 8 --size 1KiB:256MiB": "27 sizes up to 256 MiB, a minute",
}
SCRATCH_LINKS = ("experiments", "benchmarks", "tests", ".venv")


@dataclass(frozen=True)
class Line:
    doc: str
    block: int | None  # the ```sh block's index in its doc; None: an inline `code` span
    text: str

    def __str__(self) -> str:
        return self.text


def doc_lines() -> list[Line]:
    """Shell lines of ```sh blocks (in order), and inline `code` spans that start with a
    program, of every doc; placeholders left out."""
    out: list[Line] = []
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        for i, block in enumerate(re.findall(r"```sh\n(.*?)```", text, re.S)):
            out += [Line(doc, i, line.split("  #")[0].strip()) for line in block.splitlines()]
        out += [Line(doc, None, span) for span in dict.fromkeys(re.findall(r"`([^`\n]+)`", text))
                if span.split(" ")[0] in PROGRAMS and not mention(span)]
    return [line for line in out if line.text and not PLACEHOLDER.search(line.text)]


def command_lines() -> list[str]:
    return sorted({line.text for line in doc_lines()})


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


def needs_root(line: str) -> str | None:
    """Why ``line`` needs root (or cannot run inside a test), or None."""
    words = shlex.split(line)
    if words[0] == "vagrant":
        return "a VM"
    if words[0] in FABRICLAB:
        command = words[1] if len(words) > 1 else ""
        if command in ROOT_COMMANDS:
            return f"fabriclab {command} needs root"
        if command == "run" and "--backend" not in words:
            return "an emulated run needs root"
        return None
    if words[0] == "make":
        return "make demo needs root" if "demo" in words else "make test is this test suite"
    if words[0] == "bash":
        return f"{words[1]} sets up the machine or runs the whole CI (root)"
    if not QUICK_BENCHMARKS.search(line):
        return "a benchmark: root or minutes (BENCHMARKS.md records its runs)"
    return None


def slow(line: str) -> str | None:
    return next((why for start, why in SLOW.items() if line.startswith(start)), None)


def test_the_docs_show_commands() -> None:
    lines = command_lines()
    assert any(line.startswith("make demo") for line in lines)
    assert any(line.startswith("make test") for line in lines)
    assert any(line.doc.startswith("docs/") for line in doc_lines())
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


def runs() -> list[tuple[str, list[str]]]:
    """(id, lines) to run in one scratch directory: each ```sh block's lines in order (all of
    them: a later line may read what an earlier one wrote), each inline line alone unless a
    block or an earlier span shows it."""
    in_blocks = {line.text for line in doc_lines() if line.block is not None}
    seen: set[str] = set()
    groups: dict[tuple[str, int | None, str], list[str]] = {}
    for line in doc_lines():
        if line.block is None and (line.text in in_blocks or line.text in seen):
            continue
        seen.add(line.text)
        key = (line.doc, line.block, "" if line.block is not None else line.text)
        groups.setdefault(key, []).append(line.text)
    return [(f"{doc}#{block}" if block is not None else f"{doc}:{text}", lines)
            for (doc, block, text), lines in groups.items()]


RUNS = runs()


def test_every_line_is_run_or_skipped_with_a_reason() -> None:
    ran = [line for _, lines in RUNS for line in lines
           if (line in RUNS_AS_ROOT or not needs_root(line)) and not slow(line)]
    for start in ("fabriclab plan", "fabriclab model", "fabriclab topo", "fabriclab allreduce",
                  "fabriclab examples", "fabriclab export-astra", "fabriclab import-astra",
                  "fabriclab simulate-astra", "fabriclab simulate-cluster", "fabriclab sweep",
                  ".venv/bin/python benchmarks/"):
        assert any(line.startswith(start) for line in ran), start
    assert any("--backend sim" in line for line in ran)
    assert {line.text for line in doc_lines()} == {line for _, lines in RUNS for line in lines}


@pytest.mark.parametrize(("where", "lines"), RUNS, ids=[r[0] for r in RUNS])
def test_lines_run_for_real(where: str, lines: list[str], tmp_path: Path) -> None:
    if not os.access(ROOT / ".venv" / "bin" / "fabriclab", os.X_OK):
        pytest.skip("no .venv in this checkout (make install)")
    env = {"PATH": f"{ROOT / 'bin'}:{SUDO_PATH}", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "PYTHONPATH": str(ROOT)}
    for name in SCRATCH_LINKS:  # the checkout, as seen from its root
        (tmp_path / name).symlink_to(ROOT / name)
    skipped = []
    for line in lines:
        why = slow(line) or (None if line in RUNS_AS_ROOT and is_root() else needs_root(line))
        if why:
            skipped.append(f"{line!r}: {why}")
            continue
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (f"{where}: {line!r} exit {proc.returncode}: "
                                      f"{proc.stderr.strip()[-500:]}")
        assert proc.stdout.strip(), f"{where}: {line!r} printed nothing"
        assert "Traceback" not in proc.stderr
    if len(skipped) == len(lines):
        pytest.skip("; ".join(skipped))


def test_vm_lines_are_not_run_by_the_suite() -> None:
    # `fabriclab vm box` once ran here as root: it built a 1.3 GB box and re-added it to vagrant
    for line in ("fabriclab vm box", "fabriclab vm build", "fabriclab vm check"):
        assert needs_root(line), line
