"""The container images of container hosts, built on this machine (no registry is reachable).

Three layers, each built only when its tag is missing, so running it again is cheap:

``fabriclab/base:bookworm``
    a minimal Debian 12 (``debootstrap --variant=minbase``), made into an image with
    ``docker import``. Nothing else is in it; the fresh-machine check starts from it too.
``fabriclab/runtime:<digest>`` (and ``fabriclab/runtime-torch:<digest>``)
    Debian's python3 and a venv at ``/opt/fabriclab`` with the workers' dependencies (and, for
    ``-torch``, the CPU build of torch) at the versions and hashes of the project's locks:
    ``scripts/requirements.lock``'s pins of what the workers import and all they depend on
    (:mod:`testbed.core.lockfile`), plus ``scripts/torch-requirements.lock``. The host's pip
    downloads the wheels with ``--require-hashes`` and the image installs them with it again,
    so a wheel whose hash the lock does not list is refused on both sides. Tagged by the
    digest of those requirements.
``fabriclab/worker:<digest>`` (and ``fabriclab/worker-torch:<digest>``)
    the runtime plus this checkout's fabriclab, tagged by the digest of the code, so an
    experiment always runs the workers of the checkout that started it.

Built with the Docker SDK (``docker build`` with the host's network, for ``apt-get``).
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed.core import lockfile
from testbed.core.errors import FabricLabError
from testbed.core.host_runtime import TORCH_IMAGE, WORKER_IMAGE

CHECKOUT = Path(__file__).resolve().parents[2]
DOCKERFILES = CHECKOUT / "docker"
BASE_IMAGE = "fabriclab/base:bookworm"
RUNTIMES = {WORKER_IMAGE: "fabriclab/runtime", TORCH_IMAGE: "fabriclab/runtime-torch"}
LABEL = "fabriclab.image"  # on every image built here: which of the three layers it is
DEBIAN_MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("testbed", "sdn_app", "workloads", "analysis")
# What the workers import (workloads.worker and what it reaches), at requirements.lock's pins.
WORKER_DEPS = ["numpy", "pyarrow", "pydantic", "pyyaml"]
LOCK = CHECKOUT / "scripts" / "requirements.lock"
# The CPU build of torch and its dependencies (never the CUDA one: gigabytes), constrained to
# LOCK; regenerate: see scripts/torch-requirements.in.
TORCH_LOCK = CHECKOUT / "scripts" / "torch-requirements.lock"

Say = Callable[[str], None]


def code_digest() -> str:
    """12 hex digits that change whenever the code the workers run changes."""
    h = hashlib.sha256()
    files = [CHECKOUT / "pyproject.toml"]
    for pkg in PACKAGES:
        files += sorted(p for p in (CHECKOUT / pkg).rglob("*")
                        if p.suffix in (".py", ".j2") and "__pycache__" not in p.parts)
    for path in files:
        h.update(str(path.relative_to(CHECKOUT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def requirements(name: str) -> list[str]:
    """The runtime of ``name`` (a worker image name) as hashed requirements, one a line."""
    pins = lockfile.parse(LOCK.read_text())
    pins = {n: pins[n] for n in lockfile.closure(pins, WORKER_DEPS)}
    if name == TORCH_IMAGE:
        try:
            pins = lockfile.merge(pins, lockfile.parse(TORCH_LOCK.read_text()))
        except ValueError as exc:
            raise FabricLabError(f"{TORCH_LOCK.name} disagrees with {LOCK.name}: {exc} "
                                 "(regenerate it as scripts/torch-requirements.in says)") from None
    return [pins[n].requirement() for n in sorted(pins)]


def fetch_wheels(reqs: list[str], dest: Path) -> None:
    """Download the wheels of ``reqs`` into ``dest`` beside them as ``requirements.txt``; pip
    refuses (FabricLabError) any whose hash is not the requirement's."""
    dest.mkdir()
    (dest / "requirements.txt").write_text("\n".join(reqs) + "\n")
    _pip("download", "--only-binary=:all:", "--require-hashes", "-d", str(dest),
         "-r", str(dest / "requirements.txt"))


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def runtime_tag(name: str) -> str:
    dockerfile = (DOCKERFILES / "runtime.Dockerfile").read_text()
    return f"{RUNTIMES[name]}:{_digest(dockerfile, *requirements(name))}"


def resolve(image: str) -> str:
    """The image a spec's ``image`` means: the project's worker images are this checkout's
    tag of them; any other image is taken as given."""
    return f"{image}:{code_digest()}" if image in RUNTIMES else image


