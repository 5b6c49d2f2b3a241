"""High 2 of issue 27 on real containers (root, Docker, the project's images): a process a run
starts in a container host is confined as Docker confines the container, so it can neither
mount procfs, enter PID 1's namespaces, ptrace the runner nor load a kernel module.

Each attempt is made from inside the container host with the syscall itself (ctypes), so the
answer is the kernel's: EPERM (or ESRCH for a runner it cannot even see), where before it was
let through (CAP_SYS_ADMIN, CAP_SYS_PTRACE and CAP_SYS_MODULE were kept and the machine's PID
namespace shared).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess

import pytest
from test_containers_root import DOCKER, docker_ready, plan_of, run_in  # noqa: F401

from testbed.core.spec import one_switch_fabric
from testbed.emulator.fabric import Fabric
from testbed.emulator.preflight import apparmor_check

pytestmark = [pytest.mark.root, pytest.mark.slow]

ONE_SWITCH = one_switch_fabric(2, 50)
CAP_NET_ADMIN, CAP_SYS_MODULE, CAP_SYS_PTRACE, CAP_SYS_ADMIN = 12, 16, 19, 21
# Each line prints [return value, errno] of one attempt, as JSON.
ATTEMPTS = """
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def tried(result):
    return [result, ctypes.get_errno()]
os.makedirs("/tmp/fabriclab-proc", exist_ok=True)
out = {"mount": tried(libc.mount(b"proc", b"/tmp/fabriclab-proc", b"proc", 0, None))}
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
out["ptrace"] = tried(libc.ptrace(16, int(sys.argv[1]), None, None))  # PTRACE_ATTACH
fd = os.open("/dev/null", os.O_RDONLY)
out["finit_module"] = tried(libc.syscall(313, fd, b"", 0))  # x86_64 finit_module
out["setns_pid1"] = tried(libc.setns(os.open("/proc/1/ns/mnt", os.O_RDONLY), 0))
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
out["status"] = {k: status[k].strip() for k in ("CapBnd", "NoNewPrivs", "Seccomp")}
out["pid_ns"] = os.readlink("/proc/self/ns/pid")
out["cgroup_ns"] = os.readlink("/proc/self/ns/cgroup")
out["pid1"] = open("/proc/1/cmdline").read().replace("\\0", " ").strip()
print(json.dumps(out))
"""


@pytest.fixture
def fabric(tmp_path, docker_ready):  # noqa: F811
    with Fabric(plan_of(ONE_SWITCH), tmp_path / "run", hosts={"h0": DOCKER}) as fab:
        yield fab


def test_a_container_process_cannot_mount_enter_pid1_ptrace_the_runner_or_load_modules(
        fabric):
    host = fabric.host("h0")
    got = run_in(fabric, "h0", ["python3", "-c", ATTEMPTS, str(os.getpid())])
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    assert out["mount"] == [-1, errno.EPERM]
    assert out["ptrace"] == [-1, errno.ESRCH]  # the runner is not even in its PID namespace
    assert out["finit_module"] == [-1, errno.EPERM]
    assert out["setns_pid1"] == [-1, errno.EPERM]
    assert out["pid1"] == "sleep infinity"  # PID 1 is the container's own init
    init = host.container_pid
    assert out["pid_ns"] == os.readlink(f"/proc/{init}/ns/pid")
    assert out["cgroup_ns"] == os.readlink(f"/proc/{init}/ns/cgroup")
    caps = int(out["status"]["CapBnd"], 16)
    with open(f"/proc/{init}/status") as f:
        init_caps = next(ln.split()[1] for ln in f if ln.startswith("CapBnd:"))
    assert caps == int(init_caps, 16)  # Docker's set for the container, no more
    for cap in (CAP_NET_ADMIN, CAP_SYS_MODULE, CAP_SYS_PTRACE, CAP_SYS_ADMIN):
        assert not caps >> cap & 1
    assert out["status"]["NoNewPrivs"] == "1"
    if host.confinement.filters:
        assert out["status"]["Seccomp"] == "2"
    else:
        pytest.fail(f"no seccomp filter: {host.confinement.problems}")
    # Docker's own confinement of the container is left as Docker makes it: never privileged,
    # no security option (so no apparmor=unconfined); with AppArmor, its default profile.
    config = host.container.attrs["HostConfig"]
    assert config["Privileged"] is False and not config["SecurityOpt"]
    if apparmor_check().ok:
        assert host.container.attrs["AppArmorProfile"] == "docker-default"


def test_the_run_records_the_supervisor_and_ending_it_ends_the_process(fabric):
    proc = fabric.popen("h0", ["sleep", "300"], stdout=subprocess.PIPE, text=True)
    try:
        assert any(p[0] == proc.pid for p in fabric.state.procs)
        kids, argv0 = [], ""
        for _ in range(50):
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                kids = [int(k) for k in f.read().split()]
            if len(kids) == 1:
                # Between fork and exec the child still runs the supervisor's python.
                with open(f"/proc/{kids[0]}/cmdline") as f:
                    argv0 = f.read().split("\0")[0]
                if argv0 == "sleep":
                    break
            subprocess.run(["sleep", "0.1"], check=True)
        assert argv0 == "sleep", (kids, argv0)
        (child,) = kids
        proc.terminate()
        assert proc.wait(timeout=10) == 128 + 15  # it ended as its child did: by SIGTERM
        assert not os.path.exists(f"/proc/{child}")
    finally:
        if proc.poll() is None:
            proc.kill()
