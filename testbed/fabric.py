"""Bring an emulated fabric up and tear it down completely, also on Ctrl-C, SIGTERM or errors.

    with Fabric(plan, run_dir) as fab:          # static routes, no controller
        fab.host("h0").cmd("ping -c1 10.0.0.2")

    with Fabric(plan, run_dir, policy="vclos") as fab:   # the SDN app programs it
        fab.controller.create_job("train", hosts_wanted=8)
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from sdn_app.static_routes import FlowRule, static_rules
from testbed import cleanup
from testbed.controller_proc import Controller
from testbed.errors import FabricLabError
from testbed.preflight import datapath, require_fabric_ready
from testbed.topology import FabricPlan, dim_peers, ring_neighbours

log = logging.getLogger(__name__)


class Fabric:
    """A running Mininet fabric built from a plan.

    With a ``policy`` the SDN controller (``sdn_app.controller``) runs beside the fabric and
    programs it (``start`` returns once every switch is programmed); without one the fabric
    forwards with the static proactive rules from ``sdn_app.static_routes``.
    """

    def __init__(self, plan: FabricPlan, run_dir: Path | str, policy: str | None = None,
                 ocs_delay: float = 0.0) -> None:
        self.plan = plan
        self.run_dir = Path(run_dir)
        self.policy = policy
        self.ocs_delay = ocs_delay
        self.controller: Controller | None = None
        self.datapath = datapath()
        self.net: Any = None
        self.state: cleanup.RunState | None = None
        self.timings: dict[str, float] = {}
        self._old_sigterm: Any = None
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Fabric:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        require_fabric_ready()
        self._guard_other_runs()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "topology.json").write_text(self.plan.to_json())
        self.state = cleanup.RunState(
            run_id=f"{self.run_dir.name}-{uuid.uuid4().hex[:6]}", owner_pid=os.getpid(),
            bridges=[s.name for s in self.plan.switches], root_intfs=self._root_intfs(),
        )
        self.state.save()
        self._catch_sigterm()
        try:
            if self.policy is not None:
                self.controller = Controller(self.run_dir, self.policy, self.ocs_delay)
                self.state.pids.append(self.controller.start())
                self.state.save()
            t0 = time.monotonic()
            self._build()
            self.timings["build_s"] = time.monotonic() - t0
            t0 = time.monotonic()
            self.net.start()
            self.timings["switches_s"] = time.monotonic() - t0
            t1 = time.monotonic()
            self._configure_hosts()
            self.timings["hosts_s"] = time.monotonic() - t1
            t1 = time.monotonic()
            if self.controller is None:
                self.install_rules(static_rules(self.plan))
            else:
                self.controller.wait_ready()
            self.timings["rules_s"] = time.monotonic() - t1
            self.timings["start_s"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise

    def stop(self) -> list[str]:
        """Tear everything down; return what could not be removed (empty when clean)."""
        t0 = time.monotonic()
        if self.controller is not None:
            self.controller.stop()
        if self.net is not None:
            try:
                self.net.stop()
            except Exception as exc:  # keep going: the state file names the rest
                log.warning("mininet stop failed: %s", exc)
            self.net = None
        left: list[str] = []
        if self.state is not None:
            cleanup.remove(self.state)
            left = cleanup.leftovers(self.state)
            if not left:
                self.state.forget()
            self.state = None
        self._restore_sigterm()
        self.timings["stop_s"] = time.monotonic() - t0
        return left

    # -- access ------------------------------------------------------------------------------

    def host(self, name: str) -> Any:
        return self.net.get(name)

    def host_pids(self) -> dict[str, int]:
        return {h.name: h.pid for h in self.net.hosts}

    def popen(self, host: str, args: list[str], **kwargs: Any) -> subprocess.Popen:
        """Start a process inside a host (argument list, never a shell string)."""
        proc = self.host(host).popen(args, **kwargs)
        with self._lock:  # jobs start their workers from several threads
            if self.state is not None:
                self.state.pids.append(proc.pid)
                self.state.save()
        return proc

    def install_rules(self, rules: list[FlowRule]) -> None:
        """Add proactive rules with ovs-ofctl (one call per switch)."""
        per_switch: dict[str, list[str]] = defaultdict(list)
        for r in rules:
            per_switch[r.switch].append(r.to_ofctl())
        for switch, lines in per_switch.items():
            out = subprocess.run(
                ["ovs-ofctl", "-O", "OpenFlow13", "add-flows", switch, "-"],
                input="\n".join(lines) + "\n", capture_output=True, text=True,
            )
            if out.returncode != 0:
                raise FabricLabError(f"could not program {switch}: {out.stderr.strip()}")

    # -- internals ---------------------------------------------------------------------------

    def _root_intfs(self) -> list[str]:
        names = []
        for lk in self.plan.links:
            for node, intf in ((lk.a, lk.a_intf), (lk.b, lk.b_intf)):
                if not self.plan.is_host(node):
                    names.append(intf)
        return names

    def _guard_other_runs(self) -> None:
        cleanup.clean_stale()
        mine = {s.name for s in self.plan.switches}
        clash = mine & cleanup.existing_bridges()
        if clash:
            raise FabricLabError(
                f"bridge {sorted(clash)[0]} already exists: another fabriclab run is up "
                "(stop it) or something else uses these names (`fabriclab clean` removes "
                "leftovers of crashed runs)"
            )

    def _build(self) -> None:
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import OVSSwitch, RemoteController

        from testbed.mn_topo import FabricTopo
        from testbed.shaping import ShapedLink

        setLogLevel("error")
        switch = partial(OVSSwitch, datapath=self.datapath, protocols="OpenFlow13",
                         failMode="secure")
        self.net = Mininet(topo=FabricTopo(self.plan), switch=switch, link=ShapedLink,
                           controller=None, build=False, autoSetMacs=False,
                           autoStaticArp=False, waitConnected=False)
        if self.controller is not None:
            ip, port = self.controller.address
            self.net.addController(RemoteController("c0", ip=ip, port=port))
        self.net.build()
        assert self.state is not None
        self.state.pids += [n.pid for n in self.net.hosts + self.net.switches]
        self.state.save()

    def _configure_hosts(self) -> None:
        """Static ARP and ring host routes, one ``ip -batch`` file per host; no IPv6 chatter."""
        setup = self.run_dir / "setup"
        setup.mkdir(exist_ok=True)
        for h in self.plan.hosts:
            path = setup / f"{h.name}.ip"
            path.write_text("\n".join(self._host_commands(h.index)) + "\n")
            out = self.host(h.name).cmd(
                "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 && "
                f"ip -batch {shlex.quote(str(path))} && echo fabriclab-ok"
            )
            if "fabriclab-ok" not in out:
                raise FabricLabError(f"could not configure {h.name}: {out.strip()}")

    def _host_commands(self, index: int) -> Iterator[str]:
        plan, me = self.plan, self.plan.hosts[index]
        if plan.kind != "multidim":
            nic = me.nics[0]
            for other in plan.hosts:
                if other.index != index:
                    o = other.nics[0]
                    yield f"neigh replace {o.ip} lladdr {o.mac} dev {nic.intf} nud permanent"
            return
        sizes = tuple(d["size"] for d in plan.spec["dims"])
        for d, dim in enumerate(plan.spec["dims"]):
            if dim["size"] == 1:
                continue
            if dim["kind"] == "switch" or dim["size"] == 2:
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
