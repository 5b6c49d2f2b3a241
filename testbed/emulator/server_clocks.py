"""Each server's clock against this machine's, measured over its SSH session (issue #43).

A server is asked for its time (``date +%s.%N``, the wall clock) several times within one SSH
session; each answer is compared with the midpoint of this machine's clock around the question,
and the answer with the shortest round trip is kept: its offset is off by at most half that
round trip. The run measures at its start and end and records both (``run.json``'s
``servers``). Stand-in servers share this machine's kernel, and so its clocks: their offsets
measure only the method's own error.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

from testbed.core.servers import ServersSpec
from testbed.emulator.ssh import ssh_command

ASKS = 5
# reads a line, prints the time, until its input ends: one answer per question
_CLOCK_LOOP = "while read -r _; do date +%s.%N; done"


def offset(samples: list[tuple[float, float, float]]) -> dict[str, float]:
    """``offset_s`` (server minus this machine) and ``uncertainty_s`` (half the round trip)
    from (asked, answered there, answer seen) triples, by the shortest round trip."""
    t0, there, t1 = min(samples, key=lambda s: s[2] - s[0])
    return {"offset_s": round(there - (t0 + t1) / 2, 6), "uncertainty_s": round((t1 - t0) / 2, 6)}


def measure(servers: ServersSpec, timeout_s: float = 20.0) -> dict[str, dict[str, Any]]:
    """Per server, its clock offset, or the error that kept it from being measured."""
    out: dict[str, dict[str, Any]] = {}
    for server in servers.servers:
        try:
            out[server.name] = offset(_ask(ssh_command(server, servers), timeout_s))
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            out[server.name] = {"error": str(exc) or type(exc).__name__}
    return out


def _ask(ssh: list[str], timeout_s: float) -> list[tuple[float, float, float]]:
    proc = subprocess.Popen([*ssh, _CLOCK_LOOP], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    deadline = time.monotonic() + timeout_s
    samples = []
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for _ in range(ASKS):
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(ssh, timeout_s)
            t0 = time.time()
            proc.stdin.write("\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            t1 = time.time()
            samples.append((t0, float(line), t1))
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return samples
