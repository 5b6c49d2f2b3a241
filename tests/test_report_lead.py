"""What a report leads with and how it labels its figures: the Themis paper's table (ours,
ASTRA-sim's recorded figure, the paper's) first, headlines naming workload, system and
schedule, run paths folded away at the end, a headline's table saying why its ratios differ
from the headline's, shares and rates labelled for what they are, wide comparisons that fit,
and distinct colours for many runs. No root."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.colors
import pytest
import yaml

from analysis import figures, report
from analysis.astra_reference import astra_finish_s, system_of
from analysis.limits import rate_flag
from analysis.training import e2e_table
from testbed.cli import main
from testbed.core.presets import PRESETS

GIB_MBIT = 2**30 * 8 / 1e6  # ASTRA-sim's GB/s, read as 2^30 bytes/s, in Mbit/s
SCHEDULES = {"baseline": ("baseline", "fifo"), "themis-fifo": ("themis", "fifo"),
             "themis-scf": ("themis", "scf")}


def _fabric(preset: str, mbit_per_gbyte: float, sizes: list[int] | None = None) -> dict:
    dims = PRESETS[preset].dims
    return {"kind": "multidim", "dims": [
        {"size": n, "kind": d.kind, "mbit_s": d.gbyte_s * mbit_per_gbyte}
        for n, d in zip(sizes or [d.size for d in dims], dims, strict=True)]}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_full_size_fabric_is_its_paper_system_whatever_the_gbyte(preset: str) -> None:
    """10^9 or 2^30 bytes per GB/s: the proportions of the rates decide, not their unit."""
    for unit in (8000.0, GIB_MBIT):
        assert system_of(_fabric(preset, unit)) == preset
    small = [2] * len(PRESETS[preset].dims)
    assert system_of(_fabric(preset, 8000.0, small)) is None  # scaled down: not the system


def test_homogeneous_and_heterogeneous_3d_switches_are_told_apart() -> None:
    homo = _fabric("3d-switch-homo", 8000.0)
    homo["dims"][2]["mbit_s"] /= 2
    assert system_of(homo) is None
    assert system_of({"kind": "leaf_spine"}) is None


def test_the_end_to_end_rows_carry_astra_sims_recorded_figures() -> None:
    """GNMT on 2d_switch, as benchmarks/data/astra_e2e_reference.csv records it."""
    summaries = [{"fabric": "F", "system": "2d-switch", "jobs": {"train": {
        "workload": "training", "model": "themis-gnmt", "algorithm": a, "order": o,
        "mean_s": t, "exposed_comm_s": t / 4}}}
        for (a, o), t in zip(SCHEDULES.values(), (11e-3, 10e-3, 9.9e-3), strict=True)]
    (row,) = e2e_table(summaries)
    assert row["system"] == "2d-switch"
    assert row["astra_baseline_s"] == pytest.approx(10917601e-9)
    assert row["astra_gain_scf"] == pytest.approx(10917601 / 9857855)
    assert row["astra_gain_fifo"] == pytest.approx(10917601 / 10055423)
    assert astra_finish_s(None, "themis-gnmt", "baseline") is None
    assert astra_finish_s("2d-switch", "my-model", "baseline") is None


def test_a_busbw_above_the_host_is_flagged_in_the_cells_own_unit() -> None:
    assert rate_flag(19583.1, 2147483.648, "Gbit/s") == " ⚠ above the host's 2147 Gbit/s"
    assert rate_flag(0.227, 200) == " ⚠ above the host's 200 Mbit/s"
    assert "e+" not in rate_flag(3000.0, 2147483.648)  # never 2.147e+06
    assert report._flag(19583.1, 2147483.648).endswith("2147 Gbit/s")
    assert report._flag(0.3, 200.0).endswith("200 Mbit/s")


def test_the_exposed_share_is_of_the_iteration_not_the_compute() -> None:
    assert report._exposed(1.4e-3, 4.76e-3) == "1.4 ms (29%)"
    assert report._exposed(None, 1.0) == "—"


def test_nine_runs_get_nine_colours(tmp_path: Path, monkeypatch) -> None:
    styles = {(figures.run_colour(i), figures.run_style(i)["ls"]) for i in range(40)}
    assert len(styles) == 40 and len({figures.run_colour(i) for i in range(10)}) == 10
    drawn = {}

    def keep(fig, path, runs=()):
        drawn["colours"] = [matplotlib.colors.to_hex(line.get_color())
                            for line in fig.axes[0].get_lines() if line.get_label() in runs]
        return path

    monkeypatch.setattr(figures, "_save", keep)
    series = [(f"run {i}", {1 << 20: float(i + 1), 1 << 22: float(i + 2)}) for i in range(9)]
    figures.busbw_over_size(series, None, tmp_path / "f.png")
    assert len(drawn["colours"]) == 9 and len(set(drawn["colours"])) == 9


# ---------------------------------------------------------------- a paper-table report

def _e2e_spec(path: Path) -> Path:
    """GNMT and ResNet-50 on the 2d-switch system at full size under the three schedules (as
    experiments/themis-e2e.yaml runs each case)."""
    job = {"name": "train", "hosts_wanted": 1024, "chunks": 64, "dim_algorithm": "by-kind"}
    spec = {"name": "lead", "policy": "shortest", "fabric": _fabric("2d-switch", GIB_MBIT),
            "jobs": [job],
            "variants": [{"name": f"{model}-{name}", "jobs": [{**job, "workload": {
                "kind": "training", "model": f"themis-{model}", "passes": 1}}],
                          "job_overrides": {"algorithm": a, "order": o}}
                         for model in ("gnmt", "resnet50") for name, (a, o) in SCHEDULES.items()]}
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def e2e_report(tmp_path_factory) -> tuple[Path, list[Path]]:
    tmp = tmp_path_factory.mktemp("lead")
    assert main(["run", str(_e2e_spec(tmp / "lead.yaml")), "--backend", "sim", "--out",
                 str(tmp / "runs"), "--no-report"]) == 0
    runs = sorted((tmp / "runs").iterdir())
    report.write_report(runs, tmp / "report", "lead")
    return tmp / "report", runs


def test_the_paper_table_leads_and_no_run_path_comes_before_it(e2e_report) -> None:
    out, runs = e2e_report
    md = (out / "report.md").read_text()
    first = md.index("## Headlines")
    assert md.index("### Themis end to end") == md.index("\n", first) + 2  # the first thing
    row = re.search(r"^\| \*\*themis-gnmt\*\* \| mean of 1 \|.*$", md, flags=re.M)
    assert row and "1.30× (1.41× arXiv)" in row.group(0)
    assert re.search(r"^\| themis-gnmt \| 2d-switch \| 11.\d ms \| 10.9 ms \| ", md, flags=re.M)
    assert "over 6 cases: median 1.0" in md  # ours ÷ ASTRA-sim, said before the table
    ends = md.index("## Run directories")
    for run in runs:
        assert md.index(str(run)) > ends  # every path listed at the end, none before
    html = (out / "report.html").read_text()
    assert html.index('<details id="run-directories">') > html.index('id="comparison"')
    assert html.index("<code>" + str(runs[0])) > html.index('<details id="run-directories">')


def test_headlines_name_workload_system_and_schedule_and_explain_their_rows(e2e_report):
    out, _ = e2e_report
    md = (out / "report.md").read_text()
    titles = re.findall(r"^- \*\*(.+?)\*\* — ", md, flags=re.M)
    where = "on 2d-switch (16x64 at 1288/859 Gbit/s)"
    assert titles == [f"Chunk schedule: themis {order} vs baseline, themis-{model} {where}"
                      for model in ("gnmt", "resnet50") for order in ("fifo", "scf")]
    notes = re.findall(r"^_(\d\.\d\d)× is the ratio of mean iteration times.*?average "
                       r"(\d\.\d\d)×", md, flags=re.M)
    assert len(notes) == 4 and all(float(rows) > float(it) for it, rows in notes)
    assert "exposed comm (share of iteration)" in md


def test_a_comparison_of_many_runs_has_a_row_per_run(e2e_report, monkeypatch) -> None:
    out, runs = e2e_report
    monkeypatch.setattr(report, "WIDE_RUNS", 2)
    report.write_report(runs, out.parent / "wide", "lead")
    html = (out.parent / "wide" / "report.html").read_text()
    table = html[html.index('id="comparison"'):]
    assert '<tr><th class="l">run</th><th>Fabric</th>' in table
    assert '<table class="wrap">' in table


def test_the_answer_names_why_a_papers_figure_is_not_for_the_same_workload() -> None:
    """A paper figure above the ceiling carries its note (ResNet-152 is not the artifact's
    ResNet-50), so the sentence does not read as a like-for-like miss."""
    gains = [{"workload": "themis-resnet50", "paper": 1.49, "ceiling": 1.467,
              "note": "the paper's figure is ResNet-152; the artifact ships ResNet-50",
              "gain_fifo": None, "astra_gain_fifo": None, "gain_scf": None,
              "astra_gain_scf": None},
             {"workload": "themis-gnmt", "paper": 1.30, "ceiling": 1.344, "note": "",
              "gain_fifo": None, "astra_gain_fifo": None, "gain_scf": None,
              "astra_gain_scf": None}]
    answer = report._lead_answer({"rows": [], "gains": gains})
    assert ("above the ceiling (the gain were every exposed communication hidden) for 1 of 2 "
            "workloads (themis-resnet50 (the paper's figure is ResNet-152; the artifact ships "
            "ResNet-50))") in answer
