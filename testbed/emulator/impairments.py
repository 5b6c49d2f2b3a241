"""Link delay, jitter and loss on the emulator: which mechanism carries each impaired link.

- **netem**, where the kernel has it (a stock Debian kernel; ``make vm-check`` boots one):
  both ends of the link get a netem qdisc under each of their HTB leaf classes
  (:func:`testbed.emulator.shaping.htb_commands`), so a packet is delayed and maybe dropped
  after it was shaped, as on a wire after its port. Every link class, both directions.
- **delay-line**, for delay and jitter on a kernel without netem (as on these machines): the
  userspace delay line of :mod:`testbed.emulator.delay_line` in every host's namespace holds
  what arrives there for its path's whole one-way delay (the delays of the links it crossed,
  added up; :func:`delay_queues`), each link's jitter drawn as netem draws it. Any link class;
  a fabric whose equal-cost paths between two hosts differ in delay is refused (one delay per
  path end cannot tell them apart).
- **host-input**, for loss on a kernel without netem: netfilter's ``statistic`` match on
  INPUT inside host namespaces, on host links only. The direction into host H is dropped
  where it arrives, in H's namespace; the direction out of H at every other host's INPUT, for
  packets from H's address, so each path through H's link loses that fraction (a drop on H's
  OUTPUT would not do: H's TCP would see it and resend at once, nothing lost on the wire). A
  counting rule before each dropping rule records how many packets it judged, so the achieved
  loss is known per link and direction.

Loss on links between switches without netem is refused before anything is built, in one
sentence naming the link.
"""

from __future__ import annotations

import itertools
import json
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError
from testbed.core.limits import MAX_DELAY_LINE_WIRE_MBIT_S, emulated_links_error
from testbed.core.topology import FabricPlan, Link
from testbed.emulator import cbpf
from testbed.emulator.preflight import delay_line_available, netem_available
from testbed.emulator.segmentation import MTU_BYTES, wire_sized
from testbed.emulator.shaping import ack_program

NETEM = "netem"
HOST_INPUT = "host-input"
DELAY_LINE = "delay-line"
NO_NETEM = ("a stock Debian kernel has it: `make vm-check` boots one, or run the experiment "
            "with --backend sim")
# netem's own delay floor: its timers run at the kernel's high-resolution clock; 1 µs.
NETEM_MIN_DELAY_US = 1.0


@dataclass(frozen=True)
class LinkImpairment:
    """One impaired link as emulated: both directions alike."""

    a: str
    b: str
    kind: str
    delay_us: float
    jitter_us: float
    loss: float
    mechanism: str  # NETEM, or DELAY_LINE and/or HOST_INPUT joined by "+"

    def uses(self, mechanism: str) -> bool:
        return mechanism in self.mechanism.split("+")


Queues = dict[str, list[dict[str, Any]]]  # per host, its delay line's queues


def mechanisms(plan: FabricPlan, netem: bool, delay_line: bool = True
               ) -> list[LinkImpairment]:
    """How each impaired link of ``plan`` is emulated on a kernel with or without netem (and
    with or without what the delay line needs); FabricLabError (one sentence naming the link)
    for what this kernel cannot emulate."""
    return emulation(plan, netem, delay_line)[0]


