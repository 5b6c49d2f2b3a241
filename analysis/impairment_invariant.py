"""The link impairments invariant: each impaired link lost and delayed what its spec says.

Reads ``impairments.json`` (written by the emulator: :mod:`testbed.emulator.impairments`):

- **loss**: per link and direction, the packets its loss mechanism judged and dropped. With at
  least :data:`MIN_PACKETS` judged, the achieved fraction must lie within
  :data:`SIGMAS` binomial standard deviations (plus :data:`LOSS_SLACK`) of the specified one;
  a link specified lossless must drop nothing there.
- **probes**: pings between host pairs whose paths are impaired, sent before the jobs start,
  measured independently of the mechanism's own counters (so loss or delay nobody specified
  shows): the round trips must lie within :data:`DELAY_TOLERANCE` (or
  :data:`DELAY_FLOOR_MS`, whichever is larger) of twice the one-way delays of the links on
  the pair's shortest paths, and the pings lost within :data:`SIGMAS` binomial standard
  deviations of what the links' losses give. A path is too slow when even its fastest round
  trip is over the range, too fast when even its slowest quarter is under it (its upper
  quartile): a delay nobody specified moves every round trip, the fastest too, where this
  machine's scheduling only adds, to some pings or, for a few seconds, to all of one pair's
  (2026-11-29, two CI runs of the faithful case: medians 22.6 and 23.0 ms for 20, lower
  quartiles 21.7 and 22.3 ms, fastest 21.2 and 21.6 ms). Jitter, which the range leaves
  out, makes some round trips short, so the too-fast side keeps the quartile. Records without
  the fastest are judged by their lower quartile, and without quartiles by their median.

A violation names the link (or the pair) and the figures; a run with none impaired is judged
trivially.
"""

from __future__ import annotations

import math
from typing import Any

from analysis.invariant import Evidence, Invariant, Judgement, Violation

MIN_PACKETS = 1000
SIGMAS = 4.0
LOSS_SLACK = 0.002
DELAY_TOLERANCE = 0.10
DELAY_FLOOR_MS = 1.0


def loss_violation(link: str, direction: str, spec: float, judged: int, dropped: int
                   ) -> Violation | None:
    """A violation when ``dropped`` of ``judged`` packets is off ``spec`` beyond chance."""
    if judged < MIN_PACKETS:
        return None
    achieved = dropped / judged
    allowed = SIGMAS * math.sqrt(spec * (1 - spec) / judged) + LOSS_SLACK
    if abs(achieved - spec) <= allowed:
        return None
    return Violation(link, f"link {link} ({direction}) lost {achieved:.2%} of {judged} "
                     f"packets, specified {spec:.2%} (allowed ±{allowed:.2%})")


def _across(links: list[str]) -> str:
    return f" (across {', '.join(links)})" if links else ""


def delay_violation(src: str, dst: str, expected_ms: list[float], median_ms: float | None,
                    links: list[str] | None = None,
                    quartiles_ms: tuple[float, float] | None = None,
                    fastest_ms: float | None = None) -> Violation | None:
    """A violation when the pair's round trips are off the spec's range: its fastest round
    trip above it (``fastest_ms``; without it, the lower quartile, then the median), or its
    upper quartile below it (``quartiles_ms``; without them, its median)."""
    low, high = expected_ms
    if median_ms is None:
        return Violation(f"{src}->{dst}", f"{src} had no ping reply from {dst}: its round trip "
                         f"was specified {low:.2f} ms")
    lower, upper = quartiles_ms or (median_ms, median_ms)
    fastest = lower if fastest_ms is None else fastest_ms
    too_slow = fastest > high + max(DELAY_TOLERANCE * high, DELAY_FLOOR_MS)
    too_fast = upper < low - max(DELAY_TOLERANCE * low, DELAY_FLOOR_MS)
    if not (too_slow or too_fast):
        return None
    spec = f"{low:.2f} ms" if low == high else f"{low:.2f}–{high:.2f} ms"
    if too_slow:
        which = ("the fastest took" if fastest_ms is not None else
                 "a quarter took under" if quartiles_ms else "")
        figure = fastest
    else:
        which, figure = ("a quarter took over" if quartiles_ms else ""), upper
    detail = f"; {which} {figure:.2f} ms" if which else ""
    return Violation(f"{src}->{dst}", f"the round trip {src}->{dst}{_across(links or [])} took "
                     f"{median_ms:.2f} ms (median{detail}), specified {spec} by its links' "
                     "delays")


