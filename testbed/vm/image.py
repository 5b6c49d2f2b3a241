"""The stock-kernel Debian 12 VM image, built from the package archive and cached.

``debootstrap --variant=minbase`` of bookworm with Debian's own kernel and what
``scripts/install.sh`` installs (``scripts/packages/``), so provisioning inside finds its Debian
packages present and only the venv is left to make. The image is keyed on its recipe (the
package lists, the mirror and the files written into it): a change to any makes a new key.

Cache layout, under :data:`CACHE_DIR` (root's, made here, never through a symlink)::

    <key>/rootfs/       the debootstrapped tree (kept: the Vagrant box is made from it)
    <key>/base.qcow2    the root file system, read-only base of every throwaway overlay
    <key>/vmlinuz, <key>/initrd.img
    <key>/image.json    what was built, when, and how long each stage took
    debs/               debootstrap's package cache, shared by every key

A build happens in ``<key>.partial`` and is renamed into place only when complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testbed.core.atomic import write_json, write_text
from testbed.core.errors import FabricLabError
from testbed.core.safe_paths import own_or_new_dir

CHECKOUT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("FABRICLAB_VM_CACHE", "/var/cache/fabriclab/vm"))
MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
# The VM boots Debian's kernel directly (no bootloader): these make it a machine.
BOOT_PACKAGES = ("linux-image-amd64", "systemd-sysv", "udev", "kmod", "initramfs-tools",
                 "ca-certificates", "python3")
# What the Vagrant box adds (vagrant logs in over ssh and syncs the checkout with rsync).
BOX_PACKAGES = ("openssh-server", "sudo", "rsync", "qemu-guest-agent")
IMAGE_SIZE_BYTES = 12 * 1024**3  # sparse: the qcow2 holds only what is written
RECIPE_VERSION = "1"  # bump when the code below changes what goes into the image

Say = Callable[[str], None]

# Written into the image: the guest side of testbed.vm.machine's job protocol.
JOB_SCRIPT = (Path(__file__).parent / "guest_job.sh").read_text()


JOB_UNIT = """[Unit]
Description=fabriclab: run the job the host shared, then power off
ConditionKernelCommandLine=fabriclab.job
After=network.target systemd-networkd.service openvswitch-switch.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/fabriclab-vm-job
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
"""

NETWORK = """[Match]
Name=en* eth*

