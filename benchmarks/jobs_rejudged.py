"""Recorded emulated runs' jobs judged again by today's job invariant (no root, no fabric):
BENCHMARKS.md "Jobs that share a link, judged together".

For each run directory (an emulated run with ``paths.json`` and its ``prediction/``): every
tenant job's ratio (the simulator's time on its counted paths ÷ its measured time, at its
worst size), whether the rule alone (within 10 %) or the group rule held it, its group's
span ratio, the segments the hosts resent with all jobs together and how many of those the
receivers' D-SACKs showed needless, and at the end the counts over all runs. The rule is the
registered job invariant's (:class:`analysis.job_invariant.JobInvariant`, through
:func:`analysis.invariant.judge_run`), with the jobs' groups and spans read from the run's
files as the runner's verdict reads them.

    .venv/bin/python benchmarks/jobs_rejudged.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from analysis import job_invariant
from analysis.invariant import judge_run
from testbed.core.units import format_spread
from testbed.emulator.prediction import replay_times


def rejudge(run: Path) -> list[dict]:
    """The run's tenant jobs' verdicts, judged as the runner judges them."""
    extra = {}
    if not (run / "prediction.json").exists():  # a run from before it was recorded
        (replay,) = (run / "prediction").glob("*/jobs.json")
        extra["predicted"] = replay_times(json.loads(replay.read_text()),
                                          replay.parent.relative_to(run))
    verdict = judge_run(run, extra, only=("job",))
    return [v for v in verdict.fields["job"]["jobs"]
            if v["sizes"] and not v["job"].endswith("-solo")]


def resent_segments(run: Path) -> tuple[int, int] | None:
    """The segments the hosts resent while all jobs ran together, and how many of them the
    receivers' D-SACKs showed needless (``drops.json``), or None where it was not recorded."""
    try:
        hosts = json.loads((run / "drops.json").read_text())["legs"]["together"]["hosts"]
    except (OSError, KeyError, ValueError):
        return None
    return (sum(h.get("RetransSegs", 0) for h in hosts.values()),
            sum(h.get("TCPDSACKRecvSegs", 0) for h in hosts.values()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    args = ap.parse_args()
    every: list[dict] = []
    resends = [0, 0]  # segments resent with all jobs together, and the needless ones
    violated_runs = 0
    for run in args.runs:
        verdicts = rejudge(run)
        every += verdicts
        violated_runs += any(v["violated"] for v in verdicts)
        ratios_of_run = {(v.get("shared") or {}).get("span_ratio") for v in verdicts} - {None}
        resent = resent_segments(run)
        if resent:
            resends[0] += resent[0]
            resends[1] += resent[1]
        print(f"{run.name}: " + ", ".join(
            f"{v['job']} {job_invariant.worst_size(v)['ratio']:.3f}"
            + (" held" if (v.get("shared") or {}).get("held") else "")
            + (" VIOLATED" if v["violated"] else "") for v in verdicts)
            + (f"; group span {', '.join(f'{s:.3f}' for s in sorted(ratios_of_run))}"
               if ratios_of_run else "")
            + (f"; resent {resent[0]} segments, {resent[1]} needless" if resent else ""))
    ratios = [job_invariant.worst_size(v)["ratio"] for v in every]
    span_ratios = [v["shared"]["span_ratio"] for v in every
                   if (v.get("shared") or {}).get("span_ratio") is not None]
    print(f"{len(every)} jobs in {len(args.runs)} runs: ratio {format_spread(ratios, '.3f')}; "
          f"{sum(abs(1 - r) <= job_invariant.TOLERANCE for r in ratios)} within "
          f"{job_invariant.TOLERANCE:.0%} alone, "
          f"{sum(bool((v.get('shared') or {}).get('held')) for v in every)} held with their "
          f"group, {sum(v['violated'] for v in every)} violated; runs with a violation: "
          f"{violated_runs}; group span ratio "
          + (format_spread(span_ratios, ".3f") if span_ratios else "n/a")
          + f"; resent {resends[0]} segments, {resends[1]} of them needless (D-SACK)")


if __name__ == "__main__":
    main()
