"""Is OVS's ECMP draw the same per build; BENCHMARKS.md "The demo's ECMP draw, fixed and stated".

Does Open vSwitch's ECMP select group pick the same uplink for the same 5-tuple on every
fabric it builds? (root; the ground `source_port_seed` stands on)

Brings `make demo`'s routing fabric up (2 leaves, 4 spines, 20 Mbit/s) with policy ecmp
``--builds`` times. In each, h0 opens one TCP connection per source port to h4:29500, sends
300 kB and closes; the leaf0 uplink whose tx counter moved is the spine OVS chose. Prints the
spine per source port per build, and whether every build chose alike.

    flock /tmp/fabriclab-roottests.lock .venv/bin/python benchmarks/ecmp_hash_fixed.py
        [--builds 2] [--ports 40000-40009]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.fabric import Fabric

FABRIC = {"kind": "leaf_spine", "leaves": 2, "spines": 4, "hosts_per_leaf": 4,
          "host_link_mbit_s": 20, "uplink_mbit_s": 20}
DPORT = 29500
SERVER = ("import socket\ns = socket.socket()\n"
          "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(({ip!r}, {port}))\ns.listen(64)\nwhile True:\n    c, _ = s.accept()\n"
          "    while c.recv(65536):\n        pass\n    c.close()\n")
CLIENT = ("import socket\ns = socket.socket()\n"
          "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(({src!r}, {sport}))\ns.connect(({dst!r}, {port}))\n"
          "s.sendall(b'x' * 300000)\ns.close()\n")


def uplink_tx(hosts_per_leaf: int, spines: int) -> dict[int, int]:
    """tx bytes of leaf0's uplink to each spine."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", "leaf0"],
                         capture_output=True, text=True, check=True).stdout
    tx, port = {}, None
    for line in (raw.strip() for raw in out.splitlines()):
        if line.startswith("port"):
            name = line.split(":")[0].split()[1]
            port = int(name) if name.isdigit() else None
        elif line.startswith("tx") and port is not None:
            tx[port] = int(line.split("bytes=")[1].split(",")[0])
    return {s: tx.get(1 + hosts_per_leaf + s, 0) for s in range(spines)}


def one_build(ports: list[int], run_dir: Path) -> dict[int, int]:
    """The spine each source port's connection took, on a fabric built afresh."""
    plan = build_plan(parse_fabric({"fabric": FABRIC}))
    H, S = FABRIC["hosts_per_leaf"], FABRIC["spines"]
    chosen = {}
    with Fabric(plan, run_dir, policy="ecmp") as fab:
        src, dst = plan.node("h0").ip(), plan.node("h4").ip()
        server = fab.popen("h4", [sys.executable, "-c", SERVER.format(ip=dst, port=DPORT)])
        try:
            time.sleep(1)
            for sport in ports:
                before = uplink_tx(H, S)
                client = fab.popen("h0", [sys.executable, "-c", CLIENT.format(
                    src=src, dst=dst, port=DPORT, sport=sport)])
                client.wait(timeout=30)
                time.sleep(0.3)
                moved = {s: b - before[s] for s, b in uplink_tx(H, S).items()}
                chosen[sport] = max(moved, key=lambda s: moved[s])
        finally:
            server.kill()
            server.wait()
    return chosen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--builds", type=int, default=2)
    ap.add_argument("--ports", default="40000-40009", help="source ports, LO-HI")
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.ports.split("-"))
    ports = list(range(lo, hi + 1))
    out = Path(tempfile.mkdtemp(prefix="ecmp-hash-"))
    builds = [one_build(ports, out / f"build{k}") for k in range(args.builds)]
    for sport in ports:
        print(f"source port {sport}: spine " + ", ".join(str(b[sport]) for b in builds))
    same = all(b == builds[0] for b in builds)
    print(f"{args.builds} builds, {len(ports)} source ports: the same spine in every build: "
          f"{same}; spines used: {sorted(set(builds[0].values()))}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
