"""Stand-in servers on this one machine (issue #43): ``fabriclab servers local N`` makes them,
``fabriclab servers stop`` removes them and everything they made (root).

Stand-in ``s{i}`` is a network namespace ``fls{i}`` holding its own Open vSwitch
(ovsdb-server and ovs-vswitchd with their own database, sockets and logs under
``<BASE>/s{i}/ovs``) and its own sshd (its own config and host key, the one key made here as its
only authorized key), listening on ``192.0.2.{i+1}`` (TEST-NET-1). SSH is the only way in:
:mod:`testbed.emulator.ssh` reaches it through the namespace. A namespace ``fllan`` holds a
Linux bridge, the LAN: each stand-in's ``eth0`` is a veth whose peer ``lan{i}`` is a port of
that bridge. The veths are made inside those namespaces and go with them; nothing is made in
the caller's namespace.

Records. ``<BASE>/state.json`` is written before anything is made, and again as each item
comes into being: a namespace's name before ``ip netns add`` and its (device, inode) right
after (the ``/run/netns`` mount pins it, so the inode stays its own while the name exists);
each daemon as (PID, start time) while it is still an unreaped child of the command. ``stop``
signals only recorded processes whose start time still matches, and processes inside the
recorded namespaces (nothing else lives there); deletes only recorded namespaces whose
inode still matches (a name recorded but killed before its inode was, is taken as ours: only
this module makes ``fls*``/``fllan`` after checking that they do not exist); removes the
directories; then checks every item and keeps the record of whatever is left. It works after
``servers local`` was killed at any point, and twice in a row.

``/run/sshd`` (sshd's privilege-separation directory) is made if missing and left in place:
it is the system's, and another sshd may need it.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from testbed.core.atomic import check_writable, write_json, write_text
from testbed.core.errors import FabricLabError
from testbed.core.safe_paths import NEW_FILE_FLAGS, check_ancestors, make_dir, own_or_new_dir
from testbed.core.servers import ServerSpec, ServersSpec
from testbed.emulator import cleanup, procs, socket_buffers, ssh
from testbed.emulator.procs import NetnsId, ProcessId

BASE = Path("/var/lib/fabriclab/standins")
MAX_STANDINS = 8
LAN_NETNS = "fllan"
LAN_BRIDGE = "lan"
LAN_MTU = 1500
LAN = ipaddress.IPv4Network("192.0.2.0/24")  # TEST-NET-1: never routed anywhere
NETNS_DIR = Path("/run/netns")
SSHD = "/usr/sbin/sshd"
SSHD_RUN_DIR = Path("/run/sshd")
OVS_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
DAEMONS = ("ovsdb-server", "ovs-vswitchd", "sshd")
TOOLS = ("ip", "ssh", "ssh-keygen", "ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl",
         "ovs-appctl")
STOP_FIRST = "run `fabriclab servers stop` first"
START_TIMEOUT_S = 10.0
SEND_BUFFER_BYTES = 64 * 1024 * 1024  # as scripts/start-ovs.sh gives the machine's own OVS
WARM_BRIDGE, WARM_PORT = "flwarm", "flwarm0"

Progress = Callable[[str], None]


def _quiet(_line: str) -> None:
    pass


@dataclass(frozen=True)
class Standin:
    """Where stand-in ``index`` lives and how it is named (pure: nothing is made here)."""

    index: int
    base: Path = BASE

    @property
    def name(self) -> str:
        return f"s{self.index}"

    @property
    def netns(self) -> str:
        return f"fls{self.index}"

    @property
    def lan_ip(self) -> str:
        return str(LAN.network_address + self.index + 1)

    @property
    def lan_veth(self) -> str:
        """The veth's end in :data:`LAN_NETNS` (the stand-in's own end is ``eth0``)."""
        return f"lan{self.index}"

    @property
    def dir(self) -> Path:
        return self.base / self.name

    @property
    def ovs_dir(self) -> Path:
        return self.dir / "ovs"

    @property
    def ssh_dir(self) -> Path:
        return self.dir / "ssh"

    @property
    def work_dir(self) -> Path:
        return self.dir / "work"

    @property
    def host_key(self) -> Path:
        return self.ssh_dir / "host_ed25519"

    def ovs_env(self) -> dict[str, str]:
        """Where the OVS tools find this stand-in's daemons (set for its ssh sessions too)."""
        d = str(self.ovs_dir)
        return {"OVS_RUNDIR": d, "OVS_DBDIR": d, "OVS_LOGDIR": d}


