"""Bring an emulated fabric up and tear it down completely, also on Ctrl-C, SIGTERM or errors.

    with Fabric(plan, run_dir) as fab:          # static routes, no controller
        fab.host("h0").cmd("ping -c1 10.0.0.2")

    with Fabric(plan, run_dir, policy="vclos") as fab:   # the SDN app programs it
        fab.controller.create_job("train", hosts_wanted=8)

    docker = HostRuntime(runtime="docker")               # h0 and h1 are containers
    with Fabric(plan, run_dir, hosts={"h0": docker, "h1": docker}) as fab:
        ...
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from sdn_app.static_routes import FlowRule, static_rules
from testbed.core import placement
from testbed.core.atomic import write_text
from testbed.core.errors import FabricLabError
from testbed.core.host_runtime import HostRuntime
from testbed.core.safe_paths import own_or_new_dir
from testbed.core.servers import ServersSpec, server_rundirs
from testbed.core.topology import FabricPlan, dim_peers, fc_side, ring_neighbours
from testbed.emulator import cleanup, host_tcp, impairments, runlock, segmentation, switch_kinds
from testbed.emulator.controller_proc import Controller
from testbed.emulator.failpoints import failpoint
from testbed.emulator.netns_batch import run_batch
from testbed.emulator.preflight import (
    datapath,
    ovs_env,
    ovs_running,
    require_fabric_ready,
)

log = logging.getLogger(__name__)
MTU_BATCH = 32  # interfaces per command line typed into a node's shell


class Fabric:
    """A running Mininet fabric built from a plan.

    With a ``policy`` the SDN controller (``sdn_app.controller``) runs beside the fabric and
    programs it (``start`` returns once every switch is programmed); without one the fabric
    forwards with the static proactive rules from ``sdn_app.static_routes``. With
    ``switches="kernel"`` (see :mod:`testbed.emulator.switch_kinds`) every switch is a kernel
    bridge in a namespace of its own: no OpenFlow, no controller, destination forwarding only.
    ``hosts`` names the hosts that are not plain namespaces: with ``runtime: docker`` a host is
    a container (:mod:`testbed.emulator.containers`).
    """

    def __init__(self, plan: FabricPlan, run_dir: Path | str, policy: str | None = None,
                 ocs_delay: float = 0.0, switches: str = "ovs",
                 hosts: Mapping[str, HostRuntime] | None = None,
                 servers: ServersSpec | None = None) -> None:
        self.plan = plan
        self.run_dir = Path(run_dir)
        self.switches = switch_kinds.resolve(switches, plan, policy)
        self.policy = policy
        self.ocs_delay = ocs_delay
        self.controller: Controller | None = None
        self.datapath = datapath()
        self.net: Any = None
        self.state: cleanup.RunState | None = None
        self.timings: dict[str, float] = {}
        self._old_sigterm: Any = None
        self._locked = False
        self.leftovers: list[str] = []
        self.restarts: list[float] = []  # monotonic times of controller restarts
        self.containers = {n: rt for n, rt in (hosts or {}).items() if rt.is_container}
        unknown = sorted(set(self.containers) - {h.name for h in plan.hosts})
        if unknown:
            raise FabricLabError(f"{unknown[0]} is not a host of this fabric")
        self._docker: Any = None  # the Docker SDK client, with container hosts
        # how each impaired link is emulated, refused here (before anything is made) when
        # this kernel cannot (testbed.emulator.impairments)
        self.netem, self.impairments, self.delay_queues = impairments.on_this_kernel(plan)
        self.wires = impairments.wire_rates(plan)  # host -> its input wires' bit/s, if any
        host_tcp.check(plan)
        self.delay_lines: dict[str, subprocess.Popen] = {}
        # spread over stand-in servers (issue #43): which node runs where, refused here
        self.servers = servers
        self.placement = None if servers is None else placement.place(plan, servers)
        if servers is not None:
            self.check_servers(servers)

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Fabric:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        require_fabric_ready(self.server_rundirs())
        runlock.acquire(f"fabric of {self.run_dir}")  # released by stop(), after the teardown
        self._locked = True
        try:
            self._guard_other_runs()
            # a directory root made, or one only this user can write: never one planted
            own_or_new_dir(self.run_dir)
            write_text(self.run_dir / "topology.json", self.plan.to_json())
            # recorded before anything exists, so a kill at any later point is cleanable
            self.state = cleanup.RunState.new(
                self.run_dir, [s.name for s in self.plan.switches] if self._ovs else [],
                self._root_intfs())
            if self.servers is not None:
                self.state.servers = [{"name": s.name, "netns": str(s.netns),
                                       "ovs_rundir": server_rundirs(self.servers)[s.name]}
                                      for s in self.servers.servers]
                self.state.server_intfs = self._server_intfs()
            self.state.save()
        except BaseException:
            self._release_lock()
            raise
        self._catch_sigterm()
        try:
            if self.policy is not None and self._ovs:
                self.controller = Controller(self.run_dir, self.policy, self.ocs_delay,
                                             of_listen=self._of_listen(),
                                             lan_peers=self._lan_peers())
                self.state.add_process(self.controller.start())
            if self.containers:
                t0 = time.monotonic()
                self._start_docker()
                self.timings["docker_s"] = time.monotonic() - t0
            t0 = time.monotonic()
            self._build()
            self.timings["build_s"] = time.monotonic() - t0
            failpoint("bring-up")
            t0 = time.monotonic()
            self.net.start()
            self.timings["switches_s"] = time.monotonic() - t0
            t1 = time.monotonic()
            self._configure_hosts()
            self._set_mtu()
            segmentation.apply(self.plan, self.host_pids())
            host_tcp.apply(self.plan, self.host_pids())
            impairments.apply_input_rules(
                self.host_pids(), impairments.input_rules(self.plan, self.impairments))
            self.delay_lines = impairments.start_delay_lines(
                self.host_pids(), self.delay_queues, self.run_dir / "delay-lines",
                self.state.add_process, wires=self.wires)
            self.timings["hosts_s"] = time.monotonic() - t1
            t1 = time.monotonic()
            if self.controller is not None:
                self.controller.wait_ready()
            elif self._ovs:
                self.install_rules(static_rules(self.plan))
            self.timings["rules_s"] = time.monotonic() - t1
            self.timings["start_s"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise

    def stop(self) -> list[str]:
        """Tear everything down; return what could not be removed (empty when clean). The
        run's state file stays until everything it names is verified gone. Ctrl-C and
        SIGTERM during the teardown are held back and raised (as KeyboardInterrupt) after it.
        (Blocking them would not do: the kernel hands a process signal to any thread that
        does not block it, and Python then interrupts the main thread anyway.)"""
        if threading.current_thread() is not threading.main_thread():
            return self._teardown()
        deferred: list[int] = []
        held = {sig: signal.signal(sig, lambda signum, _frame: deferred.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._teardown()
        finally:
            for sig, handler in held.items():
                signal.signal(sig, handler)
            self._restore_sigterm()
            if deferred:
                raise KeyboardInterrupt

    def _teardown(self) -> list[str]:
        t0 = time.monotonic()
        if self.controller is not None:
            self.controller.stop()
        failpoint("teardown")
        if self.net is not None:
            if not self._ovs or self._all_ovs_running():
                try:
                    self.net.stop()
                except Exception as exc:  # keep going: the state file names the rest
                    log.warning("mininet stop failed: %s", exc)
            # else: Mininet's own stop would wait forever on ovs-vsctl; cleanup does it all
            self.net = None
        left: list[str] = []
        if self.state is not None:
            left = cleanup.remove(self.state)
            if not left:
                self.state.forget()
            else:
                log.warning("teardown left %s; `fabriclab clean` removes it later",
                            ", ".join(left))
            self.state = None
        self.leftovers = left
        self._release_lock()
        self.timings["stop_s"] = time.monotonic() - t0
        return left

    def set_fair_salt(self, salt: int) -> None:
        """Every fair-queued interface's classifier rehashed with ``salt``
        (:func:`testbed.emulator.fair_queue.run_salt`), before the jobs start."""
        from testbed.emulator.fair_queue import filter_command
        from testbed.emulator.shaping import ShapedIntf

        cmd = filter_command("replace", salt=salt)
        for node in self.net.hosts + self.net.switches:
            for intf in node.intfList():
                if not (isinstance(intf, ShapedIntf) and intf.fair_quantum):
                    continue
                if out := intf.tc(cmd).strip():
                    raise FabricLabError(f"could not set the fair queues' hash on "
                                         f"{intf.name}: {out}")

    def health(self) -> str | None:
        """None while the fabric can carry traffic, else one sentence saying why not. A
        controller that died is restarted (it reinstalls every switch and running job)."""
        # a stopped daemon refuses at once; a busy one (a software-emulated VM's, at 100%
        # CPU) answered only after more than 3 s once: it gets a second, longer chance
        if (self._ovs and not self._all_ovs_running()
                and not self._all_ovs_running(timeout_s=20)):
            return ("Open vSwitch stopped during the run (ovs-vswitchd or ovsdb-server no "
                    "longer answers), so the fabric forwards nothing; the traces so far are "
                    "kept; start it again with `bash scripts/start-ovs.sh` as root, then run "
                    "`fabriclab clean`")
        if problem := impairments.delay_line_problem(self.delay_lines):
            return problem
        if self.controller is None:
            return None
        self._restart_exited_controller()
        try:
            broken = self.controller.get("/health").get("broken_jobs", {})
        except (OSError, FabricLabError):
            broken = {}  # a slow answer is not a fault; the next check asks again
            self._restart_exited_controller()  # but it may have died while we asked
        if broken:
            return next(iter(broken.values()))
        return None

    def _restart_exited_controller(self) -> None:
        ctl = self.controller
        if ctl is None or not (reason := ctl.gone()):
            return
        log.warning("%s: restarting it", reason)
        assert self.state is not None
        self.state.add_process(ctl.start())
        self.restarts.append(time.monotonic())
        ctl.wait_ready()

    # -- access ------------------------------------------------------------------------------

    def host(self, name: str) -> Any:
        return self.net.get(name)

    def impairment_record(self) -> dict[str, Any]:
        """``impairments.json``'s content now: each impaired link as specified and emulated,
        with the packets its loss judged and dropped so far, per direction."""
        if not self.impairments and not self.delay_queues:
            return {"links": []}
        lines = {host: stats | {"delays_us": sorted(q["delay_us"] for q in
                                                   self.delay_queues.get(host, []))}
                 | ({"wires_bit_s": self.wires[host]} if host in self.wires else {})
                 for host, stats in impairments.read_delay_lines(
                     self.run_dir / "delay-lines").items()}
        counters = impairments.read_input_counters(self.host_pids())
        for imp in self.impairments:
            if imp.mechanism != impairments.NETEM:
                continue
            lk = next(x for x in self.plan.links if (x.a, x.b) == (imp.a, imp.b))
            for end, node, intf in (("a", lk.a, lk.a_intf), ("b", lk.b, lk.b_intf)):
                out = self.net.get(node).cmd(f"tc -s qdisc show dev {intf}")
                counters[f"{lk.a}-{lk.b}:{end}"] = impairments.parse_netem_counters(out)
        return impairments.record(self.impairments, counters) | (
            {"delay_lines": lines} if lines else {})

    def host_pids(self) -> dict[str, int]:
        return {h.name: h.pid for h in self.net.hosts}

    def namespace_pids(self) -> dict[str, int]:
        """{node: a PID in its namespace} for every node not in the root namespace: the hosts
        and, with kernel bridges, the switches (what the link sampler reads)."""
        apart = not self._ovs or self.servers is not None  # in a namespace of their own
        kernel = {s.name: s.pid for s in self.net.switches} if apart else {}
        return self.host_pids() | kernel

    @property
    def _ovs(self) -> bool:
        return self.switches == "ovs"

    def popen(self, host: str, args: list[str], **kwargs: Any) -> subprocess.Popen:
        """Start a process inside a host (argument list, never a shell string)."""
        proc = self.host(host).popen(args, **kwargs)
        if self.state is not None:  # recorded while still our unreaped child
            self.state.add_process(proc.pid)
        return proc

    def wait_listening(self, host: str, port: int, timeout_s: float = 10.0) -> None:
        """Return once a TCP socket in ``host`` listens on ``port`` (a server just started
        there, e.g. iperf3 -s); FabricLabError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.host(host).cmd(f"ss -Hltn sport = :{int(port)}").strip():
                return
            time.sleep(0.05)
        raise FabricLabError(f"nothing listened on port {port} in {host} within {timeout_s:g} s")

    def install_rules(self, rules: list[FlowRule]) -> None:
        """Add proactive rules with ovs-ofctl (one call per switch)."""
        per_switch: dict[str, list[str]] = defaultdict(list)
        for r in rules:
            per_switch[r.switch].append(r.to_ofctl())
        for switch, lines in per_switch.items():
            out = subprocess.run(
                ["ovs-ofctl", "-O", "OpenFlow13", "add-flows", switch, "-"],
                input="\n".join(lines) + "\n", capture_output=True, text=True,
                env=ovs_env(self.ovs_rundir_of(switch)),
            )
            if out.returncode != 0:
                raise FabricLabError(f"could not program {switch}: {out.stderr.strip()}")

    def switch_ports(self) -> list[str] | None:
        """The Open vSwitch interfaces of the fabric's switches (None on kernel bridges)."""
        if self.servers is not None:
            return [i for names in self._server_intfs().values() for i in names]
        return self._root_intfs() if self._ovs else None

    def ovs_rundir_list(self) -> list[str | None]:
        """Every Open vSwitch the fabric's bridges are in (None: this machine's)."""
        return list((self.server_rundirs() or {"": None}).values())

    # -- internals ---------------------------------------------------------------------------

    def ovs_rundir_of(self, switch: str) -> str | None:
        """The OVS run directory of ``switch``'s server (None: this machine's own OVS)."""
        if self.placement is None or self.servers is None:
            return None
        return server_rundirs(self.servers)[self.placement.server_of[switch]]

    def server_rundirs(self) -> dict[str, str] | None:
        """Server → the run directory of its Open vSwitch (None: one machine, its own)."""
        if self.servers is None:
            return None
        return server_rundirs(self.servers)

    def _all_ovs_running(self, timeout_s: int = 3) -> bool:
        return all(ovs_running(timeout_s, rundir) for rundir in self.ovs_rundir_list())

    @staticmethod
    def check_servers(servers: ServersSpec | None) -> None:
        """Only stand-in servers for now: their records are this machine's (one kernel)."""
        for s in servers.servers if servers is not None else []:
            if s.netns is None:
                raise FabricLabError(
                    f"servers: {s.name} is not a stand-in (no netns): fabrics over real "
                    "machines are not built yet (each server would keep its own records); "
                    "use `fabriclab servers local N --out FILE`")

    def _of_listen(self) -> tuple[str, str] | None:
        """Where OpenFlow listens with servers: the first server's LAN address, in its
        namespace, so that every server's switches reach it over the LAN."""
        if self.servers is None:
            return None
        first = self.servers.servers[0]
        return str(first.netns), first.lan_ip

    def _lan_peers(self) -> list[str] | None:
        return None if self.servers is None else [s.lan_ip for s in self.servers.servers]

    def _server_intfs(self) -> dict[str, list[str]]:
        """Per server, the switch-side interfaces made in its namespace (ports and tunnels)."""
        assert self.placement is not None
        per: dict[str, list[str]] = defaultdict(list)
        for lk in self.plan.links:
            for node, intf in ((lk.a, lk.a_intf), (lk.b, lk.b_intf)):
                if not self.plan.is_host(node):
                    per[self.placement.server_of[node]].append(intf)
        return dict(per)

    def _set_mtu(self) -> None:
        """With links crossing servers, every emulated interface at the servers file's MTU:
        a full frame plus VXLAN's 50 bytes must fit the LAN's."""
        if self.placement is None or not self.placement.crossing:
            return
        for node in self.net.hosts + self.net.switches:
            names = [i.name for i in node.intfList() if i.name != "lo"]
            for k in range(0, len(names), MTU_BATCH):  # a terminal line holds 4095 bytes
                out = node.cmd("; ".join(f"ip link set dev {n} mtu {self.placement.mtu}"
                                         for n in names[k:k + MTU_BATCH]))
                if out.strip():
                    raise FabricLabError(f"could not set the MTU on {node.name}: "
                                         f"{out.strip()}")

    def _root_intfs(self) -> list[str]:
        if self.servers is not None:
            return []  # on stand-in servers, switch ports are in the servers' namespaces
        names = []
        for lk in self.plan.links:
            for node, intf in ((lk.a, lk.a_intf), (lk.b, lk.b_intf)):
                if not self.plan.is_host(node) and self._ovs:
                    names.append(intf)
        return names

    def _start_docker(self) -> None:
        """The engine (started, and recorded to be stopped, if it was not running) and every
        image the container hosts need, checked before anything is built."""
        from testbed.emulator import docker_engine, images
        from testbed.emulator.containers import image_error

        assert self.state is not None
        self.state.containers = True
        self.state.save()
        started = docker_engine.start(cleanup.STATE_DIR / "dockerd.log")
        self.state.engine = [p.as_list() for p in started]
        self.state.save()
        self._docker = docker_engine.client()
        for image in sorted({rt.image for rt in self.containers.values()}):
            if problem := image_error(self._docker, images.ensure_worker(
                    self._docker, image, say=log.warning)):
                raise FabricLabError(problem)

    def _container_hosts(self, topo: Any) -> None:
        """Make the container hosts' node class the container one (Mininet takes ``cls`` per
        node from the topology)."""
        from testbed.emulator import images
        from testbed.emulator.containers import ContainerHost

        for name, rt in self.containers.items():
            info = dict(topo.nodeInfo(name))
            info["cls"] = partial(ContainerHost, state=self.state, runtime=rt,
                                  image=images.resolve(rt.image), run_dir=self.run_dir,
                                  client=self._docker)
            topo.setNodeInfo(name, info)

    def _remote_nodes(self, topo: Any) -> None:
        """With servers, every node is a Cluster Edition node on its server, and every link
        that crosses is a VXLAN tunnel (:mod:`testbed.emulator.remote_nodes`); Mininet
        takes ``cls`` per node and per link from the topology."""
        if self.placement is None or self.servers is None:
            return
        from testbed.emulator.remote_nodes import CrossLink, RemoteOwnedHost, RemoteOwnedSwitch

        assert self.state is not None
        for name, server in self.placement.server_of.items():
            where = {"server": self.servers.by_name(server), "servers": self.servers}
            info = dict(topo.nodeInfo(name))
            if self.plan.is_host(name):
                info["cls"] = partial(RemoteOwnedHost, state=self.state, **where)
            else:
                info["cls"] = partial(RemoteOwnedSwitch, state=self.state, **where,
                                      datapath=self.datapath, protocols="OpenFlow13",
                                      failMode="secure")
            topo.setNodeInfo(name, info)
        crossing = {(c.link.a, c.link.a_port): c.vni for c in self.placement.crossing}
        for a, b, key, info in topo.links(sort=False, withKeys=True, withInfo=True):
            vni = crossing.get((info["node1"], info["port1"]))
            if vni is None:
                vni = crossing.get((info["node2"], info["port2"]))
            if vni is not None:
                topo.setlinkInfo(a, b, {**info, "cls": partial(
                    CrossLink, mark=self.state.mark, vni=vni, mtu=self.placement.mtu)}, key)

    def _release_lock(self) -> None:
        if self._locked:
            runlock.release()
            self._locked = False

    def _guard_other_runs(self) -> None:
        """Clean what dead runs left, then refuse to build over names that exist: they are
        not ours (Mininet would delete them), and this run could not tell them apart."""
        cleanup.clean_stale()
        existing: set[str] = set()
        for rundir in self.ovs_rundir_list():
            existing |= cleanup.existing_bridges(rundir)
        taken = sorted({s.name for s in self.plan.switches} & existing)
        taken += cleanup.existing_intfs(self._root_intfs())
        if taken:
            raise FabricLabError(
                f"{taken[0]} already exists and is not from a crashed fabriclab run this "
                "machine can prove: remove it yourself (`ovs-vsctl del-br` or `ip link del`) "
                "if it is a leftover, or stop whatever made it"
            )

    def _build(self) -> None:
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import RemoteController

        from testbed.emulator.mn_nodes import KernelBridge, OwnedHost, OwnedSwitch
        from testbed.emulator.mn_topo import FabricTopo
        from testbed.emulator.shaping import ShapedLink

        setLogLevel("error")
        assert self.state is not None
        switch: Any = partial(OwnedSwitch, state=self.state, datapath=self.datapath,
                              protocols="OpenFlow13", failMode="secure")
        if not self._ovs:
            switch = partial(KernelBridge, state=self.state, plan=self.plan)
        host = partial(OwnedHost, state=self.state)
        link = partial(ShapedLink, mark=self.state.mark)
        topo = FabricTopo(self.plan, netem=self.netem)
        self._container_hosts(topo)
        self._remote_nodes(topo)
        self.net = Mininet(topo=topo, switch=switch, host=host, link=link,
                           controller=None, build=False, autoSetMacs=False,
                           autoStaticArp=False, waitConnected=False)
        if self.controller is not None:
            ip, port = self.controller.address
            self.net.addController(RemoteController("c0", ip=ip, port=port))
        self.net.build()

    def _configure_hosts(self) -> None:
        """Static ARP and ring/mesh host routes, fed to one ``ip -batch -`` per host on its
        standard input (no file anyone could swap); no IPv6 chatter."""
        for h in self.plan.hosts:
            node = self.host(h.name)
            node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
            problem = run_batch(node.pid, ["ip", "-batch", "-"], self._host_commands(h.index))
            if problem:
                raise FabricLabError(f"could not configure {h.name}: {problem}")

    def _host_commands(self, index: int) -> Iterator[str]:
        plan, me = self.plan, self.plan.hosts[index]
        if plan.kind != "multidim":
            nic = me.nics[0]
            for other in plan.hosts:
                if other.index != index:
                    o = other.nics[0]
                    yield f"neigh replace {o.ip} lladdr {o.mac} dev {nic.intf} nud permanent"
            return
        sizes = plan.spec.sizes
        for d, dim in enumerate(plan.spec.dims):
            if dim.size == 1:
                continue
            if dim.kind == "fully_connected":
                me_k = me.coords[d]
                for j in dim_peers(index, d, sizes):
                    if j != index:
                        o = plan.hosts[j].nic(d, fc_side(me_k))
                        nic = me.nic(d, fc_side(plan.hosts[j].coords[d]))
                        yield f"route replace {o.ip}/32 dev {nic.intf}"
                        yield f"neigh replace {o.ip} lladdr {o.mac} dev {nic.intf} nud permanent"
                continue
            if dim.kind == "switch" or dim.size == 2:
                nic = me.nic(d)
                for j in dim_peers(index, d, sizes):
                    if j != index:
                        o = plan.hosts[j].nic(d)
                        yield f"neigh replace {o.ip} lladdr {o.mac} dev {nic.intf} nud permanent"
                continue
            nxt, prv = ring_neighbours(index, d, sizes)
            for peer, mine, theirs in ((nxt, "next", "prev"), (prv, "prev", "next")):
                nic, o = me.nic(d, mine), plan.hosts[peer].nic(d, theirs)
                yield f"route replace {o.ip}/32 dev {nic.intf}"
                yield f"neigh replace {o.ip} lladdr {o.mac} dev {nic.intf} nud permanent"

    def _catch_sigterm(self) -> None:
        """Turn SIGTERM into KeyboardInterrupt so `with Fabric(...)` unwinds and tears down."""
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, frame: object) -> None:
            raise KeyboardInterrupt

        self._old_sigterm = signal.signal(signal.SIGTERM, handler)

    def _restore_sigterm(self) -> None:
        if self._old_sigterm is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None
