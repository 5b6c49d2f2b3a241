"""Workers leave together: no rank is done (writing its traces, exiting) while another still
runs the last collective, whose time that work would otherwise inflate."""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads.launcher import local_configs, run_in_threads
from workloads.traces import TraceWriter


@pytest.mark.parametrize("algorithm", ["ring", "halving-doubling"])
def test_no_rank_leaves_before_every_last_collective_ended(tmp_path: Path,
                                                           algorithm: str) -> None:
    world = 4
    cfgs = local_configs(ranks=world, dims=[world], algorithm=algorithm, sizes=[1024, 65536],
                         iterations=3, warmup=1, out_dir=tmp_path, timeout=20.0)
    traces = [TraceWriter(tmp_path / f"r{r}", r) for r in range(world)]
    left_s = run_in_threads(cfgs, lambda w: w.run(traces[w.cfg.rank]))
    last_end_s = max(max(row["start"] + row["time"] for row in t.collectives) for t in traces)
    assert all(len(t.collectives) == 2 * 4 for t in traces)  # 2 sizes x (1 warm-up + 3)
    assert min(left_s) >= last_end_s