[Network]
DHCP=ipv4
"""

# Written as (path in the image, text, mode); a part of the recipe's key.
FILES: tuple[tuple[str, str, int], ...] = (
    ("etc/hostname", "fabriclab-vm\n", 0o644),
    ("etc/hosts", "127.0.0.1 localhost\n127.0.1.1 fabriclab-vm\n", 0o644),
    ("etc/fstab", "/dev/vda / ext4 defaults 0 1\n", 0o644),
    ("etc/resolv.conf", "nameserver 10.0.2.3\n", 0o644),  # QEMU user-mode network's DNS
    ("etc/systemd/network/10-user.network", NETWORK, 0o644),
    ("usr/local/sbin/fabriclab-vm-job", JOB_SCRIPT, 0o755),
    ("etc/systemd/system/fabriclab-vm-job.service", JOB_UNIT, 0o644),
)
ENABLE = {  # unit -> the target that wants it
    "systemd-networkd.service": "multi-user.target",
    "fabriclab-vm-job.service": "multi-user.target",
}
# fabriclab starts the Docker engine itself when a run has container hosts (and stops it
# after); started at boot it costs a software-emulated VM half a minute for nothing.
MASK = ("docker.service", "docker.socket", "containerd.service")


def package_list(name: str) -> list[str]:
    """The packages of ``scripts/packages/<name>`` (install.sh reads the same files)."""
    path = CHECKOUT / "scripts" / "packages" / name
    names = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return [n for n in names if n]


def packages() -> list[str]:
    """Every package the image holds, sorted."""
    return sorted({*BOOT_PACKAGES, *BOX_PACKAGES, *package_list("apt.txt"),
                   *package_list("apt-test.txt")})


def recipe_key() -> str:
    """12 hex digits naming this recipe: packages, mirror, suite, written files, version."""
    parts = [RECIPE_VERSION, MIRROR, SUITE, *packages(), *MASK,
             *(f"{p}\0{t}\0{m:o}" for p, t, m in FILES),
             *(f"{unit}>{target}" for unit, target in sorted(ENABLE.items()))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Image:
    """A built image: its directory and the files a boot needs."""

    path: Path

    @property
    def disk(self) -> Path:
        return self.path / "base.qcow2"

    @property
    def kernel(self) -> Path:
        return self.path / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.path / "initrd.img"

    @property
    def rootfs(self) -> Path:
        return self.path / "rootfs"

    @property
    def info(self) -> dict:
        return json.loads((self.path / "image.json").read_text())


def cached() -> Image | None:
    """The image of this recipe if it is built, else None."""
    path = CACHE_DIR / recipe_key()
    return Image(path) if (path / "image.json").is_file() else None


def ensure(say: Say = print, rebuild: bool = False) -> Image:
    """The image of this recipe, built first if it is not cached (or ``rebuild``)."""
    image = cached()
    if image is not None and not rebuild:
        return image
    for tool, package in (("debootstrap", "debootstrap"), ("qemu-img", "qemu-utils"),
                          ("mkfs.ext4", "e2fsprogs")):
        if shutil.which(tool) is None:
            raise FabricLabError(f"building the VM image needs {tool}: "
                                 f"`apt-get install {package}`")
    own_or_new_dir(CACHE_DIR.parent, 0o755)
    own_or_new_dir(CACHE_DIR, 0o700)
    key = recipe_key()
    final, partial = CACHE_DIR / key, CACHE_DIR / f"{key}.partial"
    for stale in (partial, final):
        if os.path.lexists(stale):
            remove_build_dir(stale)
    os.mkdir(partial, 0o700)
    times: dict[str, float] = {}
    try:
        _build(partial, say, times)
        write_json(partial / "image.json", {
            "key": key, "suite": SUITE, "mirror": MIRROR, "packages": packages(),
            "kernel": _kernel_version(partial / "rootfs"),
            "built_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "stage_s": times})
        os.rename(partial, final)
    except BaseException:
        remove_build_dir(partial)
        raise
    return Image(final)


def remove_build_dir(path: Path) -> None:
    """Remove a build directory (the image's, the box's); refuse while anything is mounted
    inside it."""
    for point in sorted(_mounted_under(path), reverse=True):
        subprocess.run(["umount", point], capture_output=True, check=False)
    if still := _mounted_under(path):
        raise FabricLabError(f"{still[0]} is still mounted: unmount it, then build again")
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


def run_tool(args: list[str], what: str, **kwargs: object) -> None:
    """Run a build tool; if it fails, one sentence: ``what`` failed, and its last words."""
    out = subprocess.run(args, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if out.returncode != 0:
        tail = " ".join((out.stderr or out.stdout).strip().splitlines()[-2:])
        raise FabricLabError(f"{what} failed: {tail}")


def _build(dest: Path, say: Say, times: dict[str, float]) -> None:
    rootfs = dest / "rootfs"
    debs = own_or_new_dir(CACHE_DIR / "debs", 0o700)
    t0 = time.monotonic()
    say(f"vm image: debootstrap {SUITE} with Debian's kernel (a minute or two)")
    run_tool(["debootstrap", "--variant=minbase", f"--cache-dir={debs}",
              "--include=" + ",".join(BOOT_PACKAGES), SUITE, str(rootfs), MIRROR],
             f"debootstrap from {MIRROR}")
    rest = [p for p in packages() if p not in BOOT_PACKAGES]
    say(f"vm image: apt-get install {len(rest)} packages and their dependencies (a few "
        "minutes from a cold cache)")
    _apt_install(rootfs, debs, rest)
    times["debootstrap_s"] = round(time.monotonic() - t0, 1)
    t0 = time.monotonic()
    configure(rootfs)
    boot = rootfs / "boot"
    kernels = sorted(boot.glob("vmlinuz-*"))
    if not kernels:
        raise FabricLabError("debootstrap installed no kernel (linux-image-amd64)")
    version = kernels[-1].name.removeprefix("vmlinuz-")
    shutil.copy(kernels[-1], dest / "vmlinuz")
    shutil.copy(boot / f"initrd.img-{version}", dest / "initrd.img")
    say("vm image: file system and qcow2")
    qcow2_from_tree(rootfs, dest / "base.qcow2")
    times["image_s"] = round(time.monotonic() - t0, 1)


def qcow2_from_tree(rootfs: Path, qcow2: Path) -> None:
    """An ext4 file system of :data:`IMAGE_SIZE_BYTES` holding ``rootfs``, as a qcow2 disk
    (a raw file beside ``qcow2`` while it is made)."""
    raw = qcow2.with_suffix(".raw")
    with open(raw, "wb") as f:
        f.truncate(IMAGE_SIZE_BYTES)
    try:
        run_tool(["mkfs.ext4", "-q", "-F", "-L", "fabriclab", "-d", str(rootfs), str(raw)],
                 "mkfs.ext4")
        run_tool(["qemu-img", "convert", "-O", "qcow2", str(raw), str(qcow2)],
                 "qemu-img convert")
    finally:
        raw.unlink()


def _apt_install(rootfs: Path, debs: Path, names: list[str]) -> None:
    """``apt-get install`` in a chroot of ``rootfs`` (one transaction: apt orders the
    configuration, which debootstrap's ``--include`` does not), services not started, the
    downloaded packages kept in ``debs``."""
    policy = rootfs / "usr/sbin/policy-rc.d"
    write_text(policy, "#!/bin/sh\nexit 101\n", 0o755)  # no service starts in the chroot
    resolv = rootfs / "etc/resolv.conf"
    if resolv.is_symlink():
        resolv.unlink()
    shutil.copy("/etc/resolv.conf", resolv)  # the archive, as this machine reaches it
    archives = rootfs / "var/cache/apt/archives"
    mounts = [rootfs / "proc", archives]
    try:
        run_tool(["mount", "-t", "proc", "proc", str(mounts[0])], "mount proc in the chroot")
        run_tool(["mount", "--bind", str(debs), str(archives)], "bind the package cache")
        env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
               "LC_ALL": "C"}
        run_tool(["chroot", str(rootfs), "apt-get", "update", "-q"], "apt-get update (chroot)",
                 env=env)
        run_tool(["chroot", str(rootfs), "apt-get", "install", "-y", "-q",
                  "--no-install-recommends", *names], "apt-get install (chroot)", env=env)
    finally:
        for m in reversed(mounts):
            subprocess.run(["umount", str(m)], capture_output=True, check=False)
        policy.unlink(missing_ok=True)
    run_tool(["chroot", str(rootfs), "apt-get", "clean"], "apt-get clean (chroot)")


def _mounted_under(path: Path) -> list[str]:
    """Mount points at or under ``path`` (from /proc/self/mounts)."""
    prefix = str(path.resolve())
    points = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


def configure(rootfs: Path) -> None:
    """Write :data:`FILES` into ``rootfs``, enable and mask units, lock root's password."""
    for rel, text, mode in FILES:
        path = rootfs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():  # Debian's resolv.conf may be one
            path.unlink()
        write_text(path, text, mode)
    systemd = rootfs / "etc/systemd/system"
    for unit, target in ENABLE.items():
        wants = systemd / f"{target}.wants"
        wants.mkdir(parents=True, exist_ok=True)
        link = wants / unit
        if not link.is_symlink():
            where = "etc/systemd/system" if (systemd / unit).exists() else "lib/systemd/system"
            link.symlink_to(f"/{where}/{unit}")
    for unit in MASK:
        link = systemd / unit
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to("/dev/null")


def _kernel_version(rootfs: Path) -> str:
    kernels = sorted((rootfs / "boot").glob("vmlinuz-*"))
    return kernels[-1].name.removeprefix("vmlinuz-") if kernels else "unknown"
