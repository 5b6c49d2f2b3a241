"""Medium 7 of issue 27, for the worker images: their runtime installs only what the project's
locks pin, each wheel checked against its hash on the host and again in the image."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from testbed.core import lockfile
from testbed.core.errors import FabricLabError
from testbed.core.host_runtime import TORCH_IMAGE, WORKER_IMAGE
from testbed.emulator import images

LOCK_TEXT = """\
pydantic==2.14.4 \\
    --hash=sha256:{a}
    # via fabriclab (../pyproject.toml)
pydantic-core==2.50.5 \\
    --hash=sha256:{b} \\
    --hash=sha256:{c}
    # via pydantic
typing-extensions==4.16.0 \\
    --hash=sha256:{d}
    # via
    #   -c requirements.lock
    #   pydantic
    #   pydantic-core
rich==1.0 \\
    --hash=sha256:{e}
    # via fabriclab (../pyproject.toml)
""".format(**{k: k * 64 for k in "abcde"})


def test_a_lock_is_read_with_every_hash_and_the_closure_of_its_roots():
    pins = lockfile.parse(LOCK_TEXT)
    assert pins["pydantic-core"].hashes == ("sha256:" + "b" * 64, "sha256:" + "c" * 64)
    assert pins["typing-extensions"].via == {"pydantic", "pydantic-core"}
    assert lockfile.closure(pins, ["Pydantic"]) == ["pydantic", "pydantic-core",
                                                    "typing-extensions"]
    assert pins["pydantic"].requirement() == "pydantic==2.14.4 --hash=sha256:" + "a" * 64
    with pytest.raises(KeyError):
        lockfile.closure(pins, ["numpy"])
    with pytest.raises(ValueError, match=r"rich is pinned to 1\.0 and to 2\.0"):
        lockfile.merge(pins, {"rich": lockfile.Pin("rich", "2.0", (), frozenset())})


@pytest.mark.parametrize("image", [WORKER_IMAGE, TORCH_IMAGE])
def test_every_runtime_requirement_is_pinned_and_hashed(image):
    reqs = images.requirements(image)
    names = {r.split("==")[0] for r in reqs}
    # what the workers import, and what those need (pydantic's core, its typing packages)
    assert {"numpy", "pyarrow", "pydantic", "pydantic-core", "pyyaml",
            "typing-extensions"} <= names
    assert ("torch" in names) == (image == TORCH_IMAGE)
    for req in reqs:
        assert "==" in req.split()[0] and "--hash=sha256:" in req, req
        assert all(word.startswith("--hash=sha256:") for word in req.split()[1:]), req
    if image == TORCH_IMAGE:
        assert any(r.startswith("torch==2.13.0+cpu --hash=") for r in reqs)


def test_the_runtime_image_installs_offline_with_hashes_required():
    dockerfile = (images.DOCKERFILES / "runtime.Dockerfile").read_text()
    install = dockerfile[dockerfile.index("pip install"):].split("&&")[0]
    assert "--require-hashes" in install and "--no-index" in install


def _wheel(where: Path) -> Path:
    """A minimal pure-Python wheel, ``hashprobe`` 1.0 (no network needed to fetch it)."""
    path = where / "hashprobe-1.0-py3-none-any.whl"
    files = {"hashprobe/__init__.py": b"",
             "hashprobe-1.0.dist-info/METADATA":
                 b"Metadata-Version: 2.1\nName: hashprobe\nVersion: 1.0\n",
             "hashprobe-1.0.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                 b"Tag: py3-none-any\n"}

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{name},sha256={digest(data)},{len(data)}\n"
                     for name, data in files.items()) + "hashprobe-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("hashprobe-1.0.dist-info/RECORD", record)
    return path


def test_a_wheel_whose_hash_the_lock_does_not_list_is_refused(tmp_path, monkeypatch):
    # pip sees only a local directory: no index, no configuration of this machine
    links = tmp_path / "links"
    links.mkdir()
    wheel = _wheel(links)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    good = hashlib.sha256(wheel.read_bytes()).hexdigest()
    images.fetch_wheels([f"hashprobe==1.0 --hash=sha256:{good}"], tmp_path / "ok")
    assert (tmp_path / "ok" / wheel.name).read_bytes() == wheel.read_bytes()
    tampered = ("0" if good[0] != "0" else "1") + good[1:]
    with pytest.raises(FabricLabError, match="pip download failed"):
        images.fetch_wheels([f"hashprobe==1.0 --hash=sha256:{tampered}"], tmp_path / "bad")
    assert not (tmp_path / "bad" / wheel.name).exists()
    with pytest.raises(FabricLabError, match="pip download failed"):  # no hash at all
        images.fetch_wheels(["hashprobe==1.0"], tmp_path / "bare")
