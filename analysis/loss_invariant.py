"""The loss invariant: packets are lost only where the fabric's queues drop them.

A shaped queue that overflows drops a packet and counts it (``drops`` in
``qdisc_samples.parquet``): that loss is part of the emulation. Any other loss is not. Per
leg of the run (``drops.json``: each solo baseline, then all jobs together) it checks:

- **every switch's byte balance**: the bytes the queues in front of a switch handed it (the
  egress qdiscs of the links into it) against the bytes it handed its own egress queues (sent,
  plus what waits in them at the leg's end). A switch that took in more than it passed on lost
  the difference on the way through, where no shaped queue counted it: a violation naming the
  switch, unless its own queues' drops can hold that much (:data:`DROPPED_PACKET_BYTES` each);
- **drop counters outside the queues**: an Open vSwitch interface's or the kernel's
  ``rx_dropped``/``tx_dropped`` of a switch port, the datapath's ``lost`` upcalls, the CPUs'
  full input backlogs: a violation naming the port (or the machine). A port's counted drops
  are a note instead when the hosts recovered every packet by fast retransmit in that leg:
  no retransmission timeout, and every resend accounted for by the counted drops (queues'
  and ports'). Each such drop cost its flow a round trip and a halved window; the job
  invariant judges whether that moved a job's time;
- **each job's hosts' TCP**: segments resent by fast retransmit (the receiver reported a hole)
  less those the receiver later said it had (D-SACK, in segments: :func:`needless_segments`),
  against the segments the switches' queues dropped in that leg can account for
  (:data:`SEGMENTS_PER_DROP` each; a host's own queue dropping its packet is no loss on the
  wire: its TCP sends it again at once). More than :data:`UNEXPLAINED_SEGMENTS` unaccounted:
  a violation naming the hosts that resent most.

Where the spec makes links lose packets (``impairments.json``), the resend check is left to
:mod:`analysis.impairment_invariant`, which holds each such link to its specified loss.
Thresholds: :data:`BALANCE_SLACK_BYTES`, :data:`UNEXPLAINED_SEGMENTS` (BENCHMARKS.md, "The loss
invariant", has the runs they were set on and the fresh runs they were judged on).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pandas as pd

from analysis.invariant import Evidence, Invariant, Judgement, Violation
from testbed.core.units import format_size

DROPPED_PACKET_BYTES = 65536 + 1514  # the most one dropped packet can hold (a TSO segment)
SEGMENTS_PER_DROP = 46  # the TCP segments in such a packet (65536 / 1448, rounded up)
BALANCE_SLACK_BYTES = 256 * 1024  # a switch's byte balance may miss this much (edges of a leg)
BALANCE_SHARE = 0.01  # ... or this share of what it took in, whichever is larger
UNEXPLAINED_SEGMENTS = 20  # a job's hosts may resend this many segments the fabric cannot explain


def leg_flows(queues: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    """Per link direction: bytes sent, drops and the backlog change over [start, end] (from the
    first to the last qdisc sample inside it)."""
    w = queues[(queues["time"] >= start) & (queues["time"] <= end)].sort_values("time")
    if w.empty:
        return pd.DataFrame(columns=["src", "dst", "sent", "drops", "backlog"])
    g = w.groupby(["src", "dst"])
    first, last = g.first(), g.last()
    out = pd.DataFrame({"sent": last["sent_bytes"] - first["sent_bytes"],
                        "drops": last["drops"] - first["drops"],
                        "backlog": last["backlog_bytes"] - first["backlog_bytes"]})
    return out.reset_index()


def balances(flows: pd.DataFrame, hosts: set[str]) -> dict[str, dict[str, float]]:
    """Per switch: bytes in (queues in front of it), bytes out (its queues' sent and backlog
    change) and its queues' drops."""
    out: dict[str, dict[str, float]] = {}
    for r in flows.itertuples():
        if r.dst not in hosts:
            out.setdefault(r.dst, {"in": 0.0, "out": 0.0, "drops": 0})["in"] += r.sent
        if r.src not in hosts:
            b = out.setdefault(r.src, {"in": 0.0, "out": 0.0, "drops": 0})
            b["out"] += r.sent + r.backlog
            b["drops"] += int(r.drops)
    return out


def needless_segments(counters: dict[str, int]) -> int:
    """The segments a host resent that its receiver already had (D-SACKed): the kernel's
    segment count where the record has it; else its count of D-SACK blocks, which is one per
    resent TSO packet and so can undercount by up to :data:`SEGMENTS_PER_DROP` a block
    (records from before 2026-11-29)."""
    return counters.get("TCPDSACKRecvSegs", counters.get("TCPDSACKRecv", 0))


def _seconds(t: float, t0: float) -> float:
    return round(t - t0, 2)


