"""`fabriclab calibrate SPEC`: saturate every link of a fabric, both directions, and compare
achieved with configured rates while watching the CPU.

Probe flows are planned purely (``plan_rounds``): each round holds flows whose directed links
do not overlap, so every flow runs at the slowest configured rate on its path, and the round's
offered load stays within a CPU budget. iperf3 generates the traffic; the link sampler measures
each directed link from interface counters over the steady part of the round, and the
scheduler sampler how long ovs-vswitchd waited for a CPU then (the switch invariant of
:mod:`analysis.sched_invariant`): a round whose switch waited more than 10% of it is not
counted as held, whatever its links read.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from analysis.sched_invariant import WAIT_SHARE_MAX, forwarding, worst_share
from sdn_app.static_routes import FlowRule, Unreachable, static_rules, trace
from testbed.core.formulas import MIN_CPU_IDLE, RATE_TOLERANCE, TCP_WIRE_FACTOR
from testbed.core.servers import ServersSpec
from testbed.core.topology import FabricPlan, Link
from testbed.emulator.sampler import LinkSampler, cpu_mean, window_rates
from testbed.emulator.schedstat import SchedSampler
from testbed.emulator.traffic import IperfFlow, run_flows


@dataclass(frozen=True)
class ProbeFlow:
    src: str
    dst: str
    dim: int | None
    src_ip: str
    dst_ip: str
    hops: tuple[tuple[str, str], ...]  # directed links as (from node, to node) names
    link_names: tuple[str, ...]
    mbit_s: float  # the slowest configured rate on the path

    @property
    def cost(self) -> float:
        """Offered load in link-Mbit/s: each link crossed costs the machine CPU."""
        return self.mbit_s * len(self.hops)


def candidate_flows(plan: FabricPlan, rules: list[FlowRule]) -> list[ProbeFlow]:
    """Every reachable (src, dst, dimension) pair, with its path under ``rules``."""
    dims: list[int | None] = [None]
    if plan.kind == "multidim":
        dims = [d for d, dim in enumerate(plan.spec.dims) if dim.size > 1]
    flows = []
    for dim in dims:
        for s in plan.hosts:
            for d in plan.hosts:
                if s is d:
                    continue
                try:
                    path = trace(plan, rules, s.name, d.name, dim)
                except (Unreachable, KeyError):
                    continue
                flows.append(_flow(s.name, d.name, dim, s.ip(dim), d.ip(dim), path))
    return flows


def _flow(src: str, dst: str, dim: int | None, sip: str, dip: str,
          path: list[tuple[Link, bool]]) -> ProbeFlow:
    hops = tuple((lk.a, lk.b) if fwd else (lk.b, lk.a) for lk, fwd in path)
    return ProbeFlow(src, dst, dim, sip, dip, hops, tuple(lk.name for lk, _ in path),
                     min(lk.mbit_s for lk, _ in path))


def plan_rounds(flows: list[ProbeFlow], budget: float,
                max_flows: int = 4) -> list[list[ProbeFlow]]:
    """Greedy cover of every directed link by rounds of link-disjoint flows.

    Flows of a round share no link in either direction: a flow's ACKs then travel on idle
    links (with data of another flow in the reverse direction, TCP through these shaped
    queues loses up to half its rate, which would be a measurement artefact here, not a
    property of the link). A host takes part in one flow per round, a round holds at most
    ``max_flows`` flows (with more, single links already fall 5-7% short on two cores: see
    BENCHMARKS.md), and the summed ``cost`` stays within ``budget`` (one flow always fits)."""
    uncovered = {h for f in flows for h in f.hops}
    rounds: list[list[ProbeFlow]] = []
    while uncovered:
        used: set[tuple[str, str]] = set()  # both directions of every link in use
        busy: set[str] = set()
        load, chosen = 0.0, []
        ranked = sorted(flows, key=lambda f: -len(uncovered.intersection(f.hops)))
        for f in ranked:
            gain = uncovered.intersection(f.hops)
            if not gain:
                break
            if (used.intersection(f.hops) or busy.intersection((f.src, f.dst))
                    or (chosen and load + f.cost > budget)):
                continue
            if len(chosen) == max_flows:
                break
            chosen.append(f)
            used.update(f.hops)
            used.update((b, a) for a, b in f.hops)
            busy.update((f.src, f.dst))
            load += f.cost
            uncovered -= gain
        rounds.append(chosen)
    return rounds


@dataclass
class LinkResult:
    link: str
    src: str
    dst: str
    configured_mbit_s: float
    expected_mbit_s: float
    achieved_mbit_s: float  # wire-equivalent (counter rate x TCP_WIRE_FACTOR)
    ratio: float  # achieved / expected
    round: int

    @property
    def ok(self) -> bool:
        return abs(self.ratio - 1) <= RATE_TOLERANCE


@dataclass
class Calibration:
    fabric: dict
    datapath: str
    rounds: int
    round_s: float  # the length of each round
    links: list[LinkResult]
    cpu_idle_min: float
    cpu_idle_mean: float
    # iperf3 receiver goodput / the ideal TCP goodput at the expected rate, mean over flows
    iperf_goodput_ratio: float
    bring_up_s: float
    rate_scale: float = 1.0  # the plan's: its rates are real rates × rate_scale
    # per round, the largest share of it an ovs-vswitchd thread waited for a CPU (None: not
    # sampled, e.g. kernel bridges)
    switch_wait_share: list[float | None] = field(default_factory=list)

    def _switch_starved(self, round_: int) -> bool:
        share = (self.switch_wait_share[round_] if round_ < len(self.switch_wait_share)
                 else None)
        return share is not None and share > WAIT_SHARE_MAX

    @property
    def failures(self) -> list[str]:
        out = [f"{r.src}->{r.dst} at {r.ratio:.2f} of {r.expected_mbit_s:g} Mbit/s"
               for r in self.links if not r.ok]
        if self.cpu_idle_min < MIN_CPU_IDLE:
            out.append(f"CPU idle fell to {self.cpu_idle_min:.0%} "
                       f"(below {MIN_CPU_IDLE:.0%}: the machine, not the links, set the rates)")
        out += [f"round {k + 1}: ovs-vswitchd waited for a CPU {share:.0%} of it (above 10%: "
                "the switch, not the links, may have set the rates)"
                for k, share in enumerate(self.switch_wait_share) if self._switch_starved(k)]
        return out

    @property
    def verdict(self) -> str:
        return "faithful" if not self.failures else "not faithful"

    @property
    def faithful_load_link_mbit_s(self) -> float | None:
        """The largest load one round offered (its flows' rates summed over the links each
        crossed) with every link of the round within tolerance, the switch not waiting for
        a CPU and the CPU not starved; None when no round held."""
        if self.cpu_idle_min < MIN_CPU_IDLE:
            return None
        by_round: dict[int, list[LinkResult]] = {}
        for r in self.links:
            by_round.setdefault(r.round, []).append(r)
        held = [sum(r.expected_mbit_s for r in rs) for k, rs in by_round.items()
                if all(r.ok for r in rs) and not self._switch_starved(k)]
        return max(held, default=None)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["aggregate_ratio"] = self.aggregate_ratio
        d["faithful_load_link_mbit_s"] = self.faithful_load_link_mbit_s
        d["verdict"] = self.verdict
        d["failures"] = self.failures
        return d

    @property
    def aggregate_ratio(self) -> float:
        achieved = sum(r.achieved_mbit_s for r in self.links)
        return achieved / sum(r.expected_mbit_s for r in self.links)


def run_rounds(fab, rounds: list[list[ProbeFlow]], seconds: float, warmup: float,
               progress=None) -> tuple[list[LinkResult], list[float], pd.DataFrame, list[float],
                                       list[float | None]]:
    """Run each round's iperf3 flows on a live fabric; measure every directed link, and how
    long the switch waited for a CPU in each round."""
    results: list[LinkResult] = []
    idles: list[float] = []
    goodput: list[float] = []
    windows: list[tuple[float, float]] = []
    sampler = LinkSampler(fab.plan, fab.namespace_pids(), hz=10,
                          record=fab.state.add_process if fab.state else None)
    sched = SchedSampler(switch=fab.switches != "kernel", server_rundirs=fab.server_rundirs())
    with sampler, sched:
        for i, flows in enumerate(rounds):
            mark = sampler.mark()
            t0, t1, reports = _run_round(fab, flows, seconds, warmup)
            windows.append((t0, t1))
            rates = window_rates(sampler.counters(since=mark), t0, t1).set_index(["src", "dst"])
            idles.append(cpu_mean(sampler.cpu(), t0, t1))
            for f in flows:
                for src, dst in f.hops:
                    row = rates.loc[(src, dst)]
                    wire = float(row["achieved_mbit_s"]) * TCP_WIRE_FACTOR
                    results.append(LinkResult(row["link"], src, dst,
                                              float(row["capacity_mbit_s"]), f.mbit_s, wire,
                                              wire / f.mbit_s, i))
            goodput += [bps / 1e6 / f.mbit_s * TCP_WIRE_FACTOR
                        for f, bps in zip(flows, reports, strict=True)]
            if progress:
                progress(i + 1, len(rounds))
    waits = forwarding(sched.samples())
    return results, idles, sampler.cpu(), goodput, [worst_share(waits, [w]) for w in windows]


def _run_round(fab, flows: list[ProbeFlow], seconds: float,
               warmup: float) -> tuple[float, float, list[float]]:
    res = run_flows(fab, [IperfFlow(f.src, f.dst, f.src_ip, f.dst_ip) for f in flows], seconds)
    return res.start + warmup, res.start + seconds - 0.3, res.goodput_bps


def calibrate(plan: FabricPlan, run_dir: Path, seconds: float = 4.0, warmup: float = 1.0,
              budget: float = 800.0, max_flows: int = 4, progress=None,
              switches: str = "ovs", servers: ServersSpec | None = None) -> Calibration:
    """Bring the fabric up (its switches of kind ``switches``; over ``servers`` if given),
    run every probe round, tear it down."""
    from testbed.emulator.fabric import Fabric
    from testbed.emulator.preflight import datapath

    rules = static_rules(plan)
    rounds = plan_rounds(candidate_flows(plan, rules), budget, max_flows)
    t0 = time.monotonic()
    with Fabric(plan, run_dir, switches=switches, servers=servers) as fab:
        bring_up = time.monotonic() - t0
        links, idles, cpu, goodput, waits = run_rounds(fab, rounds, seconds, warmup,
                                                       progress)
    cpu.to_csv(run_dir / "cpu_samples.csv", index=False)
    return Calibration(
        fabric=plan.spec.model_dump(),
        datapath=datapath() if fab.switches == "ovs" else "kernel-bridge", rounds=len(rounds),
        round_s=seconds,
        links=links, cpu_idle_min=min(idles), cpu_idle_mean=sum(idles) / len(idles),
        iperf_goodput_ratio=sum(goodput) / len(goodput), bring_up_s=bring_up,
        rate_scale=plan.rate_scale, switch_wait_share=waits,
    )


def print_calibration(cal: Calibration, console: Console) -> None:
    df = pd.DataFrame([asdict(r) for r in cal.links])
    df["kind"] = [_kind(s, d) for s, d in zip(df["src"], df["dst"], strict=True)]
    table = Table(title=f"calibration: {cal.rounds} rounds, {cal.datapath} datapath")
    for col in ("links", "configured", "expected", "achieved ÷ expected (min / mean / max)"):
        table.add_column(col)
    for kind, g in df.groupby("kind"):
        table.add_row(
            f"{kind} ({len(g)})", _span(g["configured_mbit_s"]), _span(g["expected_mbit_s"]),
            f"{g['ratio'].min():.3f} / {g['ratio'].mean():.3f} / {g['ratio'].max():.3f}",
        )
    console.print(table)
    console.print(
        f"aggregate achieved ÷ expected {cal.aggregate_ratio:.3f}; iperf3 goodput ÷ ideal TCP "
        f"goodput {cal.iperf_goodput_ratio:.3f}; CPU idle min {cal.cpu_idle_min:.0%}, "
        f"mean {cal.cpu_idle_mean:.0%}"
        + (f"; ovs-vswitchd waited for a CPU at most {max(waits):.0%} of a round"
           if (waits := [w for w in cal.switch_wait_share if w is not None]) else "")
    )
    if cal.failures:
        console.print(f"[bold red]not faithful[/]: {len(cal.failures)} problem(s), first: "
                      + "; ".join(cal.failures[:5]))
    else:
        console.print(f"[bold green]faithful[/]: every link within ±{RATE_TOLERANCE:.0%}, "
                      f"CPU idle ≥ {MIN_CPU_IDLE:.0%}, the switch not kept waiting")


def _kind(src: str, dst: str) -> str:
    def role(n: str) -> str:
        return "host" if n.startswith("h") else n.rstrip("0123456789")
    return f"{role(src)}→{role(dst)}"


def _span(s: pd.Series) -> str:
    lo, hi = s.min(), s.max()
    return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"
