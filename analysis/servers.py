"""Where a run's fabric ran, as a report states it: one sentence per run spread over servers
(``summary.json``'s ``servers``, issue #43) naming the servers and their hosts, the links that
crossed between them, and the largest clock offset measured, with its uncertainty."""

from __future__ import annotations

from typing import Any


def _hosts(names: list[str]) -> str:
    """``h0–h3`` for a run of consecutive host numbers, else the names."""
    numbers = [int(n[1:]) for n in names if n[1:].isdigit()]
    if len(numbers) == len(names) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"h{numbers[0]}–h{numbers[-1]}"
    return ", ".join(names)


def largest_offset(offsets: dict[str, dict[str, dict[str, Any]]]) -> tuple[float, float] | None:
    """(|offset|, its uncertainty) of the largest clock offset measured, in seconds."""
    found = [(abs(o["offset_s"]), o["uncertainty_s"]) for when in offsets.values()
             for o in when.values() if "offset_s" in o]
    return max(found) if found else None


def server_note(summary: dict[str, Any]) -> str | None:
    """One sentence on the servers a run was spread over; None for a run on one machine."""
    servers = summary.get("servers")
    if not servers:
        return None
    per: dict[str, list[str]] = {}
    for host, server in (servers.get("host_server") or {}).items():
        per.setdefault(server, []).append(host)
    where = "; ".join(f"{s}: {_hosts(hosts)}" for s, hosts in per.items())
    crossing = len((servers.get("placement") or {}).get("crossing") or [])
    text = (f"Spread over {len(per)} servers ({where}); {crossing} links crossed between "
            "them as VXLAN tunnels")
    largest = largest_offset(servers.get("clock_offsets") or {})
    if largest is not None:
        text += (f"; the servers' clocks were within {largest[0] * 1e3:.2f} ms of this "
                 f"machine's (±{largest[1] * 1e3:.2f} ms)")
    return text