class LossInvariant(Invariant):
    name: ClassVar[str] = "loss"
    needs: ClassVar[tuple[str, ...]] = ("qdisc_samples.parquet", "drops.json", "topology.json")
    checks: ClassVar[str] = ("packets lost only in the shaped queues: every switch's bytes in "
                             "against out, drop counters outside the queues, and the hosts' "
                             "TCP resends against the queues' drops")

    def judge(self, evidence: Evidence) -> Judgement:
        queues = evidence.table("qdisc_samples.parquet")
        legs = (evidence.json("drops.json") or {}).get("legs") or {}
        if queues is None or not len(queues) or not legs:
            return Judgement(False, why_not="no leg was recorded with qdisc samples")
        hosts = {h["name"] for h in (evidence.json("topology.json") or {}).get("hosts") or []}
        violations: list[Violation] = []
        notes: list[str] = []
        measured: dict[str, Any] = {}
        # links specified to lose packets explain resends no queue counts: the impairments
        # invariant holds them to their spec instead
        specified = [lk for lk in (evidence.json("impairments.json") or {}).get("links") or []
                     if lk.get("loss")]
        if specified:
            measured["resends"] = ("not judged: the spec makes links lose packets (the "
                                   "impairments invariant judges each against its loss)")
        for leg, rec in legs.items():
            start, end = float(rec["start"]), float(rec["end"])
            when = (_seconds(start, evidence.t0), _seconds(end, evidence.t0))
            flows = leg_flows(queues, start, end)
            # a host's own queue dropping its packet is no loss on the wire: its TCP sends
            # the packet again at once, without counting a retransmission
            on_wire = flows[~flows["src"].isin(hosts)] if len(flows) else flows
            queue_drops = int(on_wire["drops"].sum()) if len(on_wire) else 0
            lost_bytes = 0.0
            per_switch = {}
            for sw, b in sorted(balances(flows, hosts).items()):
                deficit = b["in"] - b["out"]
                allowed = max(BALANCE_SLACK_BYTES, BALANCE_SHARE * b["in"]) + \
                    b["drops"] * DROPPED_PACKET_BYTES
                per_switch[sw] = {"in_bytes": b["in"], "out_bytes": b["out"],
                                  "queue_drops": b["drops"]}
                if deficit > allowed:
                    lost_bytes += deficit
                    violations.append(Violation(
                        sw, f"{sw} took in {format_size(b['in'])} and passed on "
                        f"{format_size(deficit)} less during {leg} ({when[0]:.1f}–{when[1]:.1f} "
                        "s), lost outside its shaped queues (they dropped "
                        f"{b['drops']} packet{'' if b['drops'] == 1 else 's'})", *when))
            port_drops = [Violation(port, f"switch port {port} counted "
                                    + ", ".join(f"{v} {k}" for k, v in sorted(d.items()))
                                    + f" during {leg}", *when)
                          for port, counts in sorted((rec.get("ports") or {}).items())
                          if (d := {k: v for k, v in counts.items() if v})]
            # a packet one port dropped may show in its Open vSwitch and its kernel counters
            counted = queue_drops + sum(max(counts.values(), default=0)
                                        for counts in (rec.get("ports") or {}).values())
            for key, what in (("datapath_lost", "the datapath lost"),
                              ("softnet_dropped", "the CPUs' full input backlogs dropped")):
                if rec.get(key):
                    violations.append(Violation("machine", f"{what} {rec[key]} packets during "
                                                f"{leg}", *when))
            tcp = rec.get("hosts") or {}
            explained = counted * SEGMENTS_PER_DROP
            jobs_measured = {}
            for job, job_hosts in (rec.get("jobs") or {}).items():
                resent = {h: max(0, tcp.get(h, {}).get("TCPFastRetrans", 0)
                                 - needless_segments(tcp.get(h, {}))) for h in job_hosts}
                total = sum(resent.values())
                jobs_measured[job] = {"fast_retransmits_less_dsack": total,
                                      "timeouts": sum(tcp.get(h, {}).get("TCPTimeouts", 0)
                                                      for h in job_hosts)}
                if total - explained > UNEXPLAINED_SEGMENTS and not lost_bytes and not specified:
                    worst = sorted(resent.items(), key=lambda kv: -kv[1])[:3]
                    violations.append(Violation(
                        ",".join(h for h, _ in worst),
                        f"job {job}'s hosts resent {total} segments their receivers reported "
                        f"missing during {leg} (" + ", ".join(f"{h} {n}" for h, n in worst)
                        + f"), but the fabric counted {counted} dropped packet"
                        f"{'' if counted == 1 else 's'} (at most {explained} segments): "
                        "packets were lost where nothing counts them", *when))
            resent = sum(j["fast_retransmits_less_dsack"] for j in jobs_measured.values())
            timeouts = sum(j["timeouts"] for j in jobs_measured.values())
            recovered = (port_drops and not timeouts and not lost_bytes
                         and resent - explained <= UNEXPLAINED_SEGMENTS)
            if recovered:
                notes += [f"{v.sentence}, outside the shaped queues; the hosts resent {resent} "
                          "segments by fast retransmit and counted no timeout, so the job "
                          "invariant, not this one, judges what it cost" for v in port_drops]
            else:
                violations += port_drops
            measured[leg] = {"queue_drops": queue_drops, "switches": per_switch,
                             "jobs": jobs_measured, "port_drops_recovered": bool(recovered)}
        return Judgement(True, violations, measured, notes=notes)


INVARIANT = LossInvariant()
