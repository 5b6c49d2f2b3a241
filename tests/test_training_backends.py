"""A training job judged on both backends (analysis/training.py, the report's section):
measured ÷ simulated of the pass, of the exposed communication and of each dimension's."""

import pytest

from analysis.report import _backends_context, _env
from analysis.training import emulated_vs_simulated, measured_over_simulated


def _job(mean_s: float, exposed_s: float, by_dim: list[float] | None, **job) -> dict:
    return {"workload": "training", "model": "themis-resnet50", "algorithm": "baseline",
            "order": "fifo", "mean_s": mean_s, "exposed_comm_s": exposed_s,
            "exposed_dim_s": by_dim, **job}


def _summary(label: str, verdict: str, job: dict, fabric: str = "multidim 4x2x2") -> dict:
    return {"label": label, "fabric": fabric, "fidelity": {"verdict": verdict, "reasons": []},
            "jobs": {"resnet50": job}}


def test_measured_over_simulated_gives_the_pass_the_exposed_and_each_dimension():
    got = measured_over_simulated(_job(4.6, 2.2, [2.0, 0.4, 0.1]),
                                  _job(4.5, 2.0, [2.0, 0.5, 0.0]))
    assert got["pass"] == pytest.approx(4.6 / 4.5) and got["exposed"] == pytest.approx(1.1)
    # a dimension the simulator never exposed has no ratio
    assert got["exposed_dim"] == [pytest.approx(1.0), pytest.approx(0.8), None]
    # the emulator's older rows (no split), or another number of dimensions: no per-dim ratio
    assert measured_over_simulated(_job(4.6, 2.2, None), _job(4.5, 2.0, [2.0]))[
        "exposed_dim"] is None
    assert measured_over_simulated(_job(4.6, 2.2, [1.0]), _job(4.5, 2.0, [1.0, 1.0]))[
        "exposed_dim"] is None


def test_emulated_runs_are_paired_with_the_simulated_run_of_the_same_job():
    sim = _summary("sim", "simulated", _job(4.5, 2.0, [2.0, 0.5]))
    emu = _summary("emu1", "faithful", _job(4.6, 2.2, [2.1, 0.5]))
    other_order = _summary("emu2", "faithful", _job(4.6, 2.2, [2.1, 0.5], order="scf"))
    other_fabric = _summary("emu3", "faithful", _job(4.6, 2.2, [2.1, 0.5]), fabric="2x2")
    (row,) = emulated_vs_simulated([emu, sim, other_order, other_fabric])
    assert (row["label"], row["verdict"], row["job"]) == ("emu1", "faithful", "resnet50")
    assert row["exposed"] == pytest.approx(1.1)
    assert row["exposed_dim"] == [pytest.approx(1.05), pytest.approx(1.0)]
    assert emulated_vs_simulated([emu]) == []  # nothing simulated to judge it against


def test_the_report_prints_measured_over_simulated_beside_the_pass():
    rows = _backends_context([_summary("sim", "simulated", _job(4.5, 2.0, [2.0, 0.5])),
                              _summary("emu1", "faithful", _job(4.6, 2.2, [2.1, 0.5]))])
    (r,) = rows
    assert (r["pass_x"], r["exposed_x"], r["by_dim_x"]) == ("1.022×", "1.100×",
                                                            "d0 1.050×, d1 1.000×")
    assert r["schedule"] == "baseline+fifo"
    for name in ("training.md.j2", "training.html.j2"):
        text = _env().get_template(name).render(training=None, backends=rows)
        assert "Training on the emulator against the simulator" in text
        assert "1.100×" in text and "d0 1.050×, d1 1.000×" in text
    assert "emulator" not in _env().get_template("training.md.j2").render(training=None,
                                                                            backends=[])