def check_count(n: int) -> int:
    if not 1 <= n <= MAX_STANDINS:
        raise FabricLabError(f"N is {n}: give 1 to {MAX_STANDINS} stand-in servers (each "
                             "runs its own Open vSwitch and sshd on this machine)")
    return n


def layout(n: int, base: Path = BASE) -> list[Standin]:
    return [Standin(i, base) for i in range(check_count(n))]


def key_path(base: Path = BASE) -> Path:
    return base / "key"


def known_hosts_path(base: Path = BASE) -> Path:
    return base / "known_hosts"


def servers_spec(standins: list[Standin], base: Path = BASE) -> ServersSpec:
    """The servers file of ``standins``."""
    return ServersSpec(
        servers=[ServerSpec(name=s.name, ssh=f"root@{s.lan_ip}", lan_ip=s.lan_ip,
                            identity=str(key_path(base)), netns=s.netns,
                            ovs_rundir=str(s.ovs_dir), workdir=str(s.work_dir))
                 for s in standins],
        known_hosts=str(known_hosts_path(base)))


def servers_yaml(spec: ServersSpec) -> str:
    head = (f"# {len(spec.servers)} stand-in servers on this machine, written by `fabriclab "
            "servers local`;\n# `fabriclab servers stop` removes them.\n")
    return head + yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True),
                                 sort_keys=False)


def known_hosts_line(host: str, port: int, public_key: str) -> str:
    """One known_hosts line: ``host`` (``[host]:port`` off port 22) and the key's type and
    base64 (its comment dropped)."""
    kind, blob = public_key.split()[:2]
    name = host if port == 22 else f"[{host}]:{port}"
    return f"{name} {kind} {blob}\n"


def sshd_config(s: Standin, base: Path = BASE) -> str:
    """The stand-in's sshd_config: its key only, root by key only, its own OVS for every
    session."""
    env = " ".join(f"{k}={v}" for k, v in s.ovs_env().items())
    return "\n".join([
        f"ListenAddress {s.lan_ip}",
        "Port 22",
        f"HostKey {s.host_key}",
        f"PidFile {s.ssh_dir / 'sshd.pid'}",
        f"AuthorizedKeysFile {s.ssh_dir / 'authorized_keys'}",
        "AuthorizedPrincipalsFile none",
        "PermitRootLogin prohibit-password",
        "AuthenticationMethods publickey",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "HostbasedAuthentication no",
        "UsePAM no",
        "PermitUserEnvironment no",
        "X11Forwarding no",
        "MaxStartups 64:30:128",  # an engine opens many sessions at once
        "MaxSessions 64",
        f"SetEnv {env}",
        "Subsystem sftp internal-sftp",
        "",
    ])


# -- the record -------------------------------------------------------------------------------


