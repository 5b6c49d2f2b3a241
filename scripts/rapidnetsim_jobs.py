"""Derive fabriclab's copy of RapidNetSim's 5000-job list from its stored generator output.

RapidNetSim (github nothepeople/RapidNetSim, commit 890901b) keeps one output of its job
generator (``get_fixed_requests_256_part_tasks_TPUv4_512``) in ``base_conf_template/log``: line 1
the 5000 job sizes, line 2 the 5000 generated tuples ``(arrival, model_size, gpus,
computation_time, iterations)``. The Helios log it maps (``cluster_log_old.csv``) is not in the
repository, so the job list is reconstructed from those tuples:

- arrival: the cumulative sum of ``numpy.random.default_rng(0).exponential(1, 5000)``
  (checked equal to the logged arrivals); at a mean gap of G seconds RapidNetSim draws the same
  stream times G, so a run at G seconds multiplies these arrivals by G;
- run time: ``computation_time / (1 - share)``, with ``share`` the model's communication share
  (one of RapidNetSim's ``ALL_REDUCE_COST`` values, or Pangu's sum); of the shares, the one
  that makes the run time a multiple of 100 s in [1000, 100000] s (the generator's rounding)
  and, where two do, the one that also gives ``model_size`` times the collective's expected
  time equal to ``run time x share`` (the generator's definition of ``model_size``);
- collective: the one whose expected time (RapidNetSim's formulas for halving-doubling, ring
  and all-to-all, 4 GPUs a server at 1000, 100 between servers) fits ``model_size``;
  halving-doubling where halving-doubling and ring give the same time; ring where none fits.

Usage: ``git -C MIRROR show HEAD:base_conf_template/log > log && python scripts/rapidnetsim_jobs.py
log testbed/sim/data/rapidnetsim_5000_jobs.csv``.
"""

from __future__ import annotations

import ast
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.sim.rapidnetsim_model import EXPECTED, PANGU_SHARE, SMALL_SHARES


def close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1.0)


def derive(arrival: float, model_size: float, gpus: int, compute_s: float
           ) -> tuple[int, float, str]:
    fits = []
    for share in sorted({*SMALL_SHARES, PANGU_SHARE}):
        run = compute_s / (1 - share)
        rounded = 100 * round(run / 100)
        if close(run, rounded) and 1000 <= rounded <= 100000:
            fits.append((rounded, share))
    if not fits:
        raise SystemExit(f"job at {arrival}: no communication share gives a run time")
    for run, share in fits:
        for name, expected in EXPECTED:
            if gpus > 1 and close(model_size * expected(gpus), run * share):
                return run, share, name
    run, share = fits[0]
    return run, share, "ring"


def main(log_path: str, out_path: str) -> None:
    try:
        with open(log_path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        sizes, tuples = ast.literal_eval(lines[0]), ast.literal_eval(lines[1])
    except (OSError, IndexError, ValueError, SyntaxError):
        raise SystemExit(f"{log_path}: not RapidNetSim's base_conf_template/log (two lines: "
                         "the job sizes, then the generated tuples)") from None
    if sizes != [t[2] for t in tuples]:
        raise SystemExit("the log's two lines disagree on the job sizes")
    rows = []  # all derived before the file is opened: a bad tuple leaves no half a file
    for i, (arrival, model_size, gpus, compute_s, _) in enumerate(tuples):
        run, share, name = derive(arrival, model_size, gpus, compute_s)
        rows.append([i, repr(arrival), gpus, run, round(share, 6), name])
    with open(out_path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["job", "arrival_per_gap_s", "gpus", "run_s", "comm_share", "collective"])
        out.writerows(rows)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python scripts/rapidnetsim_jobs.py RAPIDNETSIM_LOG OUT_CSV")
    main(sys.argv[1], sys.argv[2])
