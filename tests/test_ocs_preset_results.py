"""OCS-vClos's results on the vClos paper's preset, pinned: every rewiring, on the preset's first
30 jobs squeezed onto 16 leaves and 16 spines (so jobs wait and some are refused), gives the
same JCTs and refusals as before its allocator was made faster (issue 44). The pins were
measured with the allocator as it was at 2a1c2e3."""

from __future__ import annotations

import csv
import hashlib
import io

import pytest

from testbed.sim.cluster_run import simulate_run

# rewiring, GPUs per server -> avg JCT s, refused fragmented (admissions), of them for links,
# refused unshapeable, completed, and a digest of every job's JCT
PINNED = {
    ("any", 1): (55595.456173784405, 4, 4, 8, 22, "8703f4f9e1a3b4f4"),
    ("conservative", 1): (56598.75482677406, 8, 7, 8, 22, "8a1192bb8b8410f9"),
    ("augment", 1): (55068.18344651167, 0, 0, 8, 22, "edc2bb67fb8c2bd1"),
    ("augment", 4): (55068.18344651167, 0, 0, 8, 22, "edc2bb67fb8c2bd1"),
    ("milp", 4): (74538.6439101106, 0, 0, 0, 30, "d97d0ed4f1f4ac72"),
}


def jct_digest(jobs_csv: str) -> str:
    """The first 16 hex digits of the SHA-256 of every job's id and JCT (to the µs)."""
    rows = csv.DictReader(io.StringIO(jobs_csv))
    text = "".join(f"{r['job_id']}:{float(r['jct_s']):.6f};" for r in rows)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize(("rewiring", "gpus_per_server"), sorted(PINNED))
def test_ocs_vclos_results_on_the_preset_are_unchanged(rewiring: str,
                                                       gpus_per_server: int) -> None:
    files = simulate_run({"preset": "vclos-paper", "policy": "ocs-vclos", "rewiring": rewiring,
                          "jobs": 30, "gpus_per_server": gpus_per_server, "seed": 1,
                          "leaves": 16, "spines": 16})
    s = files.summary
    got = (s["avg_jct_s"], s["refused_fragmented"], s["refused_fragmented_links"],
           s["refused_unshapeable"], s["jobs_completed"], jct_digest(files.texts["jobs.csv"]))
    assert got == PINNED[(rewiring, gpus_per_server)]