@dataclass
class StandinsState:
    """What ``servers local`` made, recorded as it was made."""

    owner: list[int]  # [pid, start_ticks] of the `servers local` that made them
    count: int
    netns: dict[str, list[int] | None] = field(default_factory=dict)  # name -> [dev, ino]
    veths: list[str] = field(default_factory=list)  # "fllan/lan0=fls0/eth0", inside them
    procs: dict[str, list[int]] = field(default_factory=dict)  # "s0/sshd" -> [pid, ticks]
    ready: bool = False
    version: int = 1

    @classmethod
    def new(cls, count: int) -> StandinsState:
        me = procs.identify(os.getpid())
        assert me is not None
        return cls(me.as_list(), count)

    @staticmethod
    def path(base: Path = BASE) -> Path:
        return base / "state.json"

    def save(self, base: Path = BASE) -> None:
        write_json(self.path(base), asdict(self), indent=None, mode=0o600)

    @classmethod
    def load(cls, base: Path = BASE) -> StandinsState | None:
        """The record (None if there is none); one sentence if it cannot be read."""
        path = cls.path(base)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FabricLabError(f"cannot read {path}: {exc.strerror or exc}") from None
        with os.fdopen(fd) as f:
            try:
                return cls(**json.load(f))
            except (ValueError, TypeError):
                raise FabricLabError(
                    f"{path} is not a stand-in record this version reads: look at what it "
                    "names, remove it by hand, then start again") from None

    def processes(self) -> dict[str, ProcessId]:
        return {label: ProcessId(*p) for label, p in self.procs.items()}

    def add_process(self, label: str, pid: int, base: Path = BASE) -> ProcessId:
        """Record a daemon just started (still our unreaped child: its PID is its own)."""
        ident = procs.identify(pid)
        if ident is None:
            raise FabricLabError(f"{label} ended as soon as it started")
        self.procs[label] = ident.as_list()
        self.save(base)
        return ident


def netns_id(name: str) -> NetnsId | None:
    """The namespace ``ip netns`` calls ``name`` (None if there is none)."""
    return cleanup.pinned_netns(NETNS_DIR / name)


def owned_netns(state: StandinsState) -> dict[str, NetnsId]:
    """The recorded namespaces that still exist and are provably the record's."""
    owned = {}
    for name, recorded in state.netns.items():
        now = netns_id(name)
        if now is not None and (recorded is None or tuple(recorded) == now):
            owned[name] = now
    return owned


def live_processes(state: StandinsState) -> dict[ProcessId, str]:
    """The record's processes still alive, and every process inside its namespaces."""
    found = {p: label for label, p in state.processes().items() if p.alive()}
    by_ns = {ns: name for name, ns in owned_netns(state).items()}
    for p in procs.in_netns(by_ns):
        ns = procs.netns_of(p.pid)
        found.setdefault(p, f"in namespace {by_ns.get(ns, '?') if ns else '?'}")
    return found


def leftovers(state: StandinsState, base: Path = BASE) -> list[str]:
    """What of the stand-ins is still on the machine, verified (empty once all is gone)."""
    left = [f"process {p.pid} ({label})" for p, label in sorted(live_processes(state).items())]
    left += [f"namespace {name}" for name in sorted(owned_netns(state))]
    if base.is_dir():
        left += [f"{base / e.name}" for e in sorted(os.scandir(base), key=lambda e: e.name)
                 if e.name != StandinsState.path(base).name]
    return left


# -- running things ---------------------------------------------------------------------------


def _run(argv: list[str], env: dict[str, str] | None = None, timeout_s: float = 20) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                             stdin=subprocess.DEVNULL,
                             env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired:
        raise FabricLabError(f"`{' '.join(argv)}` did not finish in {timeout_s:g} s") from None
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
        raise FabricLabError(f"`{' '.join(argv)}` failed: {why}")
    return out.stdout


def _ip(netns: str, *args: str) -> None:
    _run(["ip", "-n", netns, *args])


def _add_netns(state: StandinsState, name: str, base: Path) -> None:
    state.netns[name] = None  # recorded before it exists: a kill in between still finds it
    state.save(base)
    _run(["ip", "netns", "add", name])
    ns = netns_id(name)
    if ns is None:
        raise FabricLabError(f"`ip netns add {name}` made no namespace")
    state.netns[name] = list(ns)
    state.save(base)


def _spawn(state: StandinsState, s: Standin, daemon: str, argv: list[str],
           base: Path) -> subprocess.Popen:
    """Start ``argv`` inside the stand-in's namespace, in a session of its own (it outlives
    this command), output to ``<dir>/<daemon>.out``, and record it."""
    out = os.open(s.dir / f"{daemon}.out", NEW_FILE_FLAGS, 0o600)
    try:
        popen = subprocess.Popen(["ip", "netns", "exec", s.netns, *argv],
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 env={**os.environ, **s.ovs_env()}, start_new_session=True)
    finally:
        os.close(out)
    state.add_process(f"{s.name}/{daemon}", popen.pid, base)
    return popen


