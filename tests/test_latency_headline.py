"""experiments/latency.yaml and its headline (#42): where halving-doubling stops beating a ring
on the emulator, the simulator and the model; the flat α-β model behind the last; the report's
line of link delays and loss (pure, no root: the sim backend and synthetic run directories)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis import latency
from analysis.crossover import ALWAYS, CROSSES, NEVER, UNKNOWN, Crossover, crossover, factor
from analysis.load import load_run
from analysis.report import build_report
from testbed.core.experiment import expand, load_experiments
from testbed.core.spec import load_yaml
from testbed.sim.backend import SimRunner

EXPERIMENT = Path(__file__).resolve().parents[1] / "experiments" / "latency.yaml"
HOSTS = [f"h{i}" for i in range(8)]
KIB, MIB = 1024, 1024 * 1024


# ---------------------------------------------------------------- the crossover

def _line(a_s: float, b_s_per_byte: float, sizes: list[int]) -> dict[int, float]:
    return {s: a_s + b_s_per_byte * s for s in sizes}


def test_the_crossover_of_two_alpha_beta_lines_is_exact() -> None:
    sizes = [4 * KIB, 64 * KIB, 512 * KIB, 4 * MIB, 64 * MIB]
    hd, ring = _line(16e-3, 2e-9, sizes), _line(56e-3, 1e-9, sizes)  # cross at 40e6 bytes
    c = crossover(hd, ring)
    assert c.state == CROSSES and (c.low, c.high) == (4 * MIB, 64 * MIB)
    assert c.size_bytes == pytest.approx(40e6)
    assert "between 4 MiB and 64 MiB" in c.describe()


def test_the_last_win_counts_not_noise_at_small_sizes() -> None:
    hd = {1: 2.0, 2: 1.0, 4: 1.0, 8: 3.0}
    ring = {1: 1.0, 2: 2.0, 4: 2.0, 8: 2.0}  # hd loses at 1 (noise), wins at 2 and 4
    c = crossover(hd, ring)
    assert (c.state, c.low, c.high) == (CROSSES, 4, 8)
    assert c.size_bytes == pytest.approx(4 + 4 * 1 / 2)


def test_always_never_and_unknown() -> None:
    assert crossover({1: 1.0, 2: 1.0}, {1: 2.0, 2: 2.0}) == Crossover(ALWAYS, low=1, high=2)
    assert crossover({1: 2.0, 2: 2.0}, {1: 1.0, 2: 1.0}) == Crossover(NEVER, low=1, high=2)
    assert crossover({1: 1.0}, {2: 1.0}).state == UNKNOWN
    assert crossover({1: 1.0, 2: 1.0}, {1: 1.0, 2: 1.0}).state == NEVER  # a tie is no win
    assert "no size" in crossover({1: 2.0}, {1: 1.0}).describe()
    assert "every size" in crossover({1: 1.0}, {1: 2.0}).describe()


def test_factor_between_crossovers() -> None:
    assert factor(Crossover(CROSSES, 100.0, 1, 1000), Crossover(CROSSES, 50.0, 1, 1000)) == 2.0
    assert factor(Crossover(CROSSES, 100.0, 1, 1000), Crossover(NEVER, low=1, high=2)) is None


# ---------------------------------------------------------------- the experiment

def test_the_experiment_validates_as_the_issue_asks() -> None:
    runs = load_experiments(EXPERIMENT, shaped=False)
    assert len(runs) == 6
    algorithms = {r.jobs[0].algorithm for r in runs}
    assert algorithms == {"ring", "halving-doubling", "themis"}
    for r in runs:
        (job,) = r.jobs
        assert len(job.hosts or []) == 8
        assert min(job.workload.sizes) == 4 * KIB and max(job.workload.sizes) == 64 * MIB
        delays = {r.fabric.host_link_delay_us, r.fabric.uplink_delay_us}
        assert delays in ({0}, {2})
        if delays == {2}:  # emulated at or above the fallback's floor (testbed.core.limits)
            from testbed.core.limits import MIN_FALLBACK_DELAY_US
            assert 2 / r.rate_scale >= MIN_FALLBACK_DELAY_US
    assert sum(2 in {r.fabric.host_link_delay_us} for r in runs) == 3


def _sim_runs(tmp_path: Path, sizes: list[str]) -> list[Path]:
    data = load_yaml(EXPERIMENT)
    data["jobs"][0]["workload"].update(sizes=sizes, iterations=1, warmup=0)
    out = []
    for i, exp in enumerate(expand(data, str(EXPERIMENT), shaped=False)):
        out.append(SimRunner(exp, tmp_path / str(i)).run())
    return out


@pytest.fixture(scope="module")
def sim_runs(tmp_path_factory) -> list[Path]:
    return _sim_runs(tmp_path_factory.mktemp("latency"), ["4KiB", "512KiB", "4MiB", "64MiB"])


def test_the_sim_backend_s_headline_puts_its_crossover_at_the_model_s(sim_runs) -> None:
    heads = latency.headlines([load_run(p) for p in sim_runs])
    assert len(heads) == 2  # perfect wires and 2 µs per link
    wires, delayed = heads
    assert "2 µs per link" in delayed.title and "per link" not in wires.title
    assert "simulator below 4 KiB (it wins at no size)" in wires.sentence
    assert "simulator 467.00 KiB (between 4 KiB and 512 KiB)" in delayed.sentence
    assert "model (α-β) 467.00 KiB" in delayed.sentence
    assert "emulator no times" in delayed.sentence
    assert delayed.number == pytest.approx(1.0, rel=0.05)  # the simulator's ÷ the model's
    assert "4 KiB halving-doubling" in delayed.sentence and "64 MiB ring" in delayed.sentence
    assert [r["size_bytes"] for r in delayed.rows] == [4 * KIB, 512 * KIB, 4 * MIB, 64 * MIB]


def _as_emulated(sim_dir: Path, out: Path, slower_small_s: float) -> Path:
    """A synthetic emulated run from a simulated one: fidelity faithful, its own times the
    simulator's plus ``slower_small_s`` per collective (software latency), and the simulated
    run kept as its prediction/."""
    run = out / sim_dir.name
    shutil.copytree(sim_dir, run)
    shutil.copytree(sim_dir, run / "prediction" / sim_dir.name)
    fidelity = json.loads((run / "fidelity.json").read_text())
    (run / "fidelity.json").write_text(json.dumps({**fidelity, "verdict": "faithful"}))
    summary = json.loads((run / "summary.json").read_text())
    for job in summary["jobs"].values():
        for v in job["sizes"].values():
            v["collective_s"] += slower_small_s
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def test_an_emulated_run_s_headline_sets_all_three_side_by_side(sim_runs, tmp_path) -> None:
    ring, hd = (_as_emulated(sim_runs[i], tmp_path, 0.01 * (i + 1)) for i in (3, 4))
    (head,) = latency.headlines([load_run(ring), load_run(hd)])
    assert "; simulator 467.00 KiB (between 4 KiB and 512 KiB); model (α-β) 467.00 KiB" \
        in head.sentence
    # halving-doubling paid 10 ms more per collective here: it stops winning sooner
    emu = latency.crossover(latency.backend_times(load_run(hd))["emulator"],
                            latency.backend_times(load_run(ring))["emulator"])
    sim = latency.crossover(latency.backend_times(load_run(hd))["simulator"],
                            latency.backend_times(load_run(ring))["simulator"])
    assert emu.size_bytes < sim.size_bytes
    assert f"emulator {emu.describe()}; simulator" in head.sentence
    assert head.number == pytest.approx(factor(emu, latency.crossover(
        latency.backend_times(load_run(hd))["model"],
        latency.backend_times(load_run(ring))["model"])))


def test_the_report_gives_the_headline(sim_runs, tmp_path) -> None:
    _html, heads = build_report(sim_runs, tmp_path / "report")
    assert [h.kind for h in heads].count("latency") == 2
    md = (tmp_path / "report" / "report.md").read_text()
    assert "Latency: where halving-doubling stops beating ring" in md
