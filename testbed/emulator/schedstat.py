"""How long each thread of the run's workers and of ``ovs-vswitchd`` waited for a CPU, sampled
in a background thread from ``/proc/PID/task/TID/schedstat`` (the scheduler invariant of
:mod:`analysis.sched_invariant` judges the samples).

Only reads: the switch's PID comes from Open vSwitch's pidfile and is never signalled. A
thread read in one round and gone in the next (a worker that ended) simply stops appearing.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pandas as pd

from testbed.core.samples import SCHED_SAMPLE_SCHEMA

OVS_PIDFILE = Path("/var/run/openvswitch/ovs-vswitchd.pid")
SWITCH_PROCESS = "ovs-vswitchd"
REALTIME = {os.SCHED_RR: "SCHED_RR", os.SCHED_FIFO: "SCHED_FIFO"}  # policy -> its name
SCHED_HZ = 20.0  # 40 samples per stretch of STRETCH_S = 2 s (analysis.sched_invariant)
DISCOVER_ROUNDS = 20  # look for the watched workers' children once in this many rounds


def switch_pid(pidfile: Path = OVS_PIDFILE) -> int | None:
    """ovs-vswitchd's PID from its pidfile, if the file names a live ovs-vswitchd."""
    try:
        pid = int(pidfile.read_text().split()[0])
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError, IndexError):
        return None
    return pid if comm == SWITCH_PROCESS else None


def switch_sched(pid: int | None = None) -> str | None:
    """How the CPU scheduler runs ovs-vswitchd's main thread (on the userspace datapath, the
    one that polls the ports and forwards): ``"SCHED_RR 1"`` (real-time, what
    ``scripts/start-ovs.sh`` sets) or ``"SCHED_OTHER nice -10"``; None when it cannot be read.
    Read only: fabriclab never changes it from here."""
    pid = switch_pid() if pid is None else pid
    if pid is None:
        return None
    try:
        policy = policy_of(pid)
        if policy in REALTIME:
            return f"{REALTIME[policy]} {os.sched_getparam(pid).sched_priority}"
        return f"SCHED_OTHER nice {os.getpriority(os.PRIO_PROCESS, pid)}"
    except OSError:
        return None


def policy_of(tid: int) -> int:
    """A thread's scheduling policy, without the reset-on-fork flag that
    ``os.sched_getscheduler`` ORs into it (scripts/start-ovs.sh sets that flag)."""
    return os.sched_getscheduler(tid) & ~os.SCHED_RESET_ON_FORK


def realtime_helpers(pid: int | None = None) -> list[str]:
    """The threads of ovs-vswitchd other than its main (forwarding) thread that run real-time,
    as ``"name (TID)"``: a revalidator or handler at real-time priority can hold a CPU from
    the workers with nothing to forward (none after scripts/start-ovs.sh)."""
    pid = switch_pid() if pid is None else pid
    found = []
    for tid in map(int, _task_ids(pid) if pid is not None else []):
        if tid == pid:
            continue
        try:
            if policy_of(tid) in REALTIME:
                found.append(f"{Path(f'/proc/{pid}/task/{tid}/comm').read_text().strip()} "
                             f"({tid})")
        except OSError:
            continue  # it ended meanwhile
    return found


def _task_ids(pid: int) -> list[str]:
    """The thread ids of ``pid`` (none if it is gone)."""
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def children(pid: int) -> list[int]:
    """The PIDs of ``pid``'s children (none if it is gone)."""
    out = []
    for tid in _task_ids(pid):
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def read_threads(pid: int) -> list[tuple[int, str, int, int, str]]:
    """(tid, thread name, ns run, ns waited runnable, state letter) of every thread of ``pid``
    (none if it is gone). The state is read just before the counters: a thread seen asleep
    then cannot have been waiting for a CPU at that moment
    (:func:`analysis.sched_invariant.runnable_wait`)."""
    out = []
    for tid in _task_ids(pid):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            run_ns, wait_ns, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        # "TID (COMM) STATE ...": the name may hold spaces and parentheses, so split at the last
        name, rest = stat[stat.index("(") + 1:].rsplit(")", 1)
        out.append((int(tid), name, int(run_ns), int(wait_ns), rest.split()[0]))
    return out


class SchedSampler:
    """Samples the scheduler statistics of every watched process and of ovs-vswitchd (if it
    runs); ``watch`` adds a process (a job's worker) at any time."""

    def __init__(self, hz: float = SCHED_HZ, switch: bool = True,
                 server_rundirs: dict[str, str] | None = None) -> None:
        """``server_rundirs`` (server → OVS run directory, stand-in servers): watch each
        server's ovs-vswitchd, named ``ovs-vswitchd on SERVER``, instead of this machine's."""
        self.period = 1.0 / hz
        self._watched: dict[int, tuple[str, str]] = {}  # pid -> (job, process)
        if switch and server_rundirs is not None:
            for server, rundir in server_rundirs.items():
                if (pid := switch_pid(Path(rundir) / "ovs-vswitchd.pid")) is not None:
                    self._watched[pid] = ("", f"{SWITCH_PROCESS} on {server}")
        elif switch and (pid := switch_pid()) is not None:
            self._watched[pid] = ("", SWITCH_PROCESS)
        self._rows: list[tuple] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sched-sampler", daemon=True)
        self.cpu_s = 0.0  # the sampler thread's own CPU time
        self.rounds = 0
        self._span = [0.0, 0.0]  # monotonic start and end of sampling

    def __enter__(self) -> SchedSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def watch(self, pid: int, job: str, process: str) -> None:
        with self._lock:
            self._watched[pid] = (job, process)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def sample(self) -> None:
        with self._lock:
            watched = list(self._watched.items())
        gone = []
        for pid, (job, process) in watched:
            threads = read_threads(pid)
            t = time.monotonic()
            if not threads:
                gone.append(pid)
            for tid, name, run_ns, wait_ns, state in threads:
                self._rows.append((t, job, process, pid, tid, name, run_ns / 1e9,
                                   wait_ns / 1e9, state))
        if gone:
            with self._lock:
                for pid in gone:
                    self._watched.pop(pid, None)
        if self.rounds % DISCOVER_ROUNDS == 0:
            self._adopt_children(watched)
        self.rounds += 1

    def _adopt_children(self, watched: list[tuple[int, tuple[str, str]]]) -> None:
        """Watch the children of every watched worker under its labels: a container host's
        worker runs as the child of the process the run started (its confinement wrapper)."""
        found = {}
        for pid, label in watched:
            if label[1].startswith(SWITCH_PROCESS):
                continue
            for child in children(pid):
                found.setdefault(child, label)
        with self._lock:
            for child, label in found.items():
                self._watched.setdefault(child, label)

    def _loop(self) -> None:
        c0 = time.thread_time()
        next_t = self._span[0] = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            self.cpu_s = time.thread_time() - c0
            self._span[1] = time.monotonic()
            next_t = max(next_t + self.period, time.monotonic())
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def cost(self) -> dict[str, float | None]:
        """What sampling cost: rounds per second achieved, and the sampler thread's CPU
        seconds per second sampled."""
        span = self._span[1] - self._span[0]
        if span <= 0:
            return {"sample_hz": None, "cpu_s_per_s": None}
        return {"sample_hz": round((self.rounds - 1) / span, 2),
                "cpu_s_per_s": round(self.cpu_s / span, 4)}

    def samples(self) -> pd.DataFrame:
        """One row per sample and thread: :data:`SCHED_SAMPLE_SCHEMA`."""
        return pd.DataFrame(self._rows[:], columns=SCHED_SAMPLE_SCHEMA.names)