def _wait(what: str, ready: Callable[[], bool], popen: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if popen.poll() is not None:
            raise FabricLabError(f"{what} ended (exit status {popen.returncode}) as it "
                                 f"started: see {log}")
        if time.monotonic() > deadline:
            raise FabricLabError(f"{what} was not ready within {START_TIMEOUT_S:g} s: see {log}")
        time.sleep(0.05)


def _answers(argv: list[str], env: dict[str, str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=5, stdin=subprocess.DEVNULL,
                              env={**os.environ, **env}).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _make_lan(state: StandinsState, base: Path) -> None:
    _add_netns(state, LAN_NETNS, base)
    _ip(LAN_NETNS, "link", "add", LAN_BRIDGE, "mtu", str(LAN_MTU), "type", "bridge")
    _ip(LAN_NETNS, "link", "set", LAN_BRIDGE, "up")


def _make_network(state: StandinsState, s: Standin, base: Path) -> None:
    _add_netns(state, s.netns, base)
    state.veths.append(f"{LAN_NETNS}/{s.lan_veth}={s.netns}/eth0")
    state.save(base)
    _ip(LAN_NETNS, "link", "add", s.lan_veth, "mtu", str(LAN_MTU), "type", "veth",
        "peer", "name", "eth0", "mtu", str(LAN_MTU), "netns", s.netns)
    _ip(LAN_NETNS, "link", "set", s.lan_veth, "master", LAN_BRIDGE, "up")
    _ip(s.netns, "addr", "add", f"{s.lan_ip}/{LAN.prefixlen}", "dev", "eth0")
    _ip(s.netns, "link", "set", "eth0", "up")
    _ip(s.netns, "link", "set", "lo", "up")


def _start_ovs(state: StandinsState, s: Standin, base: Path) -> None:
    """Its own ovsdb-server and ovs-vswitchd, userspace TSO on before ovs-vswitchd starts,
    and (on the userspace datapath) ovs-vswitchd's forwarding thread real-time, as
    ``scripts/start-ovs.sh`` treats the machine's own."""
    env, db = s.ovs_env(), s.ovs_dir / "conf.db"
    _run(["ovsdb-tool", "create", str(db), str(OVS_SCHEMA)])
    sock = s.ovs_dir / "db.sock"
    popen = _spawn(state, s, "ovsdb-server",
                   ["ovsdb-server", str(db), f"--remote=punix:{sock}", "--pidfile",
                    "--log-file"], base)
    _wait(f"{s.name}'s ovsdb-server", sock.exists, popen, s.ovs_dir / "ovsdb-server.log")
    _run(["ovs-vsctl", f"--db=unix:{sock}", "--timeout=10", "--no-wait", "init", "--",
          "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true",
          f"external_ids:system-id=fabriclab-{s.name}", f"external_ids:hostname={s.name}"],
         env)
    popen = _spawn(state, s, "ovs-vswitchd",
                   ["ovs-vswitchd", f"unix:{sock}", "--pidfile", "--log-file"], base)
    _wait(f"{s.name}'s ovs-vswitchd",
          lambda: _answers(["ovs-appctl", "--timeout=2", "-t", "ovs-vswitchd", "version"], env),
          popen, s.ovs_dir / "ovs-vswitchd.log")
    if not Path("/sys/module/openvswitch").exists():
        # The main thread forwards every packet: real-time, reset on fork so the threads it
        # makes stay on the normal policy (see scripts/start-ovs.sh).
        os.sched_setscheduler(popen.pid, os.SCHED_RR | os.SCHED_RESET_ON_FORK,
                              os.sched_param(1))
        _enlarge_send_buffer(s, popen.pid)


def _enlarge_send_buffer(s: Standin, pid: int) -> None:
    """Give ovs-vswitchd's one packet-sending socket :data:`SEND_BUFFER_BYTES`, as
    ``scripts/start-ovs.sh`` does for the machine's own (why: there). That script raises
    ``net.core.wmem_default`` until the socket exists; inside a namespace that setting cannot
    be written, so here the socket is made by one packet out of a throwaway bridge (its names
    private to the stand-in's namespace), then its buffer is set through a copy of its
    descriptor (``pidfd_getfd``) with ``SO_SNDBUFFORCE``."""
    env = s.ovs_env()
    _ip(s.netns, "link", "add", WARM_PORT, "type", "veth", "peer", "name", f"{WARM_PORT}p")
    try:
        _ip(s.netns, "link", "set", WARM_PORT, "up")
        _run(["ovs-vsctl", "--timeout=10", "add-br", WARM_BRIDGE, "--", "set", "bridge",
              WARM_BRIDGE, "datapath_type=netdev", "--", "add-port", WARM_BRIDGE, WARM_PORT,
              "--", "set", "interface", WARM_PORT, "ofport_request=1"], env)
        frame = "ffffffffffff02000000000188b5" + "00" * 46  # an unused EtherType, padded
        deadline = time.monotonic() + 5
        while (inode := _unbound_packet_socket(pid)) is None and time.monotonic() < deadline:
            _answers(["ovs-ofctl", "packet-out", WARM_BRIDGE, "LOCAL", "output:1", frame], env)
            time.sleep(0.05)
    finally:
        subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", WARM_BRIDGE],
                       capture_output=True, env={**os.environ, **env})
        subprocess.run(["ip", "-n", s.netns, "link", "del", WARM_PORT], capture_output=True)
    if inode is None:
        raise FabricLabError(f"{s.name}'s ovs-vswitchd made no packet socket for sending")
    socket_buffers.set_buffer(pid, inode, SEND_BUFFER_BYTES, socket_buffers.SO_SNDBUFFORCE)


def _unbound_packet_socket(pid: int) -> int | None:
    """The inode of the process's packet socket bound to no interface (ovs-vswitchd sends
    through it), in its namespace; None if none yet."""
    return next((inode for inode, ifindex in socket_buffers.packet_sockets(pid).items()
                 if ifindex == 0), None)


def _start_sshd(state: StandinsState, s: Standin, base: Path) -> None:
    write_text(s.ssh_dir / "sshd_config", sshd_config(s, base), mode=0o600)
    _run([SSHD, "-t", "-f", str(s.ssh_dir / "sshd_config")])
    _spawn(state, s, "sshd", [SSHD, "-D", "-f", str(s.ssh_dir / "sshd_config"),
                              "-E", str(s.ssh_dir / "sshd.log")], base)


def _keygen(path: Path, comment: str) -> None:
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def _make(state: StandinsState, standins: list[Standin], base: Path,
          progress: Progress) -> ServersSpec:
    _keygen(key_path(base), "fabriclab-standins")
    public_key = key_path(base).with_suffix(".pub").read_text()
    _make_lan(state, base)
    if not SSHD_RUN_DIR.is_dir():
        SSHD_RUN_DIR.mkdir(mode=0o755)
    hosts = []
    for s in standins:
        t0 = time.monotonic()
        for d in (s.dir, s.ovs_dir, s.ssh_dir, s.work_dir):
            make_dir(d, 0o700)
        _make_network(state, s, base)
        _keygen(s.host_key, f"fabriclab-{s.name}")
        write_text(s.ssh_dir / "authorized_keys", public_key, mode=0o600)
        _start_ovs(state, s, base)
        _start_sshd(state, s, base)
        hosts.append(known_hosts_line(s.lan_ip, 22, s.host_key.with_suffix(".pub").read_text()))
        progress(f"{s.name}: namespace {s.netns}, {s.lan_ip}, Open vSwitch and sshd started "
                 f"({time.monotonic() - t0:.1f} s)")
    write_text(known_hosts_path(base), "".join(hosts), mode=0o644)
    spec = servers_spec(standins, base)
    for s, server in zip(standins, spec.servers, strict=True):
        _wait_ssh(server, spec, state, s)
    progress(f"all {len(standins)} answer over ssh")
    return spec


def _wait_ssh(server: ServerSpec, spec: ServersSpec, state: StandinsState, s: Standin) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        out = ssh.run(server, spec, ["true"], timeout_s=START_TIMEOUT_S)
        if out.returncode == 0:
            return
        if not state.processes()[f"{s.name}/sshd"].alive():
            raise FabricLabError(f"{s.name}'s sshd ended as it started: see "
                                 f"{s.ssh_dir / 'sshd.log'}")
        if time.monotonic() > deadline:
            raise FabricLabError(f"{s.name} does not answer over ssh: {ssh.why_failed(out)}")
        time.sleep(0.1)


# -- the commands ---------------------------------------------------------------------------


@contextlib.contextmanager
def _locked():
    """One `servers local` or `servers stop` at a time."""
    path = cleanup.state_dir() / "standins.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FabricLabError("another `fabriclab servers local` or `servers stop` is "
                                 "running: wait for it to end") from None
        yield
    finally:
        os.close(fd)