def exists(client: Any, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def build(client: Any, torch: bool = False, say: Say = print) -> list[str]:
    """Build whatever of base, runtime and worker image is missing; return the worker tags."""
    names = [WORKER_IMAGE] + ([TORCH_IMAGE] if torch else [])
    if not exists(client, BASE_IMAGE):
        build_base(client, say)
    tags = []
    for name in names:
        runtime = runtime_tag(name)
        if not exists(client, runtime):
            _build_runtime(client, name, runtime, say)
            _prune(client, RUNTIMES[name], "runtime", keep=runtime)
        tag = resolve(name)
        if not exists(client, tag):
            _build_worker(client, name, runtime, tag, say)
            _prune(client, name, "worker", keep=tag)
        else:
            say(f"{tag}: up to date")
        tags.append(tag)
    return tags


def ensure_worker(client: Any, image: str, say: Say = print) -> str:
    """The tag ``image`` (a spec's) means, built first if it is one of the project's worker
    images and only this checkout's thin layer is missing (seconds: the code changed since
    the last build). Raises FabricLabError naming the command when more is missing."""
    tag = resolve(image)
    if exists(client, tag) or image not in RUNTIMES:
        return tag
    runtime = runtime_tag(image)
    if not (exists(client, BASE_IMAGE) and exists(client, runtime)):
        command = "fabriclab images --torch" if image == TORCH_IMAGE else "fabriclab images"
        raise FabricLabError(f"the container image {tag} is not on this machine: build the "
                             f"project's images with `{command}` (once; no registry is "
                             "reachable from here)")
    say(f"{tag}: this checkout's code changed since the image was built; rebuilding its "
        "top layer")
    _build_worker(client, image, runtime, tag, say)
    _prune(client, image, "worker", keep=tag)
    return tag


def build_base(client: Any, say: Say = print, mirror: str = DEBIAN_MIRROR) -> None:
    """debootstrap a minimal bookworm and import it as :data:`BASE_IMAGE`."""
    if shutil.which("debootstrap") is None:
        raise FabricLabError("building the base image needs debootstrap: "
                             "`apt-get install debootstrap` (scripts/install.sh does)")
    with tempfile.TemporaryDirectory(prefix="fabriclab-base-", dir="/var/tmp") as tmp:
        rootfs, tarball = Path(tmp) / "rootfs", Path(tmp) / "rootfs.tar"
        say(f"{BASE_IMAGE}: debootstrap --variant=minbase bookworm (about 30 s)")
        out = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs),
                              mirror], capture_output=True, text=True)
        if out.returncode != 0:
            tail = (out.stderr or out.stdout).strip().splitlines()[-1:]
            raise FabricLabError(f"debootstrap from {mirror} failed: {' '.join(tail)}")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        repo, tag = BASE_IMAGE.split(":")
        client.api.import_image_from_file(str(tarball), repository=repo, tag=tag,
                                          changes=[f"LABEL {LABEL}=base",
                                                   'CMD ["/bin/bash"]'])
    if not exists(client, BASE_IMAGE):
        raise FabricLabError(f"docker import did not make {BASE_IMAGE}")
    say(f"{BASE_IMAGE}: built")


def _pip(*args: str) -> None:
    out = subprocess.run([sys.executable, "-m", "pip", *args, "-q",
                          "--disable-pip-version-check"], capture_output=True, text=True)
    if out.returncode != 0:
        lines = [ln for ln in out.stderr.strip().splitlines() if "WARNING" not in ln]
        raise FabricLabError(f"pip {args[0]} failed: {' '.join(lines[-2:])}")


def _build_runtime(client: Any, name: str, tag: str, say: Say) -> None:
    reqs = requirements(name)
    with tempfile.TemporaryDirectory(prefix="fabriclab-runtime-", dir="/var/tmp") as ctx:
        say(f"{tag}: downloading {', '.join(r.split()[0] for r in reqs)} (hashes checked)")
        fetch_wheels(reqs, Path(ctx) / "wheels")
        shutil.copy(DOCKERFILES / "runtime.Dockerfile", Path(ctx) / "Dockerfile")
        _docker_build(client, ctx, tag, {"BASE": BASE_IMAGE}, "runtime", say)


def _build_worker(client: Any, name: str, runtime: str, tag: str, say: Say) -> None:
    with tempfile.TemporaryDirectory(prefix="fabriclab-worker-", dir="/var/tmp") as ctx:
        wheels = Path(ctx) / "wheels"
        say(f"{tag}: packaging this checkout")
        src = Path(ctx) / "src"  # a copy: building in the checkout would leave build/ there
        for pkg in PACKAGES:
            shutil.copytree(CHECKOUT / pkg, src / pkg,
                            ignore=shutil.ignore_patterns("__pycache__"))
        for name_ in ("pyproject.toml", "README.md"):
            shutil.copy(CHECKOUT / name_, src / name_)
        _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src))
        shutil.rmtree(src)
        shutil.copy(DOCKERFILES / "worker.Dockerfile", Path(ctx) / "Dockerfile")
        _docker_build(client, ctx, tag, {"RUNTIME": runtime}, "worker", say)


def _docker_build(client: Any, ctx: str, tag: str, args: dict[str, str], layer: str,
                  say: Say) -> None:
    say(f"{tag}: docker build")
    last = ""
    for chunk in client.api.build(path=ctx, tag=tag, buildargs=args, network_mode="host",
                                  rm=True, forcerm=True, labels={LABEL: layer}, decode=True):
        if "error" in chunk:
            raise FabricLabError(f"docker build of {tag} failed: {chunk['error'].strip()} "
                                 f"(after: {last})")
        text = chunk.get("stream", "").strip()
        if text.startswith("Step "):
            last = text
            say(f"  {text}")
    if not exists(client, tag):
        raise FabricLabError(f"docker build did not make {tag}")


def _prune(client: Any, name: str, layer: str, keep: str) -> None:
    """Remove older tags of an image this module built (not forced: one in use stays)."""
    for image in client.images.list(name=name, filters={"label": f"{LABEL}={layer}"}):
        for tag in image.tags:
            if tag != keep:
                with contextlib.suppress(Exception):  # in use by a container: kept
                    client.images.remove(tag)
