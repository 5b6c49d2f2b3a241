"""Run a program inside a container host as confined as Docker confines the container itself.

    python3 -I confine.py --target PID --caps HEX [--cgroup FILE]... [--seccomp HEX]... -- ARGV

A standalone script (the standard library only, run with ``-I`` so no environment variable
of the image's can steer the interpreter), started by the runner as root. In order it:
joins the container's cgroups (so its ``cpus`` and ``mem_limit`` hold); enters the
container's cgroup, IPC, UTS, network, PID and mount namespaces and its root and working
directory; keeps only the capabilities the container's own init has (``--caps``: its
``CapBnd``, Docker's default set unless the container was made otherwise), with none
inheritable or ambient; sets ``no_new_privs``; installs the seccomp filters Docker gave the
container's init (``--seccomp``, each the BPF program as hex, read by
:func:`container_confinement` with ``PTRACE_SECCOMP_GET_FILTER``: the profile is never copied
anywhere); then forks, because only a child lands in the PID namespace. The child execs
``ARGV`` and dies with this process (``PR_SET_PDEATHSIG``); this process keeps the host PID
the run records, passes on the signals the run sends, and exits as the child did.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
from dataclasses import dataclass

NAMESPACES = ("cgroup", "ipc", "uts", "net", "pid", "mnt")  # mount last: it moves the root
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 22, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
SECCOMP_MODE_FILTER = 2
PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
PTRACE_SECCOMP_GET_FILTER = 0x420C
WALL = 0x40000000
CAP_VERSION_3 = 0x20080522
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
_libc.ptrace.restype = ctypes.c_long
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                        ctypes.c_ulong]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    _check(_libc.prctl(option, arg2, arg3, 0, 0), f"prctl({option})")


@dataclass(frozen=True)
class Confinement:
    """What Docker gave a container's init: its bounding capabilities (a bit mask) and its
    seccomp filters (newest first, each a BPF program's bytes); ``problems`` says, in one
    sentence each, what of that could not be read."""

    caps: int
    filters: tuple[bytes, ...]
    problems: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        args = ["--caps", f"{self.caps:x}"]
        for f in self.filters:
            args += ["--seccomp", f.hex()]
        return args


def _status_field(pid: int, name: str) -> str:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    raise OSError(f"/proc/{pid}/status has no {name}")


def _seccomp_filters(pid: int) -> tuple[bytes, ...]:
    """The seccomp filters of ``pid`` (newest first), read while it is briefly stopped."""
    _check(_libc.ptrace(PTRACE_SEIZE, pid, None, None), "ptrace seize")
    try:
        _check(_libc.ptrace(PTRACE_INTERRUPT, pid, None, None), "ptrace interrupt")
        os.waitpid(pid, WALL)
        filters = []
        for index in range(int(_status_field(pid, "Seccomp_filters"))):
            count = _check(_libc.ptrace(PTRACE_SECCOMP_GET_FILTER, pid, index, None),
                           "PTRACE_SECCOMP_GET_FILTER")
            buf = ctypes.create_string_buffer(count * 8)  # struct sock_filter: 8 bytes
            _check(_libc.ptrace(PTRACE_SECCOMP_GET_FILTER, pid, index, buf),
                   "PTRACE_SECCOMP_GET_FILTER")
            filters.append(buf.raw)
        return tuple(filters)
    finally:
        _libc.ptrace(PTRACE_DETACH, pid, None, None)


def container_confinement(pid: int) -> Confinement:
    """The capabilities and seccomp filters of the container whose init is ``pid``."""
    caps = int(_status_field(pid, "CapBnd"), 16)
    if _status_field(pid, "Seccomp") != "2":
        return Confinement(caps, (), ("Docker applies no seccomp profile to containers on "
                                      "this machine, so processes in container hosts run "
                                      "without one",))
    try:
        return Confinement(caps, _seccomp_filters(pid))
    except OSError as exc:
        return Confinement(caps, (), (f"Docker's seccomp filter cannot be read from a "
                                      f"container here ({exc.strerror or exc}), so processes "
                                      "in container hosts run without it",))


def _keep_caps(mask: int) -> None:
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if not mask >> cap & 1:
            _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header, data = _CapHeader(CAP_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(header), data), "capget")
    for d in data:
        d.inheritable = 0
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def _install(filters: list[bytes]) -> None:
    for program in reversed(filters):  # oldest first, as the container's init got them
        buf = ctypes.create_string_buffer(program, len(program))
        prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
        _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog))


def enter(target: int, caps: int, cgroups: list[str], filters: list[bytes]) -> None:
    """Put this process where and as the container's processes are (see the docstring)."""
    ns = {n: os.open(f"/proc/{target}/ns/{n}", os.O_RDONLY | os.O_CLOEXEC) for n in NAMESPACES}
    root = os.open(f"/proc/{target}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    cwd = os.open(f"/proc/{target}/cwd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for procs in cgroups:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    for name in NAMESPACES:
        _check(_libc.setns(ns[name], 0), f"setns {name}")
        os.close(ns[name])
    os.fchdir(root)
    os.chroot(".")
    os.fchdir(cwd)
    for fd in (root, cwd):
        os.close(fd)
    _keep_caps(caps)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _install(filters)


def _supervise(argv: list[str]) -> int:
    """Fork the child that runs ``argv`` (in the PID namespace), pass signals on, and return
    the exit status to give."""
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        try:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() not in (0, parent):  # 0: a parent outside its PID namespace
                os._exit(1)  # already orphaned: the death signal came before it was asked
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
            os.execvp(argv[0], argv)
        except OSError as exc:
            print(f"confine: cannot run {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        os._exit(127)
    for sig in FORWARDED:
        signal.signal(sig, lambda signum, _frame: os.kill(child, signum))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)  # what came meanwhile goes on now
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=int, required=True)
    ap.add_argument("--caps", type=lambda s: int(s, 16), required=True)
    ap.add_argument("--cgroup", action="append", default=[])
    ap.add_argument("--seccomp", action="append", default=[], type=bytes.fromhex)
    ap.add_argument("argv", nargs="+")
    args = ap.parse_args()
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # held until the child can take them
    enter(args.target, args.caps, args.cgroup, args.seccomp)
    sys.exit(_supervise(args.argv))


if __name__ == "__main__":
    main()
