"""The report of every ready experiment, run on the sim backend, answers its question: every
plot under a headline shows exactly that headline's runs, no axis is without ticks, no section
is empty, and every model figure is what ``fabriclab model`` says for the same shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from analysis.compare import Headline
from analysis.figures import read_drawn
from analysis.report import build_report
from testbed.cli import main
from testbed.core.errors import FabricLabError
from testbed.core.experiment import experiment_name, load_experiments
from testbed.core.presets import PRESETS
from testbed.core.registry import COLLECTIVES
from testbed.core.spec import load_yaml
from testbed.core.topology import FabricPlan
from testbed.sim.backend import SimBackend
from workloads.flat_model import flat_allreduce_s

EXPERIMENTS = sorted(Path("experiments").glob("*.yaml"))
SLOW = {"themis-e2e", "themis-e2e-emulated"}  # about a minute each on 2 cores


def _ready_on_sim(path: Path) -> str | None:
    """Why the sim backend cannot run the experiment, or None when it can."""
    exps = load_experiments(path, shaped=False)
    if any(j.workload.kind == "command" for e in exps for j in e.jobs):
        return "command jobs run programs: only the emulator runs them"
    try:
        for e in exps:
            SimBackend().check(e)
    except FabricLabError as exc:
        return str(exc)
    return None


def _params() -> list[Any]:
    out = []
    for path in EXPERIMENTS:
        marks = [pytest.mark.slow] if path.stem in SLOW else []
        out.append(pytest.param(path, marks=marks, id=path.stem))
    return out


def _run(spec: Path, out: Path, capsys) -> tuple[list[Path], Path, list[Headline]]:
    """Run ``spec`` on the sim backend as ``fabriclab run`` does; its run directories, report
    directory and headlines. The terminal output ends with the headlines, each naming its
    setup, and the report directory is named after the experiment."""
    main(["run", str(spec), "--backend", "sim", "--out", str(out / "runs")])
    printed = "".join(capsys.readouterr().out.split())  # rich wraps lines anywhere
    run_dirs = sorted(p for p in (out / "runs").iterdir() if not p.name.endswith("-report"))
    name = experiment_name(spec)
    html, heads = build_report(run_dirs, out / "report", name)
    if len(run_dirs) > 1:
        (report,) = (out / "runs").glob(f"*-{name}-report")
        assert f"report:{report / 'report.html'}" in printed
    tail = printed[printed.index("report:"):]
    for h in heads:
        assert "".join(f"{h.title} — {h.sentence}".split()) in tail
    return run_dirs, html.parent, heads


def _sections(md: str) -> dict[str, str]:
    """Each ``##`` section of a Markdown report: heading -> its text up to the next one."""
    parts = re.split(r"^## (.+)$", md, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def _model_ratio(run_dirs: list[Path], label_ref: str, label_other: str,
                 jobs: tuple[str, str] | None, capsys) -> float:
    """``fabriclab model``'s ``ref ÷ other`` time for the jobs of the two compared runs (for
    flat All-Reduces on leaf-spine, the flat α-β model's, which the runs record)."""
    by_label = {json.loads((d / "summary.json").read_text())["label"]: d for d in run_dirs}
    if jobs is None:  # two runs, the one chunk-scheduled job of each
        sides = [(by_label[label_ref], None), (by_label[label_other], None)]
    else:  # one run, two jobs
        sides = [(by_label[label_ref], jobs[0]), (by_label[label_ref], jobs[1])]
    times = []
    for run_dir, name in sides:
        summary = json.loads((run_dir / "summary.json").read_text())
        job = next(j for j in json.loads((run_dir / "jobs.json").read_text())
                   if not j.get("solo_of") and name in (None, j["name"]))
        topology = json.loads((run_dir / "topology.json").read_text())
        size = summary["jobs"][job["name"]]["size_bytes"]
        if job["algorithm"] in COLLECTIVES.names():  # a flat All-Reduce on leaf-spine
            times.append(flat_allreduce_s(FabricPlan.from_dict(topology), job["hosts"],
                                          COLLECTIVES.get(job["algorithm"]), size))
            continue
        dims = topology["spec"]["dims"]
        argv = ["model", "--dims", "x".join(str(d["size"]) for d in dims),
                "--bw", ",".join(f"{d['mbit_s'] / 1e3:.12g}" for d in dims),
                "--dim-kinds", ",".join(d.get("kind", "switch") for d in dims),
                "--size", str(size),
                "--chunks", str(job["chunks"]), "--policy", job["algorithm"],
                "--order", job["order"], "--dim-algorithm", job["dim_algorithm"],
                "--semantics", job["semantics"], "--json"]
        assert main(argv) == 0
        times.append(json.loads(capsys.readouterr().out)["predictions"][0]["time_s"])
    return times[0] / times[1]


@pytest.mark.parametrize("spec", _params())
def test_the_report_of_every_ready_experiment_answers_its_question(spec: Path, tmp_path,
                                                                    capsys) -> None:
    why = _ready_on_sim(spec)
    if why:
        pytest.skip(f"{spec.name} does not run on the sim backend: {why}")
    run_dirs, out, heads = _run(spec, tmp_path, capsys)
    md = (out / "report.md").read_text()
    sections = _sections(md)
    names = list(sections)
    assert names[:2] == ["Headlines", "Fidelity"], names  # the answer first
    # every plot under a headline compares exactly that headline's runs
    assert "![" not in sections["Headlines"]  # the first screen: every headline, no figure
    under = sections.get("Headlines in detail", "")
    for i, h in enumerate(heads, 1):
        png = out / f"fig-headline-{i}.png"
        if png.exists():
            assert read_drawn(png)["runs"] == sorted({h.ref, h.other}), h.title
    assert set(re.findall(r"\]\(([^)]+)\)", under)) <= {
        f"fig-headline-{i}.png" for i in range(1, len(heads) + 1)}
    # no axis without ticks, in any figure of the report
    for png in out.glob("*.png"):
        for ax in read_drawn(png)["axes"]:
            assert ax["xticks"] >= 1 and ax["yticks"] >= 1, (png.name, ax)
    # no empty section, and none of the empty phrases the issue found
    for name, text in sections.items():
        assert text.strip(), f"section {name!r} is empty"
    assert "judged by —" not in md
    if "multidim" not in md:  # a leaf-spine fabric has no dimensions to show
        assert "Dim 0" not in md and "Per-dimension" not in md
    assert md.count("flow-level model, no emulation") == 1  # said once, not per run
    # each headline's model figure is fabriclab model's on the same shape, within 1%
    for h in heads:
        if h.model is not None:
            want = _model_ratio(run_dirs, h.ref, h.other, h.jobs, capsys)
            assert h.model == pytest.approx(want, rel=0.01), h.title
            assert f"the model predicts {h.model:.2f}×" in h.sentence
        assert " on " in h.title or h.kind == "peer", h.title  # the title names the setup


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_headline_model_is_fabriclab_model_on_every_preset(preset: str, tmp_path,
                                                             capsys) -> None:
    """A preset's scaled-down system, baseline against Themis with SCF: the headline's model
    figure is ``fabriclab model --preset`` on the run's shape, within 1%."""
    spec = tmp_path / "exp.yaml"
    spec.write_text(json.dumps({
        "name": "p", "preset": preset, "policy": "shortest",
        "jobs": [{"name": "ar", "hosts_wanted": 16, "algorithm": "baseline", "chunks": 8,
                  "workload": {"kind": "allreduce", "sizes": ["1MiB"], "iterations": 1,
                               "warmup": 0}}],
        "variants": [{"name": "baseline"},
                     {"name": "themis", "job_overrides": {"algorithm": "themis",
                                                          "order": "scf"}}]}))
    assert load_yaml(spec)["preset"] == preset
    run_dirs, _, heads = _run(spec, tmp_path, capsys)
    (h,) = heads
    dims = json.loads((run_dirs[0] / "topology.json").read_text())["spec"]["dims"]
    times = []
    for policy, order in (("baseline", "fifo"), ("themis", "scf")):
        assert main(["model", "--preset", preset, "--size", "1MiB", "--chunks", "8",
                     "--dims", "x".join(str(d["size"]) for d in dims), "--policy", policy,
                     "--order", order, "--dim-algorithm", "ring", "--json"]) == 0
        times.append(json.loads(capsys.readouterr().out)["predictions"][0]["time_s"])
    assert h.model == pytest.approx(times[0] / times[1], rel=0.01)
