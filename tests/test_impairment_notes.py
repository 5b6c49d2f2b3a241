"""The report states every run's link delays, jitter and loss, in both units, wherever a link
has any (summary.json's link_impairments), and headline titles name them (pure, no root)."""

from __future__ import annotations

from pathlib import Path

from analysis.compare import describe_setup
from analysis.impairments import impairment_note, impairment_phrase
from analysis.load import load_run
from analysis.report import build_report
from testbed.core.experiment import expand
from testbed.sim.backend import SimRunner

FABRIC = {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
          "host_link_mbit_s": 100000, "uplink_mbit_s": 100000}

def test_the_impairment_note_gives_both_units_and_overrides() -> None:
    record = {"host": {"delay_us": 5000.0, "delay_real_us": 5.0, "jitter_us": 0.0,
                       "jitter_real_us": 0.0, "loss": 0.0},
              "uplink": {"delay_us": 0.0, "delay_real_us": 0.0, "jitter_us": 0.0,
                         "jitter_real_us": 0.0, "loss": 0.0},
              "h1:0-leaf0:2": {"delay_us": 5000.0, "delay_real_us": 5.0, "jitter_us": 500.0,
                               "jitter_real_us": 0.5, "loss": 0.01}}
    note = impairment_note(record)
    assert note == ("Links (one way, per link): host links delay 5 ms (5 µs real); link "
                    "h1:0-leaf0:2 delay 5 ms (5 µs real), jitter 500 µs (0.5 µs real), "
                    "loss 0.01")
    assert impairment_phrase(record) == ("5 µs on host links, 5 µs jitter 0.5 µs loss 0.01 "
                                         "on link h1:0-leaf0:2")
    unscaled = {"dim0": {"delay_us": 10.0, "delay_real_us": 10.0, "jitter_us": 0.0,
                         "jitter_real_us": 0.0, "loss": 0.0}}
    assert impairment_note(unscaled) == "Links (one way, per link): dimension 0's links delay 10 µs"
    assert impairment_phrase(unscaled) == "10 µs per link"
    assert impairment_note({}) is None and impairment_phrase(None) == ""


def _run(tmp_path: Path, **links: float) -> Path:
    (exp,) = expand({"name": "imp", "rate_scale": 0.001, "fabric": {**FABRIC, **links},
                     "jobs": [{"name": "a", "hosts": ["h0", "h1"],
                               "workload": {"kind": "allreduce", "sizes": [4096],
                                            "iterations": 1, "warmup": 0}}]}, shaped=False)
    return SimRunner(exp, tmp_path).run()


def test_a_report_states_an_impaired_run_s_links_and_not_a_perfect_one(tmp_path) -> None:
    delayed = _run(tmp_path / "d", host_link_delay_us=2)
    wires = _run(tmp_path / "w")
    build_report([delayed], tmp_path / "one")
    line = "Links (one way, per link): host links delay 2 ms (2 µs real)"
    assert line in (tmp_path / "one" / "report.md").read_text()
    assert line in (tmp_path / "one" / "report.html").read_text()
    build_report([wires], tmp_path / "none")
    assert "Links (one way" not in (tmp_path / "none" / "report.md").read_text()
    assert describe_setup(load_run(delayed)).endswith(", 2 µs on host links")
    assert "µs" not in describe_setup(load_run(wires))