def check_tools() -> None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if not Path(SSHD).is_file():
        missing.append(SSHD)
    if missing:
        raise FabricLabError(f"{', '.join(missing)} missing: run `make install` as root "
                             "(stand-ins need openssh-server and openvswitch-switch)")


def check_out_file(out: Path) -> None:
    """Refuse, in one sentence, a servers file path that cannot be written safely."""
    check_ancestors(out)
    check_writable(out)


@dataclass(frozen=True)
class Health:
    """One stand-in as it is now."""

    standin: Standin
    missing: tuple[str, ...]  # its daemons (and namespace) that are gone
    ssh_error: str | None  # why ssh does not reach it (None: it does)

    @property
    def alive(self) -> bool:
        return not self.missing

    def line(self) -> str:
        s = self.standin
        alive = "alive" if self.alive else f"not alive ({', '.join(self.missing)} gone)"
        reach = ("reachable over ssh" if self.ssh_error is None
                 else f"not reachable over ssh ({self.ssh_error})")
        return f"{s.name}  {s.netns}  {s.lan_ip}  {alive}, {reach}"


def health(state: StandinsState, base: Path = BASE) -> list[Health]:
    standins = layout(state.count, base)
    spec = servers_spec(standins, base)
    running = state.processes()
    owned = owned_netns(state)
    report = []
    for s, server in zip(standins, spec.servers, strict=True):
        missing = [] if s.netns in owned else [f"namespace {s.netns}"]
        missing += [d for d in DAEMONS
                    if not (p := running.get(f"{s.name}/{d}")) or not p.alive()]
        error = None
        if LAN_NETNS not in owned:
            missing.append(f"namespace {LAN_NETNS}")
        if s.netns not in owned or f"{s.name}/sshd" not in running:
            error = "no sshd"
        else:
            try:
                out = ssh.run(server, spec, ["true"], timeout_s=15)
                if out.returncode != 0:
                    error = ssh.why_failed(out)
            except subprocess.TimeoutExpired:
                error = "no answer within 15 s"
        report.append(Health(s, tuple(missing), error))
    return report


