"""The fabriclab SDN app (Ryu API, OpenFlow 1.3, proactive).

Launched as ``python -m os_ken.cmd.manager sdn_app.controller`` (the testbed does this; see
``testbed.emulator.controller_proc``) with its settings in the environment:

    FABRICLAB_TOPOLOGY   topology JSON written by the testbed (required)
    FABRICLAB_POLICY     a registered routing policy (default: by fabric kind)
    FABRICLAB_API_FD     the listening Unix socket of the HTTP API (required)
    FABRICLAB_OF_FD      the listening OpenFlow socket (else os-ken binds its own)
    FABRICLAB_OCS_DELAY  seconds a new OCS circuit takes to come up (default 0)
    FABRICLAB_JOBS       file holding running jobs across controller restarts (optional)

On every switch connection it wipes the switch and installs the switch's whole program (base
rules, ECMP groups, every running job's rules), then waits for a barrier reply before it calls
the switch ready. Nothing is forwarded through the controller: the fabrics have loops.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import eventlet.greenio
import eventlet.wsgi  # both os-ken and Ryu run on eventlet

from sdn_app.api import ApiError, JobRequest, make_app
from sdn_app.compat import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    FRAMEWORK,
    MAIN_DISPATCHER,
    RyuApp,
    hub,
    ofp_event,
    ofproto_v1_3,
    set_ev_cls,
)
from sdn_app.jobs import JobManager
from sdn_app.listeners import (
    API_FD_ENV,
    OF_FD_ENV,
    inherited_socket,
    serve_openflow_on,
    switch_refused,
)
from sdn_app.policies import policy_for
from sdn_app.program import (
    GroupRule,
    Program,
    Uplink,
    base_program,
    broken_paths,
    full_program,
    uplink_ports,
)
from sdn_app.static_routes import FlowRule
from testbed.core.topology import FabricPlan

log = logging.getLogger("fabriclab.controller")
if (_of_sock := inherited_socket(OF_FD_ENV)) is not None:  # before the framework listens
    serve_openflow_on(_of_sock)
BARRIER_TIMEOUT = 10.0
STATS_PERIOD = 1.0


class FabricController(RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]  # noqa: RUF012 (Ryu reads a list)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan = FabricPlan.from_json(Path(os.environ["FABRICLAB_TOPOLOGY"]).read_text())
        self.policy = policy_for(self.plan, os.environ.get("FABRICLAB_POLICY") or None)
        self.api_sock = inherited_socket(API_FD_ENV)  # see sdn_app.listeners
        self.ocs_delay = float(os.environ.get("FABRICLAB_OCS_DELAY", "0"))
        jobs_file = os.environ.get("FABRICLAB_JOBS")
        self.jobs = JobManager(self.plan, self.policy, Path(jobs_file) if jobs_file else None)
        self.jobs.load()
        self.names = {s.dpid: s.name for s in self.plan.switches}
        self.datapaths: dict[str, Any] = {}
        self.ready: set[str] = set()
        self.barriers: dict[tuple[int, int], Any] = {}
        self.port_stats: dict[str, dict[int, dict[str, int]]] = {}
        self.uplinks = uplink_ports(self.plan)  # (switch, port) -> (leaf, spine)
        self.down: set[Uplink] = set()  # uplinks whose port reports link down
        self.lock = hub.BoundedSemaphore(1)  # one job change (and its barriers) at a time
        log.info("policy %s, %d switches, %d jobs reloaded", self.policy,
                 len(self.plan.switches), len(self.jobs.list_jobs()))
        self.threads.append(hub.spawn(self._serve_api))
        self.threads.append(hub.spawn(self._poll_stats))

    # -- OpenFlow events ---------------------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _on_features(self, ev: Any) -> None:
        dp = ev.msg.datapath
        name = self.names.get(dp.id)
        if name is None:
            log.warning("ignoring unknown switch dpid %016x", dp.id)
            return
        if (why := switch_refused(dp.socket)) is not None:
            log.warning("refusing %s (dpid %016x) from %s", name, dp.id, why)
            dp.close()
            return
        if (old := self.datapaths.get(name)) is not None and old is not dp and old.is_active:
            log.warning("refusing a second connection for %s (dpid %016x): it is connected",
                        name, dp.id)
            dp.close()
            return
        self.datapaths[name] = dp
        self.ready.discard(name)
        hub.spawn(self._program_switch, name, dp)

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _on_dead(self, ev: Any) -> None:
        name = self.names.get(ev.datapath.id)
        if name and self.datapaths.get(name) is ev.datapath:
            self.datapaths.pop(name, None)
            self.ready.discard(name)
            log.info("%s disconnected", name)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _on_barrier(self, ev: Any) -> None:
        event = self.barriers.pop((ev.msg.datapath.id, ev.msg.xid), None)
        if event is not None:
            event.set()

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def _on_port_stats(self, ev: Any) -> None:
        name = self.names.get(ev.msg.datapath.id)
        self.port_stats[name] = {
            s.port_no: {"rx_bytes": s.rx_bytes, "tx_bytes": s.tx_bytes,
                        "rx_packets": s.rx_packets, "tx_packets": s.tx_packets}
            for s in ev.msg.body if s.port_no < ofproto_v1_3.OFPP_MAX
        }

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _on_port_status(self, ev: Any) -> None:
        """An uplink went down or came back: ECMP groups avoid spines that lost a link (the
        buckets' watch_port already skips a dead local uplink; this also spares the far leaf)."""
        msg, name = ev.msg, self.names.get(ev.msg.datapath.id)
        uplink = self.uplinks.get((name, msg.desc.port_no))
        if uplink is None:
            return
        ofp = msg.datapath.ofproto
        down = (msg.reason == ofp.OFPPR_DELETE or bool(msg.desc.state & ofp.OFPPS_LINK_DOWN)
                or bool(msg.desc.config & ofp.OFPPC_PORT_DOWN))
        if down == (uplink in self.down):
            return
        (self.down.add if down else self.down.discard)(uplink)
        log.warning("link leaf%d-spine%d is %s (reported by %s)", *uplink,
                    "down" if down else "up", name)
        hub.spawn(self._reroute)

    def _reroute(self) -> None:
        """Re-send the policy's base program for the uplinks that are up now: groups are
        modified in place, flows overwritten (an add replaces the rule of equal match and
        priority), so ECMP groups and per-pair routes alike avoid the dead links."""
        if not self.uplinks:
            return
        with self.lock:
            prog = base_program(self.plan, self.policy, frozenset(self.down))
            for name, dp in list(self.datapaths.items()):
                mine = prog.for_switch(name)
                for g in mine.groups:
                    dp.send_msg(self._group_mod(dp, g, modify=True))
                for f in mine.flows:
                    dp.send_msg(self._flow_mod(dp, f))
                self._barrier(dp)
        for reason in self.broken_jobs().values():
            log.error("%s", reason)

    def broken_jobs(self) -> dict[str, str]:
        """Jobs whose isolated path crosses a link that is down, each with one sentence."""
        down = frozenset(self.down)
        return {a.job_id: reason for a in self.jobs.allocations()
                if (reason := broken_paths(a, down)) is not None}

    # -- programming -------------------------------------------------------------------------

    def _program_switch(self, name: str, dp: Any) -> None:
        """Wipe the switch, install its whole program, wait for the barrier."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        with self.lock:
            dp.send_msg(parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                          out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))
            dp.send_msg(parser.OFPGroupMod(dp, command=ofp.OFPGC_DELETE,
                                           group_id=ofp.OFPG_ALL))
            prog = full_program(self.plan, self.policy, self.jobs.allocations(),
                                frozenset(self.down))
            self._send(dp, prog.for_switch(name))
            if self._barrier(dp):
                self.ready.add(name)
                log.info("%s programmed (%d ready of %d)", name, len(self.ready),
                         len(self.plan.switches))
            else:
                log.error("%s did not answer the barrier", name)

    def _send(self, dp: Any, prog: Program) -> None:
        for g in prog.groups:
            dp.send_msg(self._group_mod(dp, g))
        for f in prog.flows:
            dp.send_msg(self._flow_mod(dp, f))

    def _flow_mod(self, dp: Any, f: FlowRule) -> Any:
        ofp, parser = dp.ofproto, dp.ofproto_parser
        match: dict[str, Any] = {}
        if f.in_port is not None:
            match["in_port"] = f.in_port
        if f.eth_src is not None:
            match["eth_src"] = f.eth_src
        if f.eth_dst is not None:
            match["eth_dst"] = f.eth_dst
        action = (parser.OFPActionGroup(f.group) if f.group is not None
                  else parser.OFPActionOutput(f.out_port))
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [action])]
        return parser.OFPFlowMod(dp, cookie=f.cookie, priority=f.priority,
                                 match=parser.OFPMatch(**match), instructions=inst)

    def _group_mod(self, dp: Any, g: GroupRule, modify: bool = False) -> Any:
        """A SELECT group; each bucket watches its own port, so OVS skips a bucket whose
        port is down at once, before the controller has re-sent the groups."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        buckets = [parser.OFPBucket(weight=1, watch_port=p, watch_group=ofp.OFPG_ANY,
                                    actions=[parser.OFPActionOutput(p)]) for p in g.ports]
        return parser.OFPGroupMod(dp, command=ofp.OFPGC_MODIFY if modify else ofp.OFPGC_ADD,
                                  type_=ofp.OFPGT_SELECT, group_id=g.group_id, buckets=buckets)

    def _barrier(self, dp: Any) -> bool:
        req = dp.ofproto_parser.OFPBarrierRequest(dp)
        dp.set_xid(req)
        event = hub.Event()
        self.barriers[(dp.id, req.xid)] = event
        dp.send_msg(req)
        return bool(event.wait(timeout=BARRIER_TIMEOUT))

    def _install(self, prog: Program) -> None:
        """Send a program to the switches it names and wait for all their barriers."""
        switches = sorted({f.switch for f in prog.flows} | {g.switch for g in prog.groups})
        missing = [s for s in switches if s not in self.datapaths]
        if missing:
            raise ApiError(503, f"switch {missing[0]} is not connected")
        for s in switches:
            self._send(self.datapaths[s], prog.for_switch(s))
        for s in switches:
            if not self._barrier(self.datapaths[s]):
                raise ApiError(503, f"switch {s} did not confirm its rules")

    def _delete_cookie(self, cookie: int) -> None:
        for dp in list(self.datapaths.values()):
            ofp, parser = dp.ofproto, dp.ofproto_parser
            dp.send_msg(parser.OFPFlowMod(dp, cookie=cookie, cookie_mask=0xFFFFFFFFFFFFFFFF,
                                          command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                          out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))
        for dp in list(self.datapaths.values()):
            self._barrier(dp)

    # -- API backend -------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return {"ok": len(self.ready) == len(self.plan.switches), "framework": FRAMEWORK,
                "policy": self.policy, "switches": len(self.plan.switches),
                "connected": len(self.datapaths), "ready": len(self.ready),
                "links_down": [f"leaf{leaf}-spine{spine}" for leaf, spine in sorted(self.down)],
                "broken_jobs": self.broken_jobs()}

    def topology(self) -> dict[str, Any]:
        return self.plan.to_dict()

    def list_jobs(self) -> list[dict[str, Any]]:
        return self.jobs.list_jobs()

    def circuits(self) -> list[dict[str, Any]]:
        return self.jobs.circuits()

    def ports(self) -> dict[str, Any]:
        return {name: {str(p): c for p, c in ports.items()}
                for name, ports in self.port_stats.items()}

    def create_job(self, req: JobRequest) -> dict[str, Any]:
        with self.lock:
            desc, prog = self.jobs.create(req)
            circuits = Program([f for f in prog.flows if f.switch.startswith("ocs")])
            rest = Program([f for f in prog.flows if not f.switch.startswith("ocs")],
                           prog.groups)
            try:
                self._install(rest)
                if circuits.flows:
                    hub.sleep(self.ocs_delay)  # the optical switch reconfigures
                    self._install(circuits)
            except ApiError:
                _, cookie = self.jobs.delete(req.job_id)
                self._delete_cookie(cookie)
                raise
            log.info("job %s placed on %s", req.job_id, desc.get("host_names"))
            return desc

    def delete_job(self, job_id: str) -> dict[str, Any]:
        with self.lock:
            desc, cookie = self.jobs.delete(job_id)
            self._delete_cookie(cookie)
            log.info("job %s released", job_id)
            return desc

    # -- background threads ------------------------------------------------------------------

    def _serve_api(self) -> None:
        if self.api_sock is None:
            log.error("no API socket (%s is not set): the API is off", API_FD_ENV)
            return
        log.info("API on the Unix socket %s", self.api_sock.getsockname())
        eventlet.wsgi.server(eventlet.greenio.GreenSocket(self.api_sock), make_app(self),
                             log_output=False)

    def _poll_stats(self) -> None:
        while True:
            for dp in list(self.datapaths.values()):
                parser = dp.ofproto_parser
                dp.send_msg(parser.OFPPortStatsRequest(dp, 0, dp.ofproto.OFPP_ANY))
            hub.sleep(STATS_PERIOD)
