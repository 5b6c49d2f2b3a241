"""Choosing a trace by name for the cluster simulator: the trace forms, their check, loading
the first jobs of one (and where it says they ran), and what identifies its jobs in a summary.
The readers live in :mod:`testbed.sim.traces` (synthetic, vClos paper, Helios, Philly) and
:mod:`testbed.sim.trace_formats` (Acme, PAI, Lingjun)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError
from testbed.sim.trace_formats import (
    TracePlacement,
    files_read,
    read_acme,
    read_lingjun,
    read_pai,
)
from testbed.sim.traces import (
    DEFAULT_LINK_BPS,
    PAPER_TRACE,
    RAPIDNETSIM_JOBS_CSV,
    RAPIDNETSIM_TRACES,
    TraceJob,
    rapidnetsim_trace,
    read_helios,
    read_philly,
    synthetic,
    vclos_paper_trace,
)

TRACE_FORMS = ("synthetic, vclos-paper, rapidnetsim:GAP_S, rapidnetsim-comm:GAP_S, "
               "rapidnetsim-jittered:GAP_S, helios:FILE, philly:FILE, acme:FILE, "
               "pai:DIR-or-FILE or lingjun:DIR")
TRACE_KINDS = ("helios", "philly", "acme", "pai", "lingjun")  # those that name a file or dir


def check_trace(spec: str) -> None:
    """One sentence if ``spec`` is no trace form (:data:`TRACE_FORMS`); the files are not read."""
    kind, _, arg = spec.partition(":")
    if kind in RAPIDNETSIM_TRACES:
        rapidnetsim_gap_s(arg)
        return
    if not ((kind in ("synthetic", PAPER_TRACE) and not arg) or (kind in TRACE_KINDS and arg)):
        raise FabricLabError(f"--trace {spec!r} is unknown; use {TRACE_FORMS}")


def rapidnetsim_gap_s(arg: str) -> float:
    """The mean inter-arrival time of ``rapidnetsim:GAP_S``, or one sentence."""
    try:
        gap = float(arg)
    except ValueError:
        gap = float("nan")
    if not gap > 0 or gap == float("inf"):
        raise FabricLabError(f"--trace rapidnetsim:GAP_S needs the jobs' mean inter-arrival "
                             f"time in seconds (> 0), e.g. rapidnetsim:241; got {arg!r}")
    return gap


def load_trace_placement(
    spec: str, jobs: int, load: float, total_gpus: int, seed: int,
    link_bps: float = DEFAULT_LINK_BPS,
) -> tuple[list[TraceJob], TracePlacement | None]:
    """The first ``jobs`` jobs of the trace ``spec`` (:data:`TRACE_FORMS`), and where the trace
    says they ran (a :class:`~testbed.sim.trace_formats.TracePlacement`; None for traces that
    do not record it: all but ``lingjun``)."""
    check_trace(spec)
    kind, _, arg = spec.partition(":")
    if kind == "synthetic":
        return synthetic(jobs, load, total_gpus, seed, link_bps), None
    if kind == PAPER_TRACE:
        return vclos_paper_trace(jobs, seed, link_bps), None
    if kind in RAPIDNETSIM_TRACES:
        return rapidnetsim_trace(jobs, rapidnetsim_gap_s(arg), kind == "rapidnetsim-comm",
                                 link_bps, drawn=kind == "rapidnetsim-jittered"), None
    if kind == "lingjun":
        trace = read_lingjun(arg, seed, link_bps)
        return trace.jobs[:jobs], trace.placement
    reader = {"helios": read_helios, "philly": read_philly, "acme": read_acme,
              "pai": read_pai}[kind]
    return reader(arg, seed, link_bps)[:jobs], None


def load_trace(
    spec: str, jobs: int, load: float, total_gpus: int, seed: int,
    link_bps: float = DEFAULT_LINK_BPS,
) -> list[TraceJob]:
    """The first ``jobs`` jobs of the trace ``spec``: ``synthetic``, ``vclos-paper``,
    ``helios:FILE``, ``philly:FILE``, ``acme:FILE``, ``pai:DIR-or-FILE`` or ``lingjun:DIR``."""
    return load_trace_placement(spec, jobs, load, total_gpus, seed, link_bps)[0]


def trace_identity(spec: str, load: float) -> dict[str, Any]:
    """What fixes a trace's jobs besides the seed and the job count, for summary.json:
    ``trace`` (as given), ``trace_file`` (absolute path of the file or directory) and
    ``trace_sha256`` (the SHA-256 of the file's bytes; of a directory, of each file read, by
    name), and ``load`` (used by synthetic traces only; None for a trace file)."""
    kind, _, arg = spec.partition(":")
    if kind == "synthetic" and not arg:
        return {"trace": spec, "trace_file": None, "trace_sha256": None, "load": load}
    if kind == PAPER_TRACE and not arg:  # arrivals fixed by the paper, not by a load
        return {"trace": spec, "trace_file": None, "trace_sha256": None, "load": None}
    if kind in RAPIDNETSIM_TRACES:  # a job list shipped with fabriclab
        return {"trace": spec, "trace_file": None,
                "trace_sha256": _sha256(RAPIDNETSIM_JOBS_CSV), "load": None}
    path = Path(arg).resolve()
    files = files_read(kind, path)
    try:
        if files == [path]:
            digest = _sha256(path)
        else:
            digest = hashlib.sha256("".join(f"{f.name}\0{_sha256(f)}\n" for f in files)
                                    .encode()).hexdigest()
    except OSError as exc:
        raise FabricLabError(f"cannot read trace {arg}: {exc.strerror}") from None
    return {"trace": spec, "trace_file": str(path), "trace_sha256": digest, "load": None}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