def start(n: int, out: Path, progress: Progress = _quiet, base: Path = BASE) -> str:
    """Make ``n`` stand-ins and write their servers file to ``out``; the sentence to print."""
    standins = layout(n, base)
    check_tools()
    check_out_file(out)
    with _locked():
        state = StandinsState.load(base)
        if state is not None:
            if state.ready and state.count == n and all(
                    h.alive and h.ssh_error is None for h in health(state, base)):
                write_text(out, servers_yaml(servers_spec(standins, base)))
                return (f"the {n} stand-in servers are running already: wrote their servers "
                        f"file {out}")
            why = (f"{state.count} stand-in servers are running, not {n}"
                   if state.ready and state.count != n else
                   f"the {n} stand-in servers are not all healthy (`fabriclab servers status` "
                   "says which)" if state.ready else
                   "an earlier start of stand-in servers was left half-made")
            raise FabricLabError(f"{why}: {STOP_FIRST}")
        taken = [name for name in [LAN_NETNS, *(s.netns for s in standins)]
                 if os.path.lexists(NETNS_DIR / name)]
        if taken:
            raise FabricLabError(f"network namespace {taken[0]} exists but no stand-in "
                                 f"record names it: remove it (`ip netns del {taken[0]}`) if "
                                 f"it is a leftover, or {STOP_FIRST}")
        own_or_new_dir(base.parent, 0o755)
        if os.path.lexists(base):
            _remove_unrecorded(base)
        make_dir(base, 0o700)
        state = StandinsState.new(n)
        state.save(base)
        try:
            spec = _make(state, standins, base, progress)
            write_text(out, servers_yaml(spec))
        except BaseException:
            progress("could not finish: removing what was made")
            left = remove(state, base)
            if left:
                progress(f"left: {', '.join(left)}; run `fabriclab servers stop` again")
            raise
        state.ready = True
        state.save(base)
    return f"{n} stand-in servers running: wrote their servers file {out}"


