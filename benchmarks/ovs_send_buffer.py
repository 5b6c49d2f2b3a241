"""The userspace datapath's send buffer and the loss nobody counted; BENCHMARKS.md "The loss
invariant".

ovs-vswitchd sends every packet of its userspace datapath through one AF_PACKET socket, and a
packet waiting in a port's shaped queue counts against that socket's send buffer. With the
machine's default buffer (208 KiB) the queues of a congested fabric outgrow it and sends fail:
the packet is dropped, counted nowhere. scripts/start-ovs.sh makes the socket with 64 MiB.

This runs the demo's ECMP part (four 2-host jobs, 2 leaves x 4 spines, 10 Mbit/s, the fixed
``source_port_seed: 1`` draw, solo baselines) ``--repeats`` times with each buffer, alternating
(small, large, small, ...), restarting ovs-vswitchd before each run with ``FABRICLAB_OVS_SNDBUF``
set for scripts/start-ovs.sh. Per run: the bytes each leaf switch took in and did not pass on
while all jobs ran (the loss invariant's balance), the hosts' fast retransmits and timeouts,
the verdict, and each job's predicted ÷ measured time (the job invariant's ratio). It leaves
ovs-vswitchd restarted with the large buffer.

    flock /tmp/fabriclab-roottests.lock .venv/bin/python benchmarks/ovs_send_buffer.py
        [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from rich.console import Console

from testbed.core.experiment import expand
from testbed.core.units import format_spread
from testbed.emulator.preflight import switch_send_buffer_bytes
from testbed.emulator.runner import Runner

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"
SIZES = {"208 KiB (machine default)": 212992, "64 MiB (start-ovs.sh)": 67108864}


def experiment():
    (exp,) = expand({
        "name": "sndbuf-ecmp",
        "fabric": {"kind": "leaf_spine", "leaves": 2, "spines": 4, "hosts_per_leaf": 4,
                   "host_link_mbit_s": 10, "uplink_mbit_s": 10},
        "policy": "ecmp", "solo_baselines": True, "timeout_s": 300,
        "jobs": [{"name": f"j{i}", "hosts": [f"h{i}", f"h{i + 4}"], "source_port_seed": 1,
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 3}}
                 for i in range(4)]})
    return exp


def restart_ovs(sndbuf: int) -> int | None:
    """ovs-vswitchd restarted, its send socket made with ``sndbuf`` bytes; the size it got."""
    subprocess.run([OVS_CTL, "stop", "--no-ovsdb-server"], capture_output=True, check=False)
    env = os.environ | {"FABRICLAB_OVS_SNDBUF": str(sndbuf)}
    subprocess.run(["setsid", "bash", "scripts/start-ovs.sh"], env=env, check=True,
                   capture_output=True)
    return switch_send_buffer_bytes()


def one_run(out: Path) -> dict:
    runner = Runner(experiment(), out, Console(quiet=True))
    run_dir = runner.run()
    if runner.status == "incomplete":
        raise SystemExit("interrupted; no further runs")
    fid = json.loads((run_dir / "fidelity.json").read_text())
    loss = fid["registered"]["loss"]
    together = loss["measured"].get("together", {})
    lost = {sw: b["in_bytes"] - b["out_bytes"] for sw, b in together.get("switches", {}).items()
            if sw.startswith("leaf")}
    tcp = json.loads((run_dir / "drops.json").read_text())["legs"]["together"]["hosts"]
    ratios = [s["ratio"] for v in fid["job"]["jobs"] if not v["job"].endswith("-solo")
              for s in v["sizes"]]
    return {"lost_mb": sum(lost.values()) / 1e6, "ratios": ratios, "verdict": fid["verdict"],
            "fast": sum(h["TCPFastRetrans"] for h in tcp.values()),
            "timeouts": sum(h["TCPTimeouts"] for h in tcp.values()),
            "loss_violations": len(loss["violations"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args()
    results: dict[str, list[dict]] = {k: [] for k in SIZES}
    with tempfile.TemporaryDirectory() as tmp:
        keep = args.keep or Path(tmp)
        try:
            for k in range(args.repeats):
                for label, size in SIZES.items():
                    got = restart_ovs(size)
                    r = one_run(keep / f"{size}-{k}")
                    results[label].append(r)
                    print(f"{label:26} run {k + 1}: socket {got} B; leaves lost "
                          f"{r['lost_mb']:.2f} MB; fast retransmits {r['fast']}, timeouts "
                          f"{r['timeouts']}; predicted ÷ measured "
                          + " ".join(f"{x:.2f}" for x in r["ratios"])
                          + f"; {r['verdict']} ({r['loss_violations']} loss violations)",
                          flush=True)
        finally:
            restart_ovs(SIZES["64 MiB (start-ovs.sh)"])
    print("\nper send buffer (median [min, max] over the runs; ratios over every job):")
    for label, rs in results.items():
        if rs:
            ratios = [x for r in rs for x in r["ratios"]]
            print(f"{label:26} leaves lost {format_spread([r['lost_mb'] for r in rs], '.2f')} "
                  f"MB; fast retransmits {format_spread([r['fast'] for r in rs], '.0f')}; "
                  f"predicted ÷ measured {format_spread(ratios, '.2f')}"
                  f"; faithful {sum(r['verdict'] == 'faithful' for r in rs)}/{len(rs)}")


if __name__ == "__main__":
    main()
