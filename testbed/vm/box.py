"""The local Vagrant box (libvirt provider), made from the VM image.

No box catalogue is reachable from these machines, so ``fabriclab vm box`` makes one: a copy
of the image's root file system with a ``vagrant`` user (passwordless sudo, a key pair made
here), sshd (host keys made at first boot, so no two VMs share them), and the box's own
Vagrantfile. The box has no bootloader: libvirt boots Debian's kernel directly, from
``/var/lib/libvirt/boot`` (where the QEMU that libvirt starts may read it).

The box's Vagrantfile holds what makes it work without a bridge on the host: libvirt's
management network is not attached; the guest's one NIC is QEMU's user-mode network, with
SSH forwarded to a port on 127.0.0.1; a second user-mode NIC is declared so that
vagrant-libvirt has a MAC to match, and its agent channel (``qemu-guest-agent``) reports the
address. The SSH NIC's user-mode network is 10.0.3.0/24, not QEMU's default 10.0.2.0/24:
with both NICs at 10.0.2.15 the guest answered SSH through the other one, and vagrant never
got a banner. The domain type is ``qemu`` (TCG) where there is no hardware virtualisation, ``kvm``
where there is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from testbed.core.atomic import write_json, write_text
from testbed.core.errors import FabricLabError
from testbed.core.safe_paths import own_or_new_dir
from testbed.vm import image as vm_image
from testbed.vm.machine import TCG_CPU_MODEL, accelerator

BOOT_DIR = Path("/var/lib/libvirt/boot")
BOX_RECIPE_VERSION = "3"  # bump when build() changes what goes into the box
SSH_PORT = int(os.environ.get("FABRICLAB_BOX_SSH_PORT", "2222"))
SSH_KEEPALIVE = "ClientAliveInterval 30\n"
# Under TCG a 4-vCPU guest took more than vagrant's default 300 s to reach sshd on a busy host.

SSH_NETDEV = (f"user,id=fabriclab-ssh,net=10.0.3.0/24,"
              f"hostfwd=tcp:127.0.0.1:{SSH_PORT}-10.0.3.15:22")
# sshd's host keys made at its first start, then Debian's own check of the configuration
# (which fails without keys: the drop-in clears the unit's ExecStartPre and puts both back)
HOST_KEYS = ("[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\n"
             "ExecStartPre=/usr/sbin/sshd -t\n")

BOX_VAGRANTFILE = """# The box's own settings (testbed/vm/box.py): boot Debian's kernel directly,
# and reach the guest through QEMU's user-mode network only (no bridge, no address here).
Vagrant.configure("2") do |config|
  config.ssh.host = "127.0.0.1"
  config.ssh.port = {port}
  config.ssh.private_key_path = "{key}"
  config.ssh.insert_key = false
  config.vm.boot_timeout = {boot_timeout}
  config.vm.network :public_network, libvirt__type: "user", auto_config: false
  config.vm.provider :libvirt do |l|
    l.driver = "{driver}"
{cpu}    l.kernel = "{kernel}"
    l.initrd = "{initrd}"
    l.cmd_line = "root=/dev/vda rw console=ttyS0"
    l.mgmt_attach = false
    l.qemu_use_agent = true
    l.graphics_type = "none"
    l.video_type = "none"
    l.qemuargs value: "-netdev"
    l.qemuargs value: "{netdev}"
    l.qemuargs value: "-device"
    l.qemuargs value: "virtio-net-pci,netdev=fabriclab-ssh,bus=pci.0,addr=0x10"
  end
