"""Checks the machine before a fabric is built: each problem becomes one sentence with its fix."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from testbed.core.errors import PrivilegeError
from testbed.emulator.socket_buffers import packet_socket_table


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True
    known: bool = True  # False: this user cannot tell (the answer needs root)


def is_root() -> bool:
    return os.geteuid() == 0


def require_root(what: str) -> None:
    if not is_root():
        raise PrivilegeError(f"fabriclab needs root to {what}: run it in a root shell "
                             "(or with sudo)")


def _run(args: list[str], timeout: float = 5,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None


def ovs_env(rundir: str | None) -> dict[str, str] | None:
    """The environment that points Open vSwitch's tools at the daemons of ``rundir`` (a
    stand-in server's own, :mod:`testbed.emulator.remote_nodes`); None: this machine's."""
    return None if rundir is None else dict(os.environ, OVS_RUNDIR=rundir)


def ovs_running(timeout_s: int = 3, rundir: str | None = None) -> bool:
    """Both OVS daemons answer within ``timeout_s``: the database (ovsdb-server) and the switch
    (ovs-vswitchd); with ``rundir``, those of that directory."""
    env = ovs_env(rundir)
    db = _run(["ovs-vsctl", f"--timeout={timeout_s}", "show"], timeout=timeout_s + 2, env=env)
    sw = _run(["ovs-appctl", f"--timeout={timeout_s}", "-t", "ovs-vswitchd", "version"],
              timeout=timeout_s + 2, env=env)
    return all(out is not None and out.returncode == 0 for out in (db, sw))


def datapath() -> str:
    """``kernel`` where the openvswitch module is loaded, else ``user`` (netdev)."""
    return "kernel" if Path("/sys/module/openvswitch").exists() else "user"


@functools.cache
def netem_available() -> bool:
    """Whether this kernel has netem (root): a netem qdisc added on the loopback of a network
    namespace made for the probe and gone with it."""
    out = _run(["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "netem",
                "delay", "1ms"])
    return out is not None and out.returncode == 0


@functools.cache
def delay_line_available() -> bool:
    """Whether the userspace delay line can run (root): netfilter's NFQUEUE target and the
    nfnetlink_queue interface, tried in a network namespace made for the probe."""
    out = _run(["unshare", "--net", "sh", "-c",
                "test -e /proc/net/netfilter/nfnetlink_queue && iptables-legacy -w -t mangle "
                "-A PREROUTING -j NFQUEUE --queue-num 0"])
    return out is not None and out.returncode == 0


def tcp_congestion() -> str | None:
    """The kernel's default TCP congestion control (``bbr``, ``cubic``, ...): what every host
    namespace the run makes inherits, so what its workers' flows share links by (None where
    unreadable)."""
    try:
        return Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip() or None
    except OSError:
        return None


def virtualization() -> str:
    """What the machine runs on (``systemd-detect-virt --vm``): ``none`` for bare metal,
    ``kvm``, ``qemu`` (QEMU's software emulation, TCG), ...; ``unknown`` without the tool."""
    out = _run(["systemd-detect-virt", "--vm"])
    return out.stdout.strip() or "none" if out is not None else "unknown"


# Under QEMU's software emulation every instruction is translated: rates and times bear no
# relation to any real machine's (DESIGN.md: iperf3 54-2047 Mbit/s by datapath, noisy).
SOFTWARE_EMULATED = {"qemu"}


def timing_problem(virt: str) -> str | None:
    """The sentence that makes a run on a software-emulated CPU not faithful, else None."""
    if virt in SOFTWARE_EMULATED:
        return ("this machine is a VM on QEMU's software emulation (TCG): its run checks "
                "function, not timing")
    return None


def userspace_tso() -> bool:
    out = _run(["ovs-vsctl", "--timeout=3", "get", "Open_vSwitch", ".",
                "other_config:userspace-tso-enable"])
    return out is not None and out.returncode == 0 and out.stdout.strip() == '"true"'


# The send buffer scripts/start-ovs.sh gives the userspace datapath's one packet socket (64 MiB);
# below this the ports' shaped queues can outgrow it (each waiting packet counts against it).
MIN_SEND_BUFFER_BYTES = 16 * 1024 * 1024


def send_buffer_of(ss_output: str) -> int | None:
    """The send buffer (``tb``) of ovs-vswitchd's unbound packet socket in ``ss -0 -m -p``
    output: the one socket its userspace datapath sends every packet through."""
    for line in ss_output.splitlines():
        if "ovs-vswitchd" in line and "[0]:*" in line and (m := re.search(r"\btb(\d+)", line)):
            return int(m.group(1))
    return None


def switch_send_buffer_bytes() -> int | None:
    """:func:`send_buffer_of` the running ovs-vswitchd (None before its first send, or
    without ``ss``)."""
    table = packet_socket_table()
    return None if table is None else send_buffer_of(table)


def forwarding_problem() -> str | None:
    """One sentence when ovs-vswitchd forwards in userspace without real-time priority (it then
    waits behind the run's workers for a CPU), when it sends through a socket whose buffer the
    shaped queues can outgrow (:data:`MIN_SEND_BUFFER_BYTES`), or when other threads of it run
    real-time too (they can then hold a CPU from the workers with nothing to forward);
    scripts/start-ovs.sh sets all three right. Else None."""
    from testbed.emulator.schedstat import realtime_helpers, switch_sched

    sched = switch_sched()
    if datapath() == "kernel" or sched is None:
        return None
    if sched.startswith("SCHED_OTHER"):
        return (f"ovs-vswitchd forwards in userspace at {sched}, not real-time, so it can wait "
                "for a CPU behind the workers: run `bash scripts/start-ovs.sh` as root to set it")
    sndbuf = switch_send_buffer_bytes()
    if sndbuf is not None and sndbuf < MIN_SEND_BUFFER_BYTES:
        return (f"ovs-vswitchd sends through a socket with a {sndbuf // 1024} KiB buffer: "
                "packets waiting in the shaped queues beyond that are dropped and counted "
                "nowhere; run `bash scripts/start-ovs.sh` as root to make it larger")
    helpers = realtime_helpers()
    if helpers:
        return (f"{len(helpers)} threads of ovs-vswitchd besides its forwarding thread run "
                f"real-time ({', '.join(helpers[:3])}{', ...' if len(helpers) > 3 else ''}) "
                "and can hold a CPU from the workers: run `bash scripts/start-ovs.sh` as root")
    return None


def require_fabric_ready(ovs_rundirs: dict[str, str] | None = None) -> None:
    """Everything a fabric bring-up needs, or a PrivilegeError naming the fix. With
    ``ovs_rundirs`` (server name → its OVS run directory: stand-in servers), each of those
    Open vSwitches must answer instead of this machine's."""
    require_root("build the emulated network")
    for tool in ("mnexec", "ovs-vsctl", "ovs-ofctl", "tc"):
        if shutil.which(tool) is None:
            raise PrivilegeError(f"{tool} is missing: run `make install` as root")
    if ovs_rundirs is not None:
        for server, rundir in ovs_rundirs.items():
            if not ovs_running(rundir=rundir):
                raise PrivilegeError(
                    f"the Open vSwitch of server {server} ({rundir}) does not answer: "
                    "restart the stand-ins (`fabriclab servers stop`, then `fabriclab "
                    "servers local N --out FILE`)")
        return
    if not ovs_running():
        raise PrivilegeError(
            "Open vSwitch is not running: run `bash scripts/start-ovs.sh` as root "
            "(make install does it)"
        )


def mem_available_bytes() -> int | None:
    """The kernel's estimate of memory available to new work (``MemAvailable``), or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_error(need_bytes: int, what: str) -> str | None:
    """One sentence if ``need_bytes`` would not fit in this machine's available memory (the
    OOM killer would then pick a victim, maybe ovs-vswitchd); None when it fits."""
    free = mem_available_bytes()
    if free is None or need_bytes <= free:
        return None
    return (f"{what} would hold about {need_bytes / 1024**3:.1f} GiB of buffers and this "
            f"machine has {free / 1024**3:.1f} GiB available: use smaller sizes or fewer hosts")


def _unknown(name: str, detail: str) -> Check:
    """A check this user cannot make: the answer needs root."""
    return Check(name, False, detail, "run fabriclab doctor as root", known=False)


def checks() -> list[Check]:
    """Every item `fabriclab doctor` reports."""
    out: list[Check] = []
    root = is_root()
    out.append(Check("root", root, "running as root" if root else "not root",
                     "run fabriclab as root"))
    # on the loopback of a throwaway namespace: nothing of the caller's is touched
    htb = (_run(["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "handle", "7:",
                 "htb"]) if root else None)
    htb_ok = htb is not None and htb.returncode == 0
    if root:
        out.append(Check("htb qdisc", htb_ok,
                         "HTB shaping works" if htb_ok else "cannot add an HTB qdisc",
                         "load sch_htb (modprobe sch_htb)"))
    else:
        out.append(_unknown("htb qdisc", "cannot tell without root"))
    if root:
        netem = netem_available()
        out.append(Check("netem qdisc", netem,
                         "present: link delay, jitter and loss on every link" if netem else
                         "absent: link loss on host links only (iptables)",
                         "a stock Debian kernel has it (make vm-check boots one)",
                         required=False))
        if not netem:
            line = delay_line_available()
            out.append(Check("delay line", line,
                             "NFQUEUE works: link delay and jitter by the userspace delay line"
                             if line else "no NFQUEUE: no link delay without netem",
                             "a kernel with CONFIG_NETFILTER_XT_TARGET_NFQUEUE, or with netem",
                             required=False))
    else:
        out.append(_unknown("netem qdisc", "cannot tell without root"))
    tun = Path("/dev/net/tun").exists()
    out.append(Check("/dev/net/tun", tun, "present" if tun else "missing",
                     "mkdir -p /dev/net && mknod /dev/net/tun c 10 200"))
    ovs = ovs_running()
    dp = datapath()
    if not ovs and not root:  # the daemons' sockets are root's: silence proves nothing
        out.append(_unknown("ovs daemons", "cannot tell without root (their sockets are root's)"))
        out.append(_unknown("ovs datapath", f"{dp} datapath; TSO cannot be read without root"))
    else:
        out.append(Check("ovs daemons", ovs, "ovsdb-server and ovs-vswitchd answer" if ovs
                         else "not running", "bash scripts/start-ovs.sh (as root)"))
        tso = userspace_tso() if ovs else False
        dp_ok = dp == "kernel" or tso
        out.append(Check("ovs datapath", dp_ok,
                         f"{dp} datapath" + ("" if dp == "kernel" else
                                             f", userspace TSO {'on' if tso else 'off'}"),
                         "bash scripts/start-ovs.sh (as root) (turns userspace TSO on and "
                         "restarts ovs-vswitchd)"))
        if ovs:
            problem = forwarding_problem()
            out.append(Check("ovs forwarding", problem is None,
                             problem or "forwarding thread real-time (or kernel datapath)",
                             "bash scripts/start-ovs.sh (as root)", required=False))
    for tool, fix in (("mnexec", "apt-get install mininet (as root)"),
                      ("iperf3", "apt-get install iperf3 (as root)"),
                      ("ethtool", "apt-get install ethtool (as root)")):
        path = shutil.which(tool)
        out.append(Check(tool, path is not None, path or "missing", fix))
    try:
        import mininet.net  # noqa: F401
        mn_ok = True
    except ImportError:
        mn_ok = False
    out.append(Check("mininet", mn_ok, "importable" if mn_ok else "not importable",
                     "make install as root (venv from /usr/bin/python3 with system site packages)"))
    ok, detail = _osken()
    out.append(Check("os-ken", ok, detail, "apt-get install python3-os-ken (as root)"))
    out += _docker_checks()
    out.append(apparmor_check())
    return out


def apparmor_check(root: Path = Path("/sys/module/apparmor")) -> Check:
    """Whether the kernel has AppArmor (optional): where it has, Docker starts every container
    under its ``docker-default`` profile (fabriclab passes no ``security_opt`` and never runs a
    container privileged); where not, containers get no AppArmor profile at all."""
    enabled = root / "parameters" / "enabled"
    on = enabled.exists() and enabled.read_text().strip().upper().startswith("Y")
    if on:
        detail = ("enabled: containers start under Docker's docker-default profile (processes "
                  "a job starts in them are confined by capabilities and seccomp, not by it)")
    elif root.exists():
        detail = "in the kernel but disabled: containers get no AppArmor profile"
    else:
        detail = "this kernel has no AppArmor: containers get no AppArmor profile"
    return Check("apparmor", on, detail, "boot a kernel with AppArmor enabled (security=apparmor)",
                 required=False)


def _docker_checks() -> list[Check]:
    """Container hosts (optional): dockerd installed (started on demand by the runs that
    need it), and this checkout's worker image built."""
    from testbed.emulator import docker_engine, images

    dockerd = shutil.which("dockerd")
    out = [Check("docker engine", dockerd is not None,
                 ("answers" if docker_engine.answers() else "installed; runs with container "
                  "hosts start it") if dockerd else "dockerd missing",
                 "apt-get install docker.io (as root)", required=False)]
    if dockerd is None or not docker_engine.answers():
        return out
    tag = images.resolve(images.WORKER_IMAGE)
    built = images.exists(docker_engine.client(timeout_s=10), tag)
    out.append(Check("worker image", built, tag + (" built" if built else " missing"),
                     "fabriclab images (as root)", required=False))
    return out


def _osken() -> tuple[bool, str]:
    if shutil.which("osken-manager") is None:
        return False, "osken-manager missing"
    try:
        import os_ken

        return True, f"os-ken {getattr(os_ken, '__version__', '?')}"
    except ImportError:
        return False, "os_ken not importable"
