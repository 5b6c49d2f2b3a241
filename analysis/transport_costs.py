"""What a transport costs per size, from a run's traces: time, CPU and copies per byte sent.

Pure over the trace tables (:mod:`testbed.core.traces`): an iteration takes its slower rank's
time and a run its median iteration; CPU and copies are summed over the measured (not warm-up)
collectives of every rank and divided by the bytes their phases sent.
"""

from __future__ import annotations

from pathlib import Path

from testbed.core.traces import read_table


def size_costs(out: Path) -> dict[int, tuple[float, float, float]]:
    """Per size, from the traces in ``out``: (the median iteration's seconds, CPU seconds per
    GB sent, copies a byte sent), the last two over the measured iterations of every rank."""
    colls = read_table(out, "collectives").to_pandas()
    phases = read_table(out, "phases").to_pandas()
    colls, phases = colls[~colls["warmup"]], phases[~phases["warmup"]]
    sent = phases.merge(colls[["rank", "coll", "size"]], on=["rank", "coll"])
    sent = sent.groupby("size")["sent_bytes"].sum()
    res = {}
    for size, g in colls.groupby("size"):
        seconds = float(g.groupby("iteration")["time"].max().median())
        res[int(size)] = (seconds, float(g["cpu"].sum()) / sent[size] * 1e9,
                          float(g["copied_bytes"].sum()) / sent[size])
    return res
