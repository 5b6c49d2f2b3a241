"""An ECMP uplink down; BENCHMARKS.md "What OVS does when an ECMP uplink goes down".

What Open vSwitch does on its own when an ECMP uplink goes down, and what the controller adds.

    .venv/bin/python benchmarks/ecmp_link_down.py   # as root

A 2-leaf, 2-spine fabric under the ``ecmp`` policy. The link leaf0-spine0 is set down, then
12 TCP connections (one per source port, 64 KiB each) go each way between h0 (leaf0) and h2
(leaf1), and the server counts those that delivered every byte. A connection needs both
directions: the leaf0 -> leaf1 direction meets the dead link at its own leaf, the other
direction only at the far end of spine0. Twice: with the controller killed first (OVS
alone: fail-mode secure keeps the rules, the SELECT buckets watch their ports) and with the
controller running (it re-sends every leaf's groups without the spine that lost a link).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.fabric import Fabric

FABRIC = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
          "host_link_mbit_s": 50, "uplink_mbit_s": 50}
PORTS = range(41000, 41012)
PAYLOAD = 64 * 1024
SERVE = """
import collections, json, socket, sys, time
s = socket.socket(); s.bind((sys.argv[1], 6000)); s.listen(64); s.settimeout(0.5)
got = collections.Counter(); end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        c, (_, port) = s.accept()
    except TimeoutError:
        continue
    c.settimeout(2)
    try:
        while data := c.recv(65536):
            got[port] += len(data)
    except OSError:
        pass
    c.close()
print(json.dumps(got))
"""
CONNECT = """
import socket, sys
for port in range(int(sys.argv[2]), int(sys.argv[3])):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port)); s.settimeout(2)
    try:
        s.connect((sys.argv[1], 6000)); s.sendall(b"x" * int(sys.argv[4]))
    except OSError:
        pass
    s.close()
"""


def one_way(fab: Fabric, src: str, dst: str) -> int:
    """TCP connections (of len(PORTS), one per source port) that delivered all their bytes."""
    ip = fab.plan.node(dst).ip()
    server = fab.popen(dst, [sys.executable, "-c", SERVE, ip, str(3 * len(PORTS) + 4)],
                       stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    fab.popen(src, [sys.executable, "-c", CONNECT, ip, str(PORTS.start), str(PORTS.stop),
                    str(PAYLOAD)]).wait(timeout=120)
    got = json.loads(server.communicate(timeout=120)[0])
    return sum(got.get(str(p), 0) == PAYLOAD for p in PORTS)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    plan = build_plan(parse_fabric({"fabric": FABRIC}))
    print(f"{'controller':12} {'connections from h0 (leaf0)':>30} {'from h2 (leaf1)':>26}")
    for controller in ("killed", "running"):
        with tempfile.TemporaryDirectory() as tmp, \
                Fabric(plan, Path(tmp) / "run", policy="ecmp") as fab:
            if controller == "killed":
                assert fab.controller is not None
                fab.controller.kill()
            subprocess.run(["ip", "link", "set", "dev", "leaf0-eth3", "down"], check=True)
            time.sleep(1.0)
            fwd, back = one_way(fab, "h0", "h2"), one_way(fab, "h2", "h0")
            n = len(PORTS)
            print(f"{controller:12} {f'{fwd}/{n} complete':>30} {f'{back}/{n} complete':>26}")


if __name__ == "__main__":
    main()
