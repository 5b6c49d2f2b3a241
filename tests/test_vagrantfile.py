"""The Vagrantfile is valid: `vagrant validate` where vagrant is installed, else Ruby syntax."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_vagrantfile_validates(tmp_path):
    text = (ROOT / "Vagrantfile").read_text()
    assert 'config.vm.box = "debian/bookworm64"' in text
    assert "bash scripts/install.sh" in text and "/vagrant" in text
    assert "cpus = 4" in text and "memory = 8192" in text
    if shutil.which("vagrant"):
        shutil.copy(ROOT / "Vagrantfile", tmp_path / "Vagrantfile")  # validate writes .vagrant/
        out = subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "validated successfully" in out.stdout
    elif shutil.which("ruby"):
        out = subprocess.run(["ruby", "-c", str(ROOT / "Vagrantfile")], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0 and "Syntax OK" in out.stdout
    else:
        pytest.skip("neither vagrant nor ruby is installed (make test installs vagrant)")