def emulation(plan: FabricPlan, netem: bool, delay_line: bool = True
              ) -> tuple[list[LinkImpairment], Queues]:
    """:func:`mechanisms`, and the delay lines' queues (:func:`delay_queues`, computed once;
    empty where no link uses the delay line)."""
    if problem := emulated_links_error(plan, **({"min_delay_us": NETEM_MIN_DELAY_US}
                                                if netem else {})):
        raise FabricLabError(problem)
    out = []
    for lk in plan.links:
        if not lk.impaired:
            continue
        if netem:
            kinds = [NETEM]
        else:
            if lk.loss and lk.kind != "host":
                raise FabricLabError(
                    f"link {lk.a}-{lk.b} ({lk.kind}): loss between switches needs the netem "
                    f"qdisc, which this kernel does not have ({NO_NETEM}); here loss is "
                    "emulated on host links only")
            if (lk.delay_us or lk.jitter_us) and not delay_line:
                raise FabricLabError(
                    f"link {lk.a}-{lk.b}: delay needs the netem qdisc or netfilter's NFQUEUE "
                    f"target (the delay line), and this kernel has neither ({NO_NETEM})")
            kinds = ([DELAY_LINE] if lk.delay_us or lk.jitter_us else []) + \
                ([HOST_INPUT] if lk.loss else [])
        out.append(LinkImpairment(lk.a, lk.b, lk.kind, lk.delay_us, lk.jitter_us, lk.loss,
                                  "+".join(kinds)))
    queues: Queues = {}
    wire = plan.spec.wire_serialization
    if wire and not delay_line:
        raise FabricLabError(
            "fabric.wire_serialization: each host's wire runs in a delay line, which needs "
            f"netfilter's NFQUEUE target, and this kernel does not have it ({NO_NETEM})")
    if any(i.uses(DELAY_LINE) for i in out):
        queues = delay_queues(plan, every_source=wire)  # refuses paths it cannot give one delay
    elif wire:  # no delays, or netem holds them: the lines hold the wires only
        queues = wire_queues(plan)
    if queues and wire_sized(plan):
        fast = next((lk for lk in plan.links if (plan.is_host(lk.a) or plan.is_host(lk.b))
                     and lk.mbit_s > MAX_DELAY_LINE_WIRE_MBIT_S), None)
        if fast is not None:
            raise FabricLabError(
                f"link {fast.a}-{fast.b} would run at {fast.mbit_s:g} Mbit/s of "
                f"wire-sized packets (loss on a fabric, or segmentation_offload: false, "
                f"turns segmentation offload off), faster than the delay line keeps up "
                f"with ({MAX_DELAY_LINE_WIRE_MBIT_S:g} Mbit/s, "
                f"MAX_DELAY_LINE_WIRE_MBIT_S); lower the rate (rate_scale), drop the "
                f"loss, or use a kernel with netem ({NO_NETEM})")
    return out, queues


def on_this_kernel(plan: FabricPlan) -> tuple[bool, list[LinkImpairment], Queues]:
    """Whether netem carries ``plan``'s impaired links on this machine's kernel, and
    :func:`emulation` for it (refused in one sentence where the kernel cannot). Probes the
    kernel (root) only where a link is impaired or the hosts have wires."""
    wire = plan.spec.wire_serialization
    if not wire and not any(lk.impaired for lk in plan.links):
        return False, [], {}
    netem = netem_available()
    delayed = any(lk.delay_us or lk.jitter_us for lk in plan.links)
    needs_line = wire or (delayed and not netem)
    return netem, *emulation(plan, netem, not needs_line or delay_line_available())


def netem_args(delay_us: float, jitter_us: float, loss: float, mbit_s: float,
               queue_bytes: int) -> str:
    """``netem ...`` for one direction of a link: its delay, jitter and loss, and a packet
    limit that holds the shaped queue plus what the delay keeps in flight at the link rate."""
    in_flight_bytes = mbit_s * 1e6 / 8 * (delay_us + jitter_us) / 1e6
    limit = max(1000, int((queue_bytes + in_flight_bytes) / MTU_BYTES * 2))
    args = ["netem"]
    if delay_us or jitter_us:
        args += ["delay", f"{delay_us:.0f}us"] + ([f"{jitter_us:.0f}us"] if jitter_us else [])
    if loss:
        args += ["loss", f"{loss * 100:.6g}%"]
    return " ".join([*args, "limit", str(limit)])


def link_netem(lk: Link) -> dict[str, float] | None:
    """What :class:`~testbed.emulator.shaping.ShapedLink` takes for a netem link (None for a
    perfect wire)."""
    if not lk.impaired:
        return None
    return {"delay_us": lk.delay_us, "jitter_us": lk.jitter_us, "loss": lk.loss}


