"""Medium 7 of issue 27: what root installs is locked and hashed, and no floor admits a release
with a known hole (pyarrow CVE-2023-47248, grpcio CVE-2024-7246)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "scripts" / "requirements.lock"
# (package, the releases the CVE reaches that a floor must shut out)
VULNERABLE = {"pyarrow": ["14.0.0", "0.14.0"],  # CVE-2023-47248: 0.14.0 to 14.0.0
              "grpcio": ["1.60.0", "1.60.1", "1.61.2", "1.64.2", "1.65.3"]}  # CVE-2024-7246


def requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in project["dependencies"]
            + extras["test"] + extras["rpc"] + extras["docker"]]


def pins() -> dict[str, tuple[Version, int]]:
    """{package: (pinned version, number of hashes)} from the lock."""
    found: dict[str, tuple[Version, int]] = {}
    name = None
    for line in LOCK.read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line):
            name = m.group(1).lower()
            found[name] = (Version(m.group(2)), 0)
        elif name and "--hash=sha256:" in line:
            version, n = found[name]
            found[name] = (version, n + 1)
    return found


def test_no_floor_admits_a_vulnerable_release():
    for req in requirements():
        for bad in VULNERABLE.get(req.name, []):
            assert not req.specifier.contains(bad), f"{req} admits {req.name} {bad}"
    assert {r.name for r in requirements()} >= set(VULNERABLE)


def test_the_lock_pins_every_requirement_within_its_range_and_hashes_each():
    locked = pins()
    assert locked and all(n >= 1 for _, n in locked.values())
    for req in requirements():
        version, _ = locked[req.name.lower()]
        assert req.specifier.contains(version), f"{req.name} {version} is not {req.specifier}"
        assert str(version) not in VULNERABLE.get(req.name, [])


def test_install_takes_the_dependencies_from_the_lock_with_hashes_only():
    script = (ROOT / "scripts" / "install.sh").read_text()
    assert "--require-hashes -r \"$LOCK\"" in script and "LOCK=scripts/requirements.lock" in script
    installs = [ln for ln in script.splitlines() if "pip\" install" in ln]
    assert len(installs) == 2 and "--no-deps" in installs[1]  # fabriclab itself, nothing more
