"""Does this CPU compute what numpy and pandas expect? A check for emulated guests.

QEMU's software emulation (TCG) is a CPU of its own, with its own bugs: on QEMU 7.2 with
``-cpu max``, numpy's AVX2 argsort of float64 returns wrong orders, and pandas, given them,
segfaults. The check sorts random arrays and groups random frames, and counts the rounds whose
result is wrong. ``python -m testbed.vm.numerics`` prints the counts as JSON and exits 1 if any
round was wrong; ``vm check`` runs it in the guest, ``benchmarks/tcg_cpu_models.py`` per CPU
model.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pandas as pd

CHECKS = ("int_sort", "float_argsort", "groupby_first")


def wrong_rounds(rounds: int = 200, seed: int = 0) -> dict[str, int]:
    """Per check, the number of ``rounds`` (random sizes 10-5000) whose result is wrong."""
    rng = np.random.default_rng(seed)
    wrong = dict.fromkeys(CHECKS, 0)
    for _ in range(rounds):
        n = int(rng.integers(10, 5000))
        ints = np.sort(rng.integers(0, 1000, n))
        wrong["int_sort"] += not bool(np.all(ints[1:] >= ints[:-1]))
        floats = rng.random(n)
        ordered = floats[np.argsort(floats)]
        wrong["float_argsort"] += not bool(np.all(ordered[1:] >= ordered[:-1]))
        frame = pd.DataFrame({"k": rng.integers(0, 50, n), "j": rng.integers(0, 7, n),
                              "v": floats})
        first = frame.groupby(["k", "j"]).first()["v"].sort_index()
        expected = frame.drop_duplicates(["k", "j"]).set_index(["k", "j"])["v"].sort_index()
        wrong["groupby_first"] += not np.array_equal(first.to_numpy(), expected.to_numpy())
    return wrong


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    wrong = wrong_rounds(args.rounds, args.seed)
    print(json.dumps({"rounds": args.rounds, "wrong": wrong}))
    return 1 if any(wrong.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