def _statistic(loss: float) -> list[str]:
    return ["-m", "statistic", "--mode", "random", "--probability", f"{loss:.6f}"]


Rule = tuple[str, list[str], float]  # (label, the packets it judges, the fraction it drops)


def input_rules(plan: FabricPlan, impaired: Iterable[LinkImpairment]) -> dict[str, list[Rule]]:
    """Per host, the INPUT rules of the host-input mechanism: the caller appends a counting
    rule for the match, then the match with the ``statistic`` drop. Labels name the link and
    direction (``h0-leaf0:in`` is what arrives at h0, ``h0-leaf0:out`` what left it)."""
    rules: dict[str, list[Rule]] = {h.name: [] for h in plan.hosts}
    for imp in impaired:
        if not imp.uses(HOST_INPUT) or not imp.loss:
            continue
        host = imp.a if plan.is_host(imp.a) else imp.b
        lk = next(x for x in plan.links if (x.a, x.b) == (imp.a, imp.b))
        intf = lk.a_intf if lk.a == host else lk.b_intf
        label = f"{imp.a}-{imp.b}"
        rules[host].append((f"{label}:in", ["-i", intf], imp.loss))
        ip = plan.node(host).ip()
        for other in plan.hosts:
            if other.name != host:
                rules[other.name].append((f"{label}:out", ["-s", f"{ip}/32"], imp.loss))
    return rules


def apply_input_rules(host_pids: dict[str, int], rules: dict[str, list[Rule]]) -> None:
    """Install :func:`input_rules` in each host's namespace (entered through a process the
    fabric started there): a counting rule, then the dropping one, per label."""
    for host, entries in rules.items():
        for label, judged, loss in entries:
            for match in (judged, [*judged, *_statistic(loss), "-j", "DROP"]):
                cmd = ["nsenter", "-t", str(host_pids[host]), "-n", "iptables-legacy", "-w",
                       "-A", "INPUT", *match, "-m", "comment", "--comment",
                       f"fabriclab {label}"]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    raise FabricLabError(f"could not add the loss rule {label} in {host}: "
                                         f"{out.stderr.strip()}")


DELAY_LINE_SCRIPT = Path(__file__).with_name("delay_line.py")  # standard library only
READY_TIMEOUT_S = 20.0
# Packets under ACK_BYTES with no TCP data (bare ACKs, pings), as the shaped links' priority
# class takes them, as netfilter's bpf match runs it (from the IP header).
BARE_ACK_BYTECODE = cbpf.bytecode(ack_program(l2_bytes=0))


def wire_only(queue: dict[str, Any]) -> bool:
    """Whether a delay line's queue holds a wire and no delay or jitter. Bare ACKs then skip
    the line: through its wire they take their own length's time only (10 µs of 128 bytes at
    100 Mbit/s), less than the line's own wake-up (a median 14 µs late), and about half the
    packets of a bulk flow's two directions are ACKs, each one costing the line a wake-up
    (BENCHMARKS.md, "Bare ACKs past the wire")."""
    return "wire" in queue and not queue.get("delay_us") and not queue.get("jitters_us")


def steering(queues: list[dict[str, Any]], table: str = "mangle",
             bare_acks_pass: bool = True) -> str:
    """``iptables-restore`` input that steers what arrives from each queue's sources into
    that queue (appended to ``table``'s PREROUTING), with ``bare_acks_pass`` bare ACKs of a
    wire-only queue (:func:`wire_only`) past it."""
    lines = [f"*{table}"]
    for q in queues:
        for ip in q["sources"]:
            if bare_acks_pass and wire_only(q):
                lines.append(f"-A PREROUTING -s {ip}/32 -m bpf --bytecode "
                             f"\"{BARE_ACK_BYTECODE}\" -m comment --comment "
                             "\"fabriclab wire: bare ACKs pass\" -j ACCEPT")
            lines.append(f"-A PREROUTING -s {ip}/32 -m comment --comment "
                         f"\"fabriclab delay\" -j NFQUEUE --queue-num {q['queue']}")
    return "\n".join([*lines, "COMMIT", ""])


