"""Boot a throwaway copy of the VM image, run one job inside, bring back what it wrote.

The protocol (the guest side is :data:`testbed.vm.image.JOB_SCRIPT`): the host shares a ``job``
directory over 9p holding ``run.sh`` and an empty ``out/``; the guest boots with
``fabriclab.job`` on its kernel command line, runs ``run.sh`` as root, appends progress lines to
``out/progress.log``, writes ``out/exit-code`` and powers off. Other shares (``src``, the
checkout; ``wheels``, the Python wheels) are mounted read-only at ``/mnt/<tag>``.

Each boot gets its own copy-on-write overlay of the image's disk, in a directory made for it
under ``CACHE_DIR/runs`` and removed at the end, also on failure or Ctrl-C. QEMU is this
process's child, asked by the kernel to die with it (``PR_SET_PDEATHSIG``), and its PID and
start time are recorded beside the overlay, so a directory left by a killed run is removed
at the next boot once that QEMU is verifiably gone. The guest's only network is QEMU's
user-mode network (it reaches the package archive as this machine does): no bridge, no address
in this machine's namespaces.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from testbed.core.atomic import write_json, write_text
from testbed.core.errors import FabricLabError
from testbed.core.safe_paths import make_dir, own_or_new_dir
from testbed.vm.image import CACHE_DIR, Image

QEMU = "qemu-system-x86_64"
# The guest CPU under TCG: a named model without AVX. QEMU 7.2's TCG (Debian 12's) emulates
# AVX2 since 7.2, and numpy's AVX2 argsort of float64 returns wrong orders on it (`-cpu max`:
# 169-182 of 200 rounds wrong in 5 repeats; pandas then segfaulted in a groupby of the smoke
# set). Nehalem (SSE4.2 and POPCNT, numpy's baseline) gave none wrong, in 0.66x the time.
# Measured by `benchmarks/tcg_cpu_models.py`. A named model also keeps the guest's CPU the same
# across QEMU versions, which `max` does not.
TCG_CPU_MODEL = "Nehalem"
PR_SET_PDEATHSIG = 1
Say = Callable[[str], None]


def kvm_usable(cpuinfo: str, dev_kvm_ok: bool) -> bool:
    """Hardware virtualisation: ``/dev/kvm`` opens and the CPU has VT-x or AMD-V. (A
    ``/dev/kvm`` without either flag is a software hypervisor, such as kvm-pvm, in which a stock
    kernel stops on instructions it cannot emulate.)"""
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    return dev_kvm_ok and bool(flags & {"vmx", "svm"})


def accelerator() -> str:
    """``kvm`` where hardware virtualisation works, else ``tcg`` (QEMU's software emulation);
    ``FABRICLAB_VM_ACCEL`` overrides."""
    forced = os.environ.get("FABRICLAB_VM_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced
    dev_ok = os.access("/dev/kvm", os.R_OK | os.W_OK)
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return "kvm" if kvm_usable(cpuinfo, dev_ok) else "tcg"


def qemu_command(image: Image, overlay: Path, shares: Mapping[str, tuple[Path, bool]],
                 console: Path, accel: str, cpus: int, memory_mib: int) -> list[str]:
    """QEMU's command line: the image's kernel booting the overlay, user-mode networking,
    one 9p share per tag (read-only where asked), the serial console to a file."""
    cmd = [QEMU, "-accel", accel, "-cpu", "host" if accel == "kvm" else TCG_CPU_MODEL,
           "-smp", str(cpus), "-m", str(memory_mib),
           "-kernel", str(image.kernel), "-initrd", str(image.initrd),
           "-append", "root=/dev/vda rw console=ttyS0 fabriclab.job",
           "-drive", f"file={overlay},if=virtio,format=qcow2",
           "-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0",
           "-display", "none", "-vga", "none", "-monitor", "none",
           "-serial", f"file:{console}", "-no-reboot"]
    for tag, (path, readonly) in shares.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,30}", tag):
            raise FabricLabError(f"share tag {tag!r}: lowercase letters, digits and _ only")
        if "," in str(path):
            raise FabricLabError(f"{path}: a shared directory's path cannot hold a comma")
        cmd += ["-virtfs", f"local,path={path},mount_tag={tag},security_model=passthrough,"
                f"id={tag}" + (",readonly=on" if readonly else "")]
    return cmd


@dataclass
class JobResult:
    """What a job in the VM came back with."""

    exit_code: int | None  # None: the guest never wrote one (it crashed or timed out)
    accel: str
    boot_s: float | None  # from QEMU's start to the guest's first progress line
    wall_s: float
    timed_out: bool = False
    progress: list[str] = field(default_factory=list)


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _sweep_stale(runs: Path) -> None:
    """Remove run directories whose QEMU (recorded PID and start time) is gone."""
    for d in runs.iterdir():
        if d.is_symlink() or not d.is_dir():
            continue
        try:
            rec = json.loads((d / "qemu.json").read_text())
        except (OSError, ValueError):
            rec = {"pid": int(d.name.split("-")[0]) if d.name.split("-")[0].isdigit() else 0}
            rec["start"] = None
        pid = int(rec.get("pid") or 0)
        alive = pid > 0 and _start_time(pid) is not None and (
            rec.get("start") is None or _start_time(pid) == rec.get("start"))
        if not alive:
            shutil.rmtree(d, ignore_errors=True)


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def run_job(image: Image, run_sh: str, out_dir: Path, shares: Mapping[str, Path] | None = None,
            cpus: int = 2, memory_mib: int = 4096, timeout_s: float = 3600,
            say: Say = print) -> JobResult:
    """Boot a throwaway copy of ``image``, run ``run_sh`` (bash) in it as root, and copy what
    it wrote under ``/mnt/job/out`` to ``out_dir`` (made here; it must not exist). ``shares``
    maps tags to host directories mounted read-only at ``/mnt/<tag>``."""
    if shutil.which(QEMU) is None:
        raise FabricLabError(f"booting the VM needs {QEMU}: `apt-get install qemu-system-x86 "
                             "qemu-utils`")
    if os.path.lexists(out_dir):
        raise FabricLabError(f"{out_dir} exists already: give a new directory for the VM's "
                             "output")
    runs = own_or_new_dir(CACHE_DIR / "runs", 0o700)
    _sweep_stale(runs)
    work = make_dir(runs / f"{os.getpid()}-{time.time_ns()}", 0o700)
    proc: subprocess.Popen | None = None
    accel = accelerator()
    t0 = time.monotonic()
    # SIGTERM ends the job as Ctrl-C does, through the teardown below (a process started in
    # the background by a shell ignores SIGINT, so SIGTERM is how it is stopped)
    old_term = signal.signal(signal.SIGTERM, _interrupt) if _main_thread() else None
    try:
        job = make_dir(work / "job", 0o700)
        write_text(job / "run.sh", run_sh, 0o755)
        os.mkdir(job / "out", 0o700)
        overlay = work / "overlay.qcow2"
        out = subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2",
                              "-b", str(image.disk), str(overlay)], capture_output=True,
                             text=True)
        if out.returncode != 0:
            raise FabricLabError(f"qemu-img create failed: {out.stderr.strip()}")
        all_shares = {"job": (job, False)} | {t: (p, True) for t, p in (shares or {}).items()}
        cmd = qemu_command(image, overlay, all_shares, work / "console.log", accel, cpus,
                           memory_mib)
        say(f"vm: booting a throwaway copy of image {image.path.name} ({accel.upper()}, "
            f"{cpus} vCPUs, {memory_mib} MiB)")
        qemu_log = open(work / "qemu.log", "wb")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=qemu_log,
                                stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        write_json(work / "qemu.json", {"pid": proc.pid, "start": _start_time(proc.pid)})
        result = _watch(proc, job / "out", accel, t0, timeout_s, say)
        if proc.returncode not in (0, None) and result.exit_code is None:
            tail = (work / "qemu.log").read_text(errors="replace").strip().splitlines()[-2:]
            result.progress.append("qemu: " + " ".join(tail))
        shutil.copytree(job / "out", out_dir, symlinks=True)
        shutil.copy(work / "console.log", out_dir / "console.log")
        return result
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(work, ignore_errors=True)
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _watch(proc: subprocess.Popen, out: Path, accel: str, t0: float, timeout_s: float,
           say: Say) -> JobResult:
    """Print the guest's progress lines as they come, until QEMU ends or the time is up."""
    seen: list[str] = []
    boot_s = None
    timed_out = False
    while True:
        try:
            lines = (out / "progress.log").read_text().splitlines()
        except OSError:
            lines = []
        for line in lines[len(seen):]:
            say(f"vm: {line}")
            if boot_s is None:
                boot_s = round(time.monotonic() - t0, 1)
        seen = lines
        if proc.poll() is not None:
            break
        if time.monotonic() - t0 > timeout_s:
            say(f"vm: no end after {timeout_s:.0f} s: stopping the VM")
            timed_out = True
            break
        time.sleep(1)
    code_file = out / "exit-code"
    code = int(code_file.read_text().strip()) if code_file.is_file() else None
    return JobResult(code, accel, boot_s, round(time.monotonic() - t0, 1), timed_out, seen)
