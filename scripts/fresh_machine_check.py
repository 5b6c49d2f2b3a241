"""The README's two commands on a fresh Debian 12, in a privileged container (root).

This machine cannot boot a stock Debian kernel (no hypervisor for ``vagrant up``), so the
nearest thing to a fresh machine is a privileged container started from the locally built
minimal bookworm image (``fabriclab/base:bookworm``: nothing installed beyond debootstrap's
minbase). A clean checkout (``git archive HEAD``) is copied in, then:

1. **install**, with the machine's network: ``apt-get install make`` (the README's note for
   images without it) and ``bash scripts/install.sh --test``, which is what ``make test``
   runs first. The container is then committed as an image.
2. **test and demo**, with no network at all (``--network none``), from that image:
   ``make test`` and then ``make demo``, verbatim. Both start with the install step again,
   which must now find nothing to do. Mininet, userspace Open vSwitch and the fabrics all
   run inside the container's own namespaces.

What a fresh machine *here* has besides Debian is passed in read-only: the machine's package
registries (``/etc/pip.conf``, ``/etc/xdg/pip``, ``/opt/pypi*``, ``/opt/wheels``), its ``PIP_*``
settings, and the CA bundle its TLS egress needs (mounted beside, not over, the file Debian's
``ca-certificates`` package will write).

Every container and the image it makes carry the label ``fabriclab-fresh=<id>`` and are
removed at the end, also on failure or Ctrl-C; the Docker engine is stopped if this started
it. Logs and a ``result.json`` (pass or fail and seconds per step) go to ``--out``.

    bash scripts/fresh-machine-check.sh [--out DIR] [--keep-image]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT))

from testbed.core.errors import FabricLabError  # noqa: E402
from testbed.emulator import docker_engine, images  # noqa: E402
from testbed.emulator.cleanup import STATE_DIR  # noqa: E402

LABEL = "fabriclab-fresh"
INSIDE = "/root/fabriclab"
# What --privileged would have given (see privileges()): /proc unmasked, /sys writable.
UNMASK = ("unmask proc and sys", "mount -t proc proc /proc && mount -o remount,rw /sys")
STEPS_INSTALL = [
    UNMASK,
    ("apt-get install make", "apt-get update -q && DEBIAN_FRONTEND=noninteractive "
                             "apt-get install -y -q make"),
    ("install.sh --test", "bash scripts/install.sh --test"),
    ("stop ovs", "/usr/share/openvswitch/scripts/ovs-ctl stop || true"),
]
STEPS_RUN = [UNMASK, ("make test", "make test"), ("make demo", "make demo")]
# Linux capabilities by bit number (linux/capability.h), to grant "all that we have".
CAPABILITIES = [
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE",
    "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
    "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
    "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ"]
# (PERFMON, BPF and CHECKPOINT_RESTORE, bits 38-40, are unknown to Debian 12's Docker 20.10)


MACHINE_CA = "/etc/fabriclab-machine/ca-certificates.crt"
REGISTRIES = ("/etc/pip.conf", "/etc/xdg/pip", "/opt/pypi", "/opt/pypi-more", "/opt/wheels")


def machine_volumes() -> dict:
    """The machine's registries and CA bundle, read-only (those that exist)."""
    vols = {p: {"bind": p, "mode": "ro"} for p in REGISTRIES if Path(p).exists()}
    ca = os.environ.get("SSL_CERT_FILE") or os.environ.get("PIP_CERT")
    if ca and Path(ca).is_file():
        vols[ca] = {"bind": MACHINE_CA, "mode": "ro"}
    return vols


def machine_environment() -> dict[str, str]:
    """This machine's pip settings, and its CA bundle where TLS clients look for one."""
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    if any(v["bind"] == MACHINE_CA for v in machine_volumes().values()):
        env |= dict.fromkeys(("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE",
                              "CURL_CA_BUNDLE"), MACHINE_CA)
    return env | {"DEBIAN_FRONTEND": "noninteractive"}


