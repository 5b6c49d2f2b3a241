"""The Themis paper's figures in reports of runs made under its presets (no root)."""

from __future__ import annotations

import pytest

from analysis.papers import figures_for, paper_rows, schedule_gain
from testbed.core.experiment import expand
from testbed.core.presets import PRESETS


def summary(algorithm: str, order: str, times: dict[str, float]) -> dict:
    return {"preset": "2d-switch", "jobs": {"allreduce": {
        "algorithm": algorithm, "order": order, "solo_of": None,
        "sizes": {size: {"collective_s": t} for size, t in times.items()}}}}


def test_every_themis_preset_carries_the_papers_mean_gain():
    for name in PRESETS:
        (fig,) = figures_for(name)
        assert fig.paper == 1.72 and fig.unit == "x"


def test_the_gain_is_baseline_over_themis_per_job_size_of_the_chosen_order():
    runs = [summary("baseline", "fifo", {"1048576": 3.0, "4194304": 12.0}),
            summary("themis", "fifo", {"1048576": 2.5, "4194304": 10.0}),
            summary("themis", "scf", {"1048576": 2.0, "4194304": 6.0})]
    assert schedule_gain("scf")(runs) == pytest.approx([1.5, 2.0])
    assert schedule_gain("fifo")(runs) == pytest.approx([1.2, 1.2])
    (row,) = paper_rows("2d-switch", runs)
    assert row["ours"] == "1.75× [1.50×, 2.00×] (2 job sizes)" and row["gap"] == "+0.03×"


def test_an_experiment_under_a_preset_records_its_name():
    (exp,) = expand({"name": "p", "preset": "2d-switch", "policy": "shortest",
                     "jobs": [{"name": "a", "hosts_wanted": 16, "algorithm": "themis",
                               "workload": {"kind": "allreduce", "sizes": ["1MiB"]}}]})
    assert exp.preset == "2d-switch" and exp.fabric.kind == "multidim"
