"""Which CPU model the TCG guest gets; BENCHMARKS.md "Fresh machine: the stock-kernel VM".

Runs :mod:`testbed.vm.numerics` (sorts, argsorts and groupbys checked against their expected
results) under QEMU's user-mode emulator, which translates instructions with the same TCG as
``qemu-system-x86_64`` does for the VM, once per CPU model and seed, the models alternating.

    python benchmarks/tcg_cpu_models.py [--models max Nehalem] [--repeats 5] [--rounds 200]

Needs ``qemu-x86_64`` (Debian's ``qemu-user``). Prints, per model, the wrong rounds of each
check (median [min, max] over the repeats), the wall time, and its ratio to the first model's
in the same repeat.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from testbed.core.units import format_spread

ROOT = Path(__file__).resolve().parents[1]


def one(model: str, rounds: int, seed: int) -> tuple[dict[str, int], float]:
    """The numerics check under ``qemu-x86_64 -cpu model``: wrong rounds per check, seconds."""
    t0 = time.monotonic()
    out = subprocess.run(["qemu-x86_64", "-cpu", model, sys.executable, "-m",
                          "testbed.vm.numerics", "--rounds", str(rounds), "--seed", str(seed)],
                         cwd=ROOT, capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - t0
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:  # it crashed: every round counts as wrong
        return {"crashed": rounds}, seconds
    return json.loads(lines[-1])["wrong"], seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["max", "Nehalem"],
                   help="QEMU CPU models, with features as QEMU takes them (max,-avx2)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=200)
    args = p.parse_args(argv)
    if shutil.which("qemu-x86_64") is None:
        print("qemu-x86_64 is not installed: apt-get install qemu-user", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the child dies with its run()
    wrong: dict[str, dict[str, list[int]]] = {m: {} for m in args.models}
    seconds: dict[str, list[float]] = {m: [] for m in args.models}
    for seed in range(args.repeats):
        for model in args.models if seed % 2 == 0 else args.models[::-1]:
            counts, s = one(model, args.rounds, seed)
            for check, n in counts.items():
                wrong[model].setdefault(check, []).append(n)
            seconds[model].append(s)
            print(f"# seed {seed} {model}: {counts} in {s:.1f} s", flush=True)
    first = args.models[0]
    print(f"\n{args.repeats} repeats of {args.rounds} rounds; wrong rounds median [min, max]")
    for model in args.models:
        checks = ", ".join(f"{c} {format_spread(v, '.0f')}" for c, v in wrong[model].items())
        ratios = [s / f for s, f in zip(seconds[model], seconds[first], strict=True)]
        print(f"{model:>10}: {checks}; {format_spread(seconds[model])} s, "
              f"{format_spread(ratios)}x {first}'s time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