end
"""


def cpu_lines(driver: str) -> str:
    """The box's CPU under TCG: the model :data:`machine.TCG_CPU_MODEL` names, as ``vm run`` and
    ``vm check`` boot (vagrant-libvirt's default, host-model, follows this machine's CPU, AVX2
    included); under KVM, the default."""
    if driver == "kvm":
        return ""
    return f'    l.cpu_mode = "custom"\n    l.cpu_model = "{TCG_CPU_MODEL}"\n'


def box_dir() -> Path:
    """The box's directory, keyed on the image's recipe and on what this module adds."""
    host_cas = HOST_BUNDLE.read_text() if HOST_BUNDLE.is_file() else ""
    added = hashlib.sha256((BOX_RECIPE_VERSION + BOX_VAGRANTFILE + TCG_CPU_MODEL + SSH_NETDEV
                            + SSH_KEEPALIVE + HOST_KEYS + host_cas).encode())
    return vm_image.CACHE_DIR / f"box-{vm_image.recipe_key()}-{added.hexdigest()[:6]}"


def build(say=print) -> Path:
    """The box file of this image (built if missing)."""
    image = vm_image.ensure(say)
    dest = box_dir()
    box = dest / "fabriclab-bookworm.box"
    if box.is_file():
        return box
    if dest.exists():
        vm_image.remove_build_dir(dest)
    own_or_new_dir(dest, 0o700)
    key = dest / "vagrant_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fabriclab-box",
                    "-f", str(key)], check=True)
    root = dest / "rootfs"
    say("vm box: copying the image's file system and adding the vagrant user")
    subprocess.run(["cp", "-a", str(image.rootfs), str(root)], check=True)
    _add_vagrant_user(root, (key.with_suffix(".pub")).read_text())
    _trust_what_the_host_trusts(root)
    # a name the Vagrantfile's hostname is not a word of: vagrant adds "fabriclab" to
    # /etc/hosts only if `grep -w fabriclab` finds nothing, and it found "fabriclab-vm"
    write_text(root / "etc/hostname", "bookworm\n")
    write_text(root / "etc/hosts", "127.0.0.1 localhost\n127.0.1.1 bookworm\n")
    own_or_new_dir(BOOT_DIR, 0o711)
    kernel = BOOT_DIR / f"fabriclab-{vm_image.recipe_key()}-vmlinuz"
    initrd = BOOT_DIR / f"fabriclab-{vm_image.recipe_key()}-initrd.img"
    shutil.copy(image.kernel, kernel)
    shutil.copy(image.initrd, initrd)
    say("vm box: file system, qcow2 and box")
    vm_image.qcow2_from_tree(root, dest / "box.img")
    shutil.rmtree(root)
    write_json(dest / "metadata.json", {"provider": "libvirt", "format": "qcow2",
                                        "virtual_size": vm_image.IMAGE_SIZE_BYTES // 1024**3})
    driver = "kvm" if accelerator() == "kvm" else "qemu"
    write_text(dest / "Vagrantfile", BOX_VAGRANTFILE.format(
        port=SSH_PORT, key=key, driver=driver, kernel=kernel, initrd=initrd, netdev=SSH_NETDEV,
        cpu=cpu_lines(driver),
        boot_timeout=300 if driver == "kvm" else 1200))
    partial = box.with_suffix(".partial")
    with tarfile.open(partial, "w") as tar:
        for name in ("metadata.json", "Vagrantfile", "box.img"):
            tar.add(dest / name, arcname=name)
    (dest / "box.img").unlink()
    os.rename(partial, box)
    return box


HOST_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


def extra_certificates(host_bundle: str, guest_bundle: str) -> list[str]:
    """The certificates of this machine's CA bundle that the guest's lacks (PEM blocks)."""
    have = {" ".join(c.split()) for c in _PEM.findall(guest_bundle)}
    return [c for c in _PEM.findall(host_bundle) if " ".join(c.split()) not in have]


def _trust_what_the_host_trusts(root: Path) -> None:
    """The guest reaches the internet through this machine: where this machine trusts a CA
    Debian does not ship (a TLS-inspecting proxy's), the box trusts it too, or provisioning
    cannot reach the Python registry (pip saw a self-signed certificate)."""
    if not HOST_BUNDLE.is_file():
        return
    extra = extra_certificates(HOST_BUNDLE.read_text(),
                               (root / "etc/ssl/certs/ca-certificates.crt").read_text())
    local = root / "usr/local/share/ca-certificates"
    local.mkdir(parents=True, exist_ok=True)
    for i, cert in enumerate(extra):
        write_text(local / f"fabriclab-host-{i}.crt", cert + "\n")
    if extra:
        vm_image.run_tool(["chroot", str(root), "update-ca-certificates"], "update-ca-certificates")


def _add_vagrant_user(root: Path, public_key: str) -> None:
    """A ``vagrant`` user with passwordless sudo and ``public_key``; sshd keys at first boot."""
    vm_image.run_tool(["chroot", str(root), "useradd", "-m", "-s", "/bin/bash", "vagrant"],
                      "useradd vagrant")
    write_text(root / "etc/sudoers.d/vagrant", "vagrant ALL=(ALL) NOPASSWD:ALL\n", 0o440)
    ssh = root / "home/vagrant/.ssh"
    ssh.mkdir(mode=0o700)
    write_text(ssh / "authorized_keys", public_key, 0o600)
    ids = root / "etc/passwd"
    uid, gid = next((int(f[2]), int(f[3])) for f in
                    (ln.split(":") for ln in ids.read_text().splitlines()) if f[0] == "vagrant")
    for p in (ssh, ssh / "authorized_keys"):
        os.chown(p, uid, gid)
    for old in (root / "etc/ssh").glob("ssh_host_*"):
        old.unlink()
    dropin = root / "etc/systemd/system/ssh.service.d"
    dropin.mkdir(parents=True, exist_ok=True)
    write_text(dropin / "host-keys.conf", HOST_KEYS)
    write_text(root / "etc/ssh/sshd_config.d/fabriclab.conf", SSH_KEEPALIVE)


def add(box: Path, name: str) -> None:
    """``vagrant box add --force`` (replacing an older build of the same name)."""
    out = subprocess.run(["vagrant", "box", "add", "--force", "--name", name, str(box)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise FabricLabError(f"vagrant box add failed: {out.stderr.strip()[-300:]}")


def build_and_add(name: str) -> str:
    box = build()
    add(box, name)
    return f"{box} added as {name}; `vagrant up --provider libvirt` in the checkout uses it"


def info() -> dict:
    return json.loads((box_dir() / "metadata.json").read_text())