def delay_line_violation(host: str, stats: dict[str, Any]) -> Violation | None:
    """A violation when ``host``'s delay line dropped packets or released them late beyond
    the tolerance of its shortest delay, or :data:`DELAY_FLOOR_MS` where it holds a wire
    only (``stats``: the line's record, with ``delays_us`` and any ``wires_bit_s``)."""
    dropped = sum((stats.get("kernel_dropped") or {}).values())
    if dropped:
        return Violation(host, f"the delay line in {host} dropped {dropped} packets (its "
                         "queue was full or it did not keep up)")
    p99 = (stats.get("late_us") or {}).get("p99")
    delays = [d for d in stats.get("delays_us") or [] if d]
    if p99 is None or not (delays or stats.get("wires_bit_s")):
        return None
    allowed_us = max(DELAY_TOLERANCE * min(delays, default=0.0), DELAY_FLOOR_MS * 1e3)
    if p99 <= allowed_us:
        return None
    return Violation(host, f"the delay line in {host} released 1% of {stats.get('packets', 0)} "
                     f"packets more than {p99 / 1e3:.2f} ms after they were due (allowed "
                     f"{allowed_us / 1e3:.2f} ms): it fell behind, or something held them "
                     "before it")


def ping_loss_violation(src: str, dst: str, expected: list[float], sent: int, received: int,
                        links: list[str] | None = None) -> Violation | None:
    """A violation when the pings lost between two hosts are off what their links' losses
    give (``expected``: [smallest, largest] over the shortest paths) beyond chance."""
    achieved = 1 - received / sent
    low, high = expected
    allowed = SIGMAS * math.sqrt(max(high * (1 - high), 1 / sent) / sent) + LOSS_SLACK
    if low - allowed <= achieved <= high + allowed:
        return None
    spec = f"{low:.2%}" if low == high else f"{low:.2%}–{high:.2%}"
    return Violation(f"{src}->{dst}", f"{achieved:.2%} of {sent} pings {src}->{dst}"
                     f"{_across(links or [])} were lost, where the links' losses give {spec} "
                     f"(allowed ±{allowed:.2%})")


class ImpairmentInvariant(Invariant):
    name = "impairments"
    needs = ("impairments.json",)
    checks = ("each impaired link, and pings across impaired paths, lost the fraction of "
              f"packets the spec gives (within {SIGMAS:g} binomial standard deviations), and "
              "round trips took twice the links' one-way delays (within "
              f"{DELAY_TOLERANCE:.0%} or {DELAY_FLOOR_MS:g} ms, by their quartiles), and "
              "each delay line kept up")

    def judge(self, evidence: Evidence) -> Judgement:
        record: dict[str, Any] = evidence.json("impairments.json") or {}
        links = record.get("links") or []
        violations: list[Violation] = []
        measured: dict[str, Any] = {"links": {}, "probes": record.get("probes") or []}
        for lk in links:
            name = f"{lk['a']}-{lk['b']}"
            for direction, counts in (lk.get("directions") or {}).items():
                if not counts:
                    continue
                judged, dropped = int(counts["judged"]), int(counts["dropped"])
                measured["links"][f"{name}:{direction}"] = {
                    "spec": lk["loss"], "judged": judged, "dropped": dropped,
                    "achieved": dropped / judged if judged else None,
                    "mechanism": lk["mechanism"]}
                if v := loss_violation(name, direction, lk["loss"], judged, dropped):
                    violations.append(v)
        for probe in record.get("probes") or []:
            src, dst = probe["src"], probe["dst"]
            links = probe.get("links") or []
            quartiles = probe.get("quartiles_ms")
            if probe["expected_ms"][1] and (v := delay_violation(
                    src, dst, probe["expected_ms"], probe.get("median_ms"), links,
                    tuple(quartiles) if quartiles else None, probe.get("fastest_ms"))):
                violations.append(v)
            if probe["sent"] and (v := ping_loss_violation(
                    src, dst, probe["expected_loss"], probe["sent"], probe["received"],
                    links)):
                violations.append(v)
        for host, stats in (record.get("delay_lines") or {}).items():
            measured.setdefault("delay_lines", {})[host] = stats
            if v := delay_line_violation(host, stats):
                violations.append(v)
        return Judgement(True, violations, measured)


INVARIANT = ImpairmentInvariant()
