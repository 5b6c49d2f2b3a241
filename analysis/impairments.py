"""The links' delay, jitter and loss as a report states them: one sentence per run whose links
have any (``summary.json``'s ``link_impairments``, :func:`analysis.metrics.link_impairments`),
in both units, and a short phrase for headline titles."""

from __future__ import annotations

from typing import Any

# link classes of testbed.core.topology.impairment_record, in words
CLASS_WORDS = {"host": "host links", "uplink": "uplinks"}


def _us(us: float) -> str:
    """``2 µs``, ``2 ms``, ``1.5 s``."""
    for unit, scale in (("s", 1e6), ("ms", 1e3)):
        if us >= scale:
            return f"{us / scale:.4g} {unit}"
    return f"{us:.4g} µs"


def _both(values: dict[str, float], key: str) -> str:
    """A delay or jitter as emulated, with the real one beside it when they differ."""
    emulated, real = float(values.get(f"{key}_us") or 0), float(values.get(f"{key}_real_us") or 0)
    return _us(emulated) + (f" ({_us(real)} real)" if real != emulated else "")


def _where(key: str) -> str:
    if key in CLASS_WORDS:
        return CLASS_WORDS[key]
    if key.startswith("dim") and key[3:].isdigit():
        return f"dimension {key[3:]}'s links"
    return f"link {key}"


def _values(values: dict[str, float]) -> str:
    parts = []
    if values.get("delay_us"):
        parts.append(f"delay {_both(values, 'delay')}")
    if values.get("jitter_us"):
        parts.append(f"jitter {_both(values, 'jitter')}")
    if values.get("loss"):
        parts.append(f"loss {float(values['loss']):.3g}")
    return ", ".join(parts) or "none"


def impairment_note(record: dict[str, dict[str, float]] | None) -> str | None:
    """``Links (one way, per link): host links delay 2 ms (2 µs real); uplinks ...``: every
    class and overridden link of ``record`` (``link_impairments``) that has a delay, jitter or
    loss, as emulated with the real value beside it; None when no link has any."""
    shown = [(k, v) for k, v in (record or {}).items()
             if any(v.get(f) for f in ("delay_us", "jitter_us", "loss"))]
    if not shown:
        return None
    return "Links (one way, per link): " + "; ".join(f"{_where(k)} {_values(v)}"
                                                     for k, v in shown)


def impairment_phrase(record: dict[str, dict[str, float]] | None) -> str:
    """A headline title's words for ``record`` (real delays): ``2 µs per link`` where every
    link has the same delay and none jitters or loses, else each class's and link's
    (``2 µs on host links, loss 0.01 on link h1:0-leaf0:3``); '' for none."""
    record = record or {}
    if not any(v.get(f) for v in record.values() for f in ("delay_us", "jitter_us", "loss")):
        return ""
    delays = {float(v.get("delay_real_us") or 0) for v in record.values()}
    if len(delays) == 1 and not any(v.get("loss") or v.get("jitter_us") for v in record.values()):
        return f"{_us(delays.pop())} per link"
    parts = []
    for key, v in record.items():
        what = [_us(float(v["delay_real_us"]))] if v.get("delay_real_us") else []
        what += [f"jitter {_us(float(v['jitter_real_us']))}"] if v.get("jitter_real_us") else []
        what += [f"loss {float(v['loss']):.3g}"] if v.get("loss") else []
        if what:
            parts.append(f"{' '.join(what)} on {_where(key)}")
    return ", ".join(parts)


def run_note(summary: dict[str, Any]) -> str | None:
    """:func:`impairment_note` of a run's summary."""
    return impairment_note(summary.get("link_impairments"))
