"""The start gate of jobs run together (testbed.core.start_gate): a warmed-up job waits for
the runner's go before its first measured collective, and the runner opens the gate once
every job is ready, or one has ended."""

from __future__ import annotations

import threading
import time

from testbed.core import start_gate
from testbed.core.jobs import JobRun
from testbed.core.traces import read_table
from testbed.emulator.runner import Runner
from workloads.launcher import run_local


def test_a_warmed_up_job_measures_only_after_go(tmp_path):
    gate = tmp_path / "gate"
    gate.mkdir()
    opened: list[float] = []

    def keeper() -> None:  # the runner's part, held back half a second after ready
        while not start_gate.ready(gate, ["job0"]):
            time.sleep(0.01)
        time.sleep(0.5)
        opened.append(time.monotonic())
        start_gate.open_gate(gate)

    t = threading.Thread(target=keeper)
    t.start()
    run_local(ranks=2, sizes=[4096, 8192], iterations=2, warmup=1, out_dir=tmp_path / "out",
              start_gate=str(gate))
    t.join()
    colls = read_table(tmp_path / "out", "collectives").to_pandas()
    first_size = colls[colls["size"] == 4096]
    assert (first_size[first_size["warmup"]]["start"] < opened[0]).all()
    assert (colls[~colls["warmup"]]["start"] >= opened[0]).all()
    assert len(colls) == 2 * 2 * 3  # ranks x sizes x (warm-up + measured): gated once only


def test_the_gate_opens_when_every_job_is_ready_or_one_has_ended(tmp_path):
    jobs = [JobRun("a", None), JobRun("b", None)]  # type: ignore[arg-type]
    (tmp_path / f"{start_gate.READY}a").touch()
    jobs[1].end = time.monotonic()  # b failed before it was ready: a must not wait for it
    Runner._keep_gate(tmp_path, jobs)
    assert (tmp_path / start_gate.GO).exists()
    both = tmp_path / "both"
    both.mkdir()
    for name in "ab":
        (both / f"{start_gate.READY}{name}").touch()
    Runner._keep_gate(both, [JobRun("a", None), JobRun("b", None)])  # type: ignore[arg-type]
    assert (both / start_gate.GO).exists()
    assert not start_gate.ready(tmp_path, ["a", "b"])
