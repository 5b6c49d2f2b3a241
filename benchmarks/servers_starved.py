"""Does the verdict name the server whose switch starved? (issue #43; BENCHMARKS.md "A fabric
over two servers").

The two-server routing experiment's vClos variant (experiments/two-servers.yaml), run over two
stand-in servers with one server's ovs-vswitchd held to 0.15 of a core (a cgroup quota, as
``benchmarks/verdict_faults.py`` holds the switch on one machine) during every leg, then once
more with nothing held. Prints each try's verdict and which servers' switches the switch
invariant named.

    fabriclab servers local 2 --out /tmp/servers.yaml
    .venv/bin/python benchmarks/servers_starved.py --servers /tmp/servers.yaml [--tries 2]
    fabriclab servers stop                                                   (as root)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import tempfile
from pathlib import Path

from testbed.core.experiment import load_experiments
from testbed.core.servers import load_servers, server_rundirs
from testbed.emulator.runner import Runner
from testbed.emulator.schedstat import switch_pid
from testbed.emulator.stress import cpu_quota

ROOT = Path(__file__).resolve().parents[1]
CORES = 0.15


class HeldRunner(Runner):
    """The runner, with one server's ovs-vswitchd held (``pid``; None: nothing) in every leg."""

    def __init__(self, *args, held_pid: int | None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.held_pid = held_pid

    def _leg(self, fab, jobs, what, key) -> None:
        held = (cpu_quota(self.held_pid, CORES) if self.held_pid is not None
                else contextlib.nullcontext())
        with held:
            super()._leg(fab, jobs, what, key)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", type=Path, required=True)
    ap.add_argument("--tries", type=int, default=2)
    args = ap.parse_args()
    servers = load_servers(args.servers)
    exp = next(e for e in load_experiments(ROOT / "experiments" / "two-servers.yaml")
               if e.name.endswith("-vclos")).model_copy(update={"repeats": 1})
    starved = servers.servers[-1].name
    pid = switch_pid(Path(server_rundirs(servers)[starved]) / "ovs-vswitchd.pid")
    if pid is None:
        raise SystemExit(f"the Open vSwitch of {starved} does not run")
    settings = [starved] * args.tries + [None]
    print(f"{'try':6} {'held':5} {'verdict':13} {'switches named':22} reasons")
    with tempfile.TemporaryDirectory(prefix="servers-starved-") as tmp:
        for k, server in enumerate(settings):
            runner = HeldRunner(exp, Path(tmp) / str(k), servers=servers,
                                held_pid=pid if server is not None else None)
            run_dir = runner.run()
            fid = json.loads((run_dir / "fidelity.json").read_text())
            named = sorted({m for r in fid["reasons"]
                            for m in re.findall(r"ovs-vswitchd on (\w+)", r)})
            kinds = sorted({r.split(":")[0] for r in fid["reasons"]})
            print(f"{k + 1:<6} {server or '-':5} {fid['verdict']:13} "
                  f"{', '.join(named) or '-':22} {'; '.join(kinds)}", flush=True)


if __name__ == "__main__":
    main()