def privileges() -> dict:
    """Docker options for a container as privileged as this process can make one.

    ``--privileged`` asks for every capability, and runc fails where this process lacks one
    (these sandboxes withhold CAP_SYS_RESOURCE). So: every capability this process holds, no
    seccomp or AppArmor filter, /proc unmasked and /dev/net/tun (userspace OVS)."""
    held = int(Path("/proc/self/status").read_text().split("CapBnd:")[1].split()[0], 16)
    caps = [name for bit, name in enumerate(CAPABILITIES) if held >> bit & 1]
    if len(caps) == len(CAPABILITIES):
        return {"privileged": True}
    return {"cap_add": caps, "devices": ["/dev/net/tun:/dev/net/tun:rwm"],
            "security_opt": ["seccomp=unconfined", "apparmor=unconfined",
                             "label=disable"]}


def checkout_tar() -> bytes:
    """HEAD of this checkout as a tar with everything under fabriclab/ (a clean clone)."""
    out = subprocess.run(["git", "-C", str(CHECKOUT), "archive", "--format=tar",
                          "--prefix=fabriclab/", "HEAD"], capture_output=True, check=True)
    return out.stdout


def run_step(container, name: str, script: str, log_dir: Path) -> dict:
    """Run one step in the container's shell, its output to a log; return its record."""
    print(f"[{time.strftime('%H:%M:%S')}] {name} ...", flush=True)
    t0 = time.monotonic()
    api = container.client.api
    exec_id = api.exec_create(container.id, ["bash", "-lc", f"cd {INSIDE} && {script}"],
                              environment=machine_environment())["Id"]
    log = log_dir / f"{name.replace(' ', '-').replace('.', '')}.log"
    with open(log, "wb") as f:
        for chunk in api.exec_start(exec_id, stream=True):
            f.write(chunk)
    code = api.exec_inspect(exec_id)["ExitCode"]
    took = time.monotonic() - t0
    print(f"    exit {code} after {took:.0f} s (log: {log})", flush=True)
    return {"step": name, "exit_code": code, "seconds": round(took, 1), "log": str(log)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=CHECKOUT / "results" / "fresh-machine-check")
    ap.add_argument("--keep-image", action="store_true",
                    help="keep the committed install image (for a faster second look)")
    args = ap.parse_args()
    check_id = uuid.uuid4().hex[:8]
    log_dir = args.out / time.strftime("%Y%m%d-%H%M%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    started = docker_engine.start(STATE_DIR / "dockerd.log")
    client = docker_engine.client(timeout_s=7200)
    steps: list[dict] = []
    image_tag = f"fabriclab/fresh-check:{check_id}"
    try:
        if not images.exists(client, images.BASE_IMAGE):
            images.build_base(client)
        labels = {LABEL: check_id}
        box = client.containers.run(images.BASE_IMAGE, ["sleep", "infinity"], detach=True,
                                    **privileges(), network_mode="host", labels=labels,
                                    volumes=machine_volumes(),
                                    name=f"fabriclab-fresh-{check_id}-install")
        box.put_archive("/root", checkout_tar())
        for name, script in STEPS_INSTALL:
            steps.append(run_step(box, name, script, log_dir))
            if steps[-1]["exit_code"] != 0:
                raise FabricLabError(f"{name} failed: see {steps[-1]['log']}")
        box.stop(timeout=5)
        repo, tag = image_tag.split(":")
        box.commit(repository=repo, tag=tag, conf={"Labels": labels})
        box.remove(force=True)
        box = client.containers.run(image_tag, ["sleep", "infinity"], detach=True,
                                    **privileges(), network_mode="none", labels=labels,
                                    volumes=machine_volumes(),
                                    name=f"fabriclab-fresh-{check_id}-run")
        for name, script in STEPS_RUN:
            steps.append(run_step(box, name, script, log_dir))
    except FabricLabError as exc:
        print(f"fresh-machine check: {exc}", file=sys.stderr)
    except Exception as exc:  # the Docker SDK's errors: one line, then the cleanup below
        print(f"fresh-machine check: Docker refused: {exc}", file=sys.stderr)
    finally:
        for c in client.containers.list(all=True, filters={"label": f"{LABEL}={check_id}"}):
            c.remove(force=True)
        if not args.keep_image and images.exists(client, image_tag):
            client.images.remove(image_tag, force=True)
        docker_engine.stop(started)
    ok = len(steps) == len(STEPS_INSTALL) + len(STEPS_RUN) and all(
        s["exit_code"] == 0 for s in steps)
    record = {"date": time.strftime("%Y-%m-%d"), "base_image": images.BASE_IMAGE,
              "result": "pass" if ok else "fail", "steps": steps}
    (log_dir / "result.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
