"""summary.json's CSV tables (testbed.core.summary_csv)."""

from __future__ import annotations

import csv
import io

from testbed.core.summary_csv import tables, write_tables

SUMMARY = {
    "jobs": {
        "a": {"hosts": ["h0", "h1"], "mean_s": 0.5, "busbw_gbit_s": 1.5, "slowdown": None,
              "sizes": {"4096": {"collective_s": 0.1, "busbw_gbit_s": 0.3},
                        "1024": {"collective_s": 0.05, "busbw_gbit_s": 0.1}}},
        "a-solo": {"hosts": ["h0", "h1"], "mean_s": 0.25, "solo_of": "a", "sizes": {}},
    },
    "links": {"h0→leaf0": {"mean_util": 0.5, "peak_util": 0.9}},
}


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_one_row_per_job_per_size_and_per_link_with_the_summary_keys():
    t = tables(SUMMARY)
    jobs = rows(t["jobs.csv"])
    assert [j["job"] for j in jobs] == ["a", "a-solo"]
    assert jobs[0]["hosts"] == "h0 h1" and jobs[0]["slowdown"] == "" and "sizes" not in jobs[0]
    assert jobs[1]["solo_of"] == "a" and jobs[1]["busbw_gbit_s"] == ""
    sizes = rows(t["sizes.csv"])
    assert [(s["job"], s["size_bytes"]) for s in sizes] == [("a", "1024"), ("a", "4096")]
    assert float(sizes[1]["busbw_gbit_s"]) == 0.3
    assert rows(t["links.csv"]) == [{"src": "h0", "dst": "leaf0", "mean_util": "0.5",
                                      "peak_util": "0.9"}]


def test_tables_without_rows_keep_their_header(tmp_path):
    paths = write_tables(tmp_path, {"jobs": {}, "links": {}})
    assert [p.name for p in paths] == ["jobs.csv", "sizes.csv", "links.csv"]
    assert (tmp_path / "csv" / "links.csv").read_text() == "src,dst,mean_util,peak_util\n"
    assert not list((tmp_path / "csv").glob("*.partial"))