def start_delay_lines(host_pids: dict[str, int], queues: Queues,
                      stats_dir: Path, record: Any, table: str = "mangle",
                      wires: dict[str, dict[str, float]] | None = None
                      ) -> dict[str, subprocess.Popen]:
    """Start a delay line in each host of ``queues`` (:func:`delay_queues`), each process
    passed to ``record`` at once (the run's state: teardown and ``fabriclab clean`` end it),
    wait until every one has bound its queues, then steer what arrives from each source into
    its queue (``table``'s PREROUTING, ``mangle`` by default, the last rule there: a
    released packet goes on to the next hook). With ``wires`` (:func:`wire_rates`), a host's
    line first carries what arrives over each input link at that link's rate (each queue names
    its link), and the bare ACKs of a queue that holds a wire only skip the line
    (:func:`wire_only`). Each line writes its statistics to ``stats_dir/HOST.json``."""
    procs: dict[str, subprocess.Popen] = {}
    if not queues:
        return procs
    stats_dir.mkdir(mode=0o755, exist_ok=True)
    for host, qs in queues.items():
        config = {"queues": [{k: q[k] for k in ("queue", "delay_us", "jitters_us", "wire")
                              if k in q} for q in qs],
                  "stats_path": str(stats_dir / f"{host}.json"),
                  "realtime": True, "wires": (wires or {}).get(host)}
        proc = subprocess.Popen(
            ["nsenter", "-t", str(host_pids[host]), "-n", sys.executable,
             str(DELAY_LINE_SCRIPT), json.dumps(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        record(proc.pid)
        procs[host] = proc
    deadline = time.monotonic() + READY_TIMEOUT_S
    for host, proc in procs.items():
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        line = proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            proc.terminate()
            err = (proc.communicate(timeout=5)[1] or "").strip().splitlines()
            raise FabricLabError(f"the delay line in {host} did not start"
                                 + (f": {err[-1]}" if err else f" within {READY_TIMEOUT_S:g} s"))
    for host, qs in queues.items():
        # a kernel without netfilter's bpf match refuses the whole table (nothing is added):
        # the line then takes the bare ACKs too
        for bare_acks_pass in (True, False):
            out = subprocess.run(["nsenter", "-t", str(host_pids[host]), "-n",
                                  "iptables-legacy-restore", "-w", "--noflush"],
                                 input=steering(qs, table, bare_acks_pass),
                                 capture_output=True, text=True)
            if out.returncode == 0:
                break
        if out.returncode != 0:
            raise FabricLabError(f"could not steer {host}'s arrivals into its delay line: "
                                 f"{out.stderr.strip()}")
    return procs


def delay_line_problem(procs: dict[str, subprocess.Popen]) -> str | None:
    """One sentence if a delay line has exited (its queues then hold what arrives there)."""
    for host, proc in procs.items():
        if proc.poll() is not None:
            return (f"the delay line in {host} exited (status {proc.returncode}), so packets "
                    f"arriving at {host} from delayed paths are held there for good")
    return None


def read_delay_lines(stats_dir: Path) -> dict[str, Any]:
    """Each host's delay line's latest statistics (:class:`testbed.emulator.delay_line.Stats`
    plus ``kernel_dropped``), written every second."""
    out = {}
    for path in sorted(stats_dir.glob("*.json")) if stats_dir.is_dir() else []:
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out


_RULE = re.compile(r"^\s*(\d+)\s+\d+\s+(\S+)?.*/\* fabriclab (\S+) \*/")


def parse_input_counters(listing: str) -> dict[str, dict[str, int]]:
    """From ``iptables -L INPUT -v -n -x``: per label, packets ``judged`` (the counting rule)
    and ``dropped``."""
    out: dict[str, dict[str, int]] = {}
    for line in listing.splitlines():
        m = _RULE.match(line)
        if not m:
            continue
        pkts, target, label = int(m.group(1)), m.group(2) or "", m.group(3)
        rec = out.setdefault(label, {"judged": 0, "dropped": 0})
        rec["dropped" if target == "DROP" else "judged"] += pkts
    return out


def read_input_counters(host_pids: dict[str, int]) -> dict[str, dict[str, int]]:
    """Every host's loss rules' counters, summed per label."""
    total: dict[str, dict[str, int]] = {}
    for pid in host_pids.values():
        out = subprocess.run(["nsenter", "-t", str(pid), "-n", "iptables-legacy", "-w",
                              "-L", "INPUT", "-v", "-n", "-x"], capture_output=True, text=True)
        for label, rec in parse_input_counters(out.stdout).items():
            t = total.setdefault(label, {"judged": 0, "dropped": 0})
            t["judged"] += rec["judged"]
            t["dropped"] += rec["dropped"]
    return total


_NETEM_STATS = re.compile(r"qdisc netem .*?Sent \d+ bytes (\d+) pkt \(dropped (\d+)", re.S)


def parse_netem_counters(tc_output: str) -> dict[str, int]:
    """Packets sent and dropped by the netem qdiscs in ``tc -s qdisc show dev X`` output."""
    sent = dropped = 0
    for block in re.split(r"\n(?=qdisc )", tc_output):
        if m := _NETEM_STATS.search(block):
            sent += int(m.group(1))
            dropped += int(m.group(2))
    return {"judged": sent + dropped, "dropped": dropped}


def record(impaired: list[LinkImpairment], counters: dict[str, dict[str, int]]
           ) -> dict[str, Any]:
    """``impairments.json``: each impaired link as specified and emulated, and per direction
    the packets judged and dropped (the achieved loss)."""
    return {"links": [asdict(i) | {"directions": {
        d: counters.get(f"{i.a}-{i.b}:{d}") for d in ("in", "out", "a", "b")
        if counters.get(f"{i.a}-{i.b}:{d}") is not None}} for i in impaired]}


def _graph(plan: FabricPlan) -> Any:
    import networkx as nx

    g = nx.Graph()
    for lk in plan.links:
        g.add_edge(lk.a, lk.b, delay_us=lk.delay_us, jitter_us=lk.jitter_us, loss=lk.loss)
    return g


def _paths(g: Any, src: str, dst: str) -> list[list[tuple[tuple[str, str], dict[str, float]]]]:
    """Each shortest path from ``src`` to ``dst``: its links, as (ends, attributes)."""
    import networkx as nx

    return [[(p, g.edges[p]) for p in itertools.pairwise(path)]
            for path in nx.all_shortest_paths(g, src, dst)]


def path_spec(plan: FabricPlan, src: str, dst: str, g: Any = None) -> dict[str, list[float]]:
    """What the spec gives a ping from ``src`` to ``dst``, as [smallest, largest] over the
    shortest paths: the round trip (ms; twice the links' one-way delays, jitter averaging
    out) and the fraction of pings lost (each link crossed once each way); and the impaired
    links on those paths."""
    rtts, losses, impaired = [], [], set()
    for path in _paths(_graph(plan) if g is None else g, src, dst):
        impaired |= {"-".join(sorted(p)) for p, e in path if e["delay_us"] or e["loss"]}
        rtts.append(2 * sum(e["delay_us"] for _p, e in path) / 1e3)
        kept = 1.0
        for _p, e in path:
            kept *= (1 - e["loss"]) ** 2
        losses.append(1 - kept)
    return {"rtt_ms": [min(rtts), max(rtts)], "loss": [min(losses), max(losses)],
            "links": sorted(impaired)}


def one_address_each(plan: FabricPlan) -> bool:
    """Whether every host of ``plan`` has one address, for every peer (leaf-spine; a multidim
    host has one per dimension, even where there is one dimension)."""
    return all(n.dim is None for h in plan.hosts for n in h.nics)


def input_links(plan: FabricPlan) -> dict[str, list[tuple[str, float, list[str]]]]:
    """Per host, each link it receives over: its interface there, the link's emulated rate
    (bit/s) and the addresses of the hosts whose packets arrive over it. A leaf-spine host
    has one link, over which every other host's packets come; a multidim host has one per
    dimension (two on a ring of more than two, one per peer fully connected), each carrying
    its dimension's peers: the hosts at its other end, or on its switch."""
    hosts = {h.name: h for h in plan.hosts}
    if one_address_each(plan):
        return {h.name: [(lk.a_intf if lk.a == h.name else lk.b_intf, lk.mbit_s * 1e6,
                          [o.ip() for o in plan.hosts if o.name != h.name])
                         for lk in plan.links if h.name in (lk.a, lk.b)]
                for h in plan.hosts}
    on_switch: dict[str, list[str]] = {}
    for lk in plan.links:
        if lk.b not in hosts:
            on_switch.setdefault(lk.b, []).append(lk.a)
    out: dict[str, list[tuple[str, float, list[str]]]] = {h: [] for h in hosts}
    for lk in plan.links:
        for me, intf, other in ((lk.a, lk.a_intf, lk.b), (lk.b, lk.b_intf, lk.a)):
            if me not in hosts:
                continue
            peers = [other] if other in hosts else [h for h in on_switch[other] if h != me]
            out[me].append((intf, lk.mbit_s * 1e6, [hosts[h].ip(lk.dim) for h in peers]))
    return out


def wire_rates(plan: FabricPlan) -> dict[str, dict[str, float]]:
    """Per host, the rate (bit/s) at which its delay line carries what arrives over each of
    its input links (``wire_serialization``: the link's emulated rate), by interface; empty
    without wires."""
    if not plan.spec.wire_serialization:
        return {}
    return {host: {intf: bit_s for intf, bit_s, _sources in links}
            for host, links in input_links(plan).items()}


def wire_queues(plan: FabricPlan) -> Queues:
    """Per host, one queue of no delay for each input link, with the addresses of the hosts
    whose packets arrive over it: its delay line holds its wires only (no link has a delay,
    or netem holds them)."""
    return {host: [{"queue": n, "delay_us": 0.0, "jitters_us": [], "sources": sources,
                    "wire": intf} for n, (intf, _bit_s, sources) in enumerate(links)]
            for host, links in input_links(plan).items()}


def delay_queues(plan: FabricPlan, every_source: bool = False) -> Queues:
    """Per host, the queues of its delay line (:mod:`testbed.emulator.delay_line`): one per
    one-way delay and set of link jitters that paths ending there have, with the addresses of
    the hosts whose paths they are (with ``every_source``, hosts whose paths have neither
    too: a wire holds what arrives from them). FabricLabError (one sentence naming the hosts
    and links) where equal-cost paths between two hosts differ in delay or jitter: held at
    the path's end, every path of a pair gets one delay."""
    if not one_address_each(plan):
        raise FabricLabError(
            f"without netem the delay line holds delays on fabrics whose hosts have one "
            f"address each (leaf-spine); this {plan.kind} fabric's hosts have one per "
            f"dimension ({NO_NETEM})")
    g = _graph(plan)
    # a wire holds what arrives over the host's one link, before the path's delay
    link_of = {h: links[0][0] for h, links in input_links(plan).items()} if every_source else {}
    out: dict[str, list[dict[str, Any]]] = {}
    for dst in plan.hosts:
        groups: dict[tuple[float, tuple[float, ...]], list[str]] = {}
        for src in plan.hosts:
            if src.name == dst.name:
                continue
            kinds = set()
            for path in _paths(g, src.name, dst.name):
                kinds.add((sum(e["delay_us"] for _p, e in path),
                           tuple(sorted(e["jitter_us"] for _p, e in path if e["jitter_us"]))))
            if len(kinds) > 1:
                (d1, j1), (d2, j2) = sorted(kinds)[:2]
                what = (f"delay ({d1:g} and {d2:g} µs one way)" if d1 != d2 else
                        f"jitter ({list(j1)} and {list(j2)} µs per link)")
                raise FabricLabError(
                    f"the equal-cost paths from {src.name} to {dst.name} differ in {what}: "
                    f"without netem the delay line gives every path between two hosts one "
                    f"delay ({NO_NETEM}), so give those links equal delays")
            key = kinds.pop()
            if key[0] or key[1] or every_source:
                groups.setdefault(key, []).append(src.ip())
        wire = {"wire": link_of[dst.name]} if every_source else {}
        out[dst.name] = [{"queue": n, "delay_us": d, "jitters_us": list(j), "sources": ips}
                         | wire for n, ((d, j), ips) in enumerate(sorted(groups.items()))]
    return {h: qs for h, qs in out.items() if qs}


def probe_pairs(plan: FabricPlan, most: int = 16) -> list[tuple[str, str]]:
    """Host pairs whose pings cross every impaired host link: each host to the next."""
    hosts = [h.name for h in plan.hosts]
    return [(hosts[i], hosts[(i + 1) % len(hosts)]) for i in range(min(most, len(hosts)))
            if len(hosts) > 1]


_PING_TIME = re.compile(r"time=([\d.]+) ms")
_PING_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) received")
LOSS_PROBE_PINGS = 2000  # a lossy path's pings: 1% lost is then 40 ± 9 (2 links, both ways)


def parse_ping(output: str) -> dict[str, Any]:
    """Round trips (ms, sorted) and packets sent and received, from ``ping`` output."""
    m = _PING_SUMMARY.search(output)
    return {"rtt_ms": sorted(float(t) for t in _PING_TIME.findall(output)),
            "sent": int(m.group(1)) if m else 0, "received": int(m.group(2)) if m else 0}


def probe_paths(plan: FabricPlan, popen: Any) -> list[dict[str, Any]]:
    """Ping each :func:`probe_pairs` pair (all at once) through ``popen(host, args)``: 20
    pings 0.1 s apart, or :data:`LOSS_PROBE_PINGS` 2 ms apart where the path loses packets;
    per pair the measured round trips and loss beside the spec's."""
    procs = []
    g = _graph(plan)
    for src, dst in probe_pairs(plan):
        spec = path_spec(plan, src, dst, g)
        if not (spec["rtt_ms"][1] or spec["loss"][1]):
            continue
        count, gap = (LOSS_PROBE_PINGS, "0.002") if spec["loss"][1] else (20, "0.1")
        ip = plan.node(dst).ip()
        procs.append((src, dst, spec, popen(src, [
            "ping", "-n", "-U", "-c", str(count), "-i", gap, "-W", "2", ip],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)))
    out = []
    for src, dst, spec, proc in procs:
        text, _ = proc.communicate(timeout=LOSS_PROBE_PINGS * 0.002 + 60)
        got = parse_ping(text)
        rtts = got["rtt_ms"]
        out.append({"src": src, "dst": dst, "links": spec["links"],
                    "expected_ms": spec["rtt_ms"],
                    "expected_loss": spec["loss"], "sent": got["sent"],
                    "received": got["received"],
                    "median_ms": rtts[len(rtts) // 2] if rtts else None,
                    "quartiles_ms": ([rtts[len(rtts) // 4], rtts[(3 * len(rtts)) // 4]]
                                     if rtts else None),
                    "fastest_ms": rtts[0] if rtts else None,
                    "rtt_ms": rtts if len(rtts) <= 20 else None})
    return out