def _remove_unrecorded(base: Path) -> None:
    """A base directory without a record: ``servers local`` was killed before writing it,
    so it holds at most a partial record. Anything else in it is refused, not removed."""
    entries = [e.name for e in os.scandir(base)]
    if any(not (name.startswith(".state.json.") and name.endswith(".partial"))
           for name in entries):
        raise FabricLabError(f"{base} exists without a stand-in record in it: look at what "
                             "it holds and remove it by hand")
    shutil.rmtree(base)


def remove(state: StandinsState, base: Path = BASE, grace_s: float = 2.0) -> list[str]:
    """Remove everything ``state`` records; return what is left (:func:`leftovers`). The
    record is deleted when nothing is left, else kept naming only what is."""
    left_procs = procs.terminate(live_processes(state), grace_s)
    occupied = {procs.netns_of(p.pid) for p in left_procs}
    for name, ns in owned_netns(state).items():
        if ns not in occupied:  # a process that outlived SIGKILL keeps its namespace
            subprocess.run(["ip", "netns", "del", name], capture_output=True,
                           stdin=subprocess.DEVNULL)
    if base.is_dir() and not base.is_symlink():
        for entry in os.scandir(base):
            if entry.name == StandinsState.path(base).name:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                Path(entry.path).unlink(missing_ok=True)
    left = leftovers(state, base)
    if not left:
        StandinsState.path(base).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            base.rmdir()
        with contextlib.suppress(OSError):
            base.parent.rmdir()  # only if empty: a real server's workdir may live there
        return []
    state.procs = {label: p.as_list() for label, p in state.processes().items() if p.alive()}
    owned = owned_netns(state)
    state.netns = {name: list(ns) for name, ns in owned.items()}
    state.veths = [v for v in state.veths if v.split("=")[1].split("/")[0] in owned]
    state.save(base)
    return left


def stop(base: Path = BASE) -> list[str]:
    """Remove the stand-ins; the lines to print (the last says what is left, if anything)."""
    with _locked():
        state = StandinsState.load(base)
        if state is None:
            if os.path.lexists(base):
                _remove_unrecorded(base)
                return [f"removed {base} (a start killed before it made anything)"]
            return ["no stand-in servers: nothing to stop"]
        before = leftovers(state, base)
        left = remove(state, base)
        if left:
            return [f"could not remove {', '.join(left)}; the record {StandinsState.path(base)}"
                    " names them: run `fabriclab servers stop` again"]
        return [f"stopped {state.count} stand-in servers: removed {len(before)} items "
                "(processes, namespaces, directories)"]


def progress_to_stderr(line: str) -> None:
    print(f"servers local: {line}", file=sys.stderr, flush=True)

