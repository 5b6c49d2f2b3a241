"""The figures under a headline: exactly its runs, and ticks on every axis (a constant
bandwidth across sizes once drew a diagonal leaving a log axis with no tick)."""

from __future__ import annotations

from analysis import figures
from analysis.figures import read_drawn

KIB = 1024


def test_busbw_over_size_draws_both_runs_and_the_link_on_one_axis(tmp_path) -> None:
    flat = {4 * KIB: 0.19, 64 * KIB: 0.19, 4096 * KIB: 0.19}  # every simulated run
    path = figures.busbw_over_size([("zerocopy", flat), ("rpc", dict.fromkeys(flat, 0.12))],
                                   200.0, tmp_path / "f.png")
    drawn = read_drawn(path)
    assert drawn["runs"] == ["zerocopy", "rpc"]
    (ax,) = drawn["axes"]
    assert ax["labels"] == ["zerocopy", "rpc", "host link 200 Mbit/s"]
    assert ax["xticks"] == 3 and ax["yticks"] >= 3


def test_slowdown_bars_compare_the_jobs_of_the_headlines_runs(tmp_path) -> None:
    path = figures.slowdown_bars([("ecmp", {"j0": 3.0, "j1": 1.5}),
                                  ("vclos", {"j0": 1.0, "j1": 1.0})], tmp_path / "s.png")
    (ax,) = read_drawn(path)["axes"]
    assert read_drawn(path)["runs"] == ["ecmp", "vclos"] and ax["labels"] == ["ecmp", "vclos"]
    assert ax["xticks"] == 2 and ax["yticks"] >= 2
    assert figures.slowdown_bars([("ecmp", {})], tmp_path / "none.png") is None
