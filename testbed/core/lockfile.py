"""Read a pip-compile lock with hashes (``scripts/requirements.lock``) and take the part of it a
few packages need: their pins, the pins of everything they depend on, and every hash.

pip-compile writes one entry per package: ``name==version``, its ``--hash=sha256:`` lines and a
``# via`` annotation naming the packages (or files) that need it. The dependency closure of
some roots is read from those annotations: a package belongs to it when it is a root or when
something in the closure needs it. pip checks the result itself when it installs it with
``--require-hashes`` (a dependency missing from it is refused, not fetched).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_HASH = re.compile(r"--hash=(sha256:[0-9a-f]{64})")
def canonicalize_name(name: str) -> str:
    """PEP 503's normal form of a package name."""
    return re.sub(r"[-_.]+", "-", name).lower()


_VIA = re.compile(r"^\s+#\s+(?:via\s+)?(?!via\s*$)([A-Za-z0-9][A-Za-z0-9._-]*)\s*$")


@dataclass(frozen=True)
class Pin:
    """One locked package: its version, hashes and the packages that need it."""

    name: str  # canonical (PEP 503)
    version: str
    hashes: tuple[str, ...]
    via: frozenset[str]

    def requirement(self) -> str:
        """One line of a requirements file pip installs with ``--require-hashes``."""
        return f"{self.name}=={self.version} " + " ".join(f"--hash={h}" for h in self.hashes)


def parse(text: str) -> dict[str, Pin]:
    """Every entry of a pip-compile lock, by canonical name."""
    entries: dict[str, tuple[str, list[str], set[str]]] = {}
    current = None
    for line in text.splitlines():
        if m := _PIN.match(line):
            current = canonicalize_name(m.group(1))
            entries[current] = (m.group(2), [], set())
        elif current is None:
            continue
        elif h := _HASH.search(line):
            entries[current][1].append(h.group(1))
        elif v := _VIA.match(line):
            entries[current][2].add(canonicalize_name(v.group(1)))
    return {name: Pin(name, version, tuple(hashes), frozenset(via))
            for name, (version, hashes, via) in entries.items()}


def closure(pins: dict[str, Pin], roots: list[str]) -> list[str]:
    """The canonical names of ``roots`` and everything they depend on, sorted; KeyError for a
    root the lock does not have."""
    found = {canonicalize_name(r) for r in roots}
    if missing := found - pins.keys():
        raise KeyError(", ".join(sorted(missing)))
    grew = True
    while grew:
        more = {p.name for p in pins.values() if p.name not in found and p.via & found}
        found |= more
        grew = bool(more)
    return sorted(found)


def merge(base: dict[str, Pin], extra: dict[str, Pin]) -> dict[str, Pin]:
    """``base`` and ``extra`` together; ValueError naming a package they pin differently."""
    for name, pin in extra.items():
        if name in base and base[name].version != pin.version:
            raise ValueError(f"{name} is pinned to {base[name].version} and to {pin.version}")
    return {**extra, **base}
