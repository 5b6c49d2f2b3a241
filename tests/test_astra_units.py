"""One ASTRA-sim GB/s (2**30 bytes/s, as its analytical backend converts it: see
testbed.core.astra_units) wherever fabriclab reads or writes one: `model --preset X` and an
`import-astra` of `export-astra --preset X` give the same rates for all six presets, and the
experiments and docs that spell the paper's rates out agree. No root."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.core.astra_units import ASTRA_GBYTE_S_IN_BIT_S, ASTRA_GBYTE_S_IN_BYTES_PER_NS
from testbed.core.presets import PRESETS
from workloads.training.platform import LogicalDim

ROOT = Path(__file__).resolve().parent.parent


def test_astra_gbyte_is_two_to_the_thirty_bytes() -> None:
    # astra-network-analytical d27635b src/main.cc:175: link-bandwidth * (1 << 30) / 1e9 B/ns
    assert ASTRA_GBYTE_S_IN_BIT_S == 8 * 2**30
    assert ASTRA_GBYTE_S_IN_BYTES_PER_NS == 1.073741824
    assert LogicalDim(4, "switch", 100, 0, 0).bytes_per_ns == pytest.approx(107.3741824)
    assert PRESETS["3d-switch-homo"].dims[0].mbit_s == pytest.approx(858993.4592)


def _model_header(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, list]:
    assert main(["model", *args, "--size", "256MiB", "--policy", "themis"]) == 0
    text = capsys.readouterr().out
    rates = re.search(r"at (\S+) Gbit/s", " ".join(text.split()))
    assert rates, text
    assert main(["model", *args, "--size", "256MiB", "--policy", "themis", "--json"]) == 0
    return rates.group(1), json.loads(capsys.readouterr().out)["bw_gbit_s"]


@pytest.mark.parametrize("name", list(PRESETS))
def test_model_and_an_imported_export_give_the_same_rates(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown, gbit_s = _model_header(["--preset", name], capsys)
    assert gbit_s == pytest.approx([d.gbyte_s * 8 * 2**30 / 1e9 for d in PRESETS[name].dims],
                                   rel=1e-12)
    assert main(["export-astra", "--preset", name, "--out", str(tmp_path / "astra")]) == 0
    spec = tmp_path / "spec.yaml"
    assert main(["import-astra", str(tmp_path / "astra" / "network.json"), "--system",
                 str(tmp_path / "astra" / "system.txt"), "--scale-down", "--out",
                 str(spec)]) == 0
    capsys.readouterr()
    dims = yaml.safe_load(spec.read_text())["fabric"]["dims"]
    imported = [d["mbit_s"] / 1000 for d in dims]
    assert imported == pytest.approx(gbit_s, rel=1e-12)
    sizes = "x".join(str(d.size) for d in PRESETS[name].dims)
    again, _ = _model_header(["--dims", sizes, "--bw", ",".join(map(repr, imported)),
                              "--dim-kinds", ",".join(PRESETS[name].kinds), "--chunks", "64"],
                             capsys)
    assert again == shown


def test_the_paper_rates_spelled_out_use_the_same_unit() -> None:
    """themis-e2e.yaml spells the presets' rates out in Mbit/s: every one is a whole number of
    ASTRA-sim GB/s, and a preset's own rates among them."""
    text = (ROOT / "experiments" / "themis-e2e.yaml").read_text()
    rates = {float(m) for m in re.findall(r"mbit_s: ([0-9.]+)", text)}
    assert {d.mbit_s for d in PRESETS["2d-switch"].dims} <= rates
    for path in [ROOT / "experiments" / "themis-e2e.yaml"]:
        for mbit_s in re.findall(r"mbit_s: ([0-9.]+)", path.read_text()):
            gbyte_s = float(mbit_s) * 1e6 / ASTRA_GBYTE_S_IN_BIT_S
            assert gbyte_s == pytest.approx(round(gbyte_s), abs=1e-6), (path.name, mbit_s)
