"""Job traces for the cluster simulator: Helios and Philly readers, a synthetic generator.

More formats (Acme, Alibaba PAI 2020, Alibaba Lingjun 2023) are read by
:mod:`testbed.sim.trace_formats`; :func:`testbed.sim.trace_loading.load_trace` selects any of
them by name. Every reader
stops at the first bad row with one sentence naming the file and the line (or job).

A job is a :class:`TraceJob`: arrival time, GPUs (one GPU = one host here), a model (which
fixes the gradient bytes All-Reduced per iteration and the compute time per iteration) and
a number of iterations. Traces give a duration instead of iterations; the duration is read
as the job's run time on an idle cluster and turned into iterations with
:func:`iterations_for`.

Model mix (fp32 gradients, compute seconds per iteration are illustrative, not measured):
ResNet-50 25.6 M params (102.4 MB), GNMT ~160 M (640 MB), the DLRM dense part ~20 M
(80 MB) and BERT-large ~340 M (1.36 GB).

Synthetic traces: power-of-two sizes 1..512 skewed toward small jobs (the shape the
Philly and Helios analyses report: most jobs use one GPU, most GPU time goes to large
jobs), log-normal durations (median 30 min, sigma 1.5, clipped to 1 min .. 7 days) and
exponential inter-arrival times whose rate makes the offered GPU-time equal ``load`` times
the cluster's capacity.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import math
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from testbed.core.errors import FabricLabError
from testbed.core.formulas import ALLREDUCE, ALLTOALL, busbw_factor
from testbed.sim.rapidnetsim_model import INTER_RATE, PANGU_SHARE, SMALL_SHARES, ring_time


@dataclass(frozen=True)
class Model:
    name: str
    grad_bytes: int
    compute_s: float  # per iteration


MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model("resnet50", 102_400_000, 0.10),
        Model("gnmt", 640_000_000, 0.30),
        Model("dlrm-dense", 80_000_000, 0.05),
        Model("bert-large", 1_360_000_000, 0.40),
    )
}
MODEL_MIX = {"resnet50": 0.35, "gnmt": 0.15, "dlrm-dense": 0.2, "bert-large": 0.3}
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
SIZE_WEIGHTS = (0.30, 0.10, 0.12, 0.15, 0.10, 0.08, 0.06, 0.04, 0.03, 0.02)
DURATION_MEDIAN_S = 1800.0
DURATION_SIGMA = 1.5
DURATION_RANGE_S = (60.0, 7 * 86400.0)
DEFAULT_LINK_BPS = 100e9


@dataclass(frozen=True)
class TraceJob:
    """One job: ``gradient bytes`` All-Reduced after each of ``iterations`` compute steps."""

    job_id: str
    arrival: float  # seconds from the trace start
    gpus: int
    model: str
    iterations: int
    compute_s: float
    grad_bytes: int
    collective: str = ""  # "ring", "halving-doubling" or "all-to-all"; "": the run's own

    def isolated_time(self, link_bps: float) -> float:
        """Run time on an idle cluster: every ring flow at the full link rate."""
        return self.iterations * (self.compute_s + comm_time(self.gpus, self.grad_bytes, link_bps))


def comm_time(gpus: int, grad_bytes: float, link_bps: float) -> float:
    """Contention-free ring All-Reduce time of ``grad_bytes`` over ``gpus`` hosts."""
    if gpus < 2:
        return 0.0
    return busbw_factor(gpus) * grad_bytes * 8 / link_bps


def iterations_for(duration_s: float, gpus: int, model: Model, link_bps: float) -> int:
    """Iterations that make the isolated run time closest to ``duration_s`` (at least 1)."""
    per_iteration = model.compute_s + comm_time(gpus, model.grad_bytes, link_bps)
    return max(1, round(duration_s / per_iteration))


def _pick_model(rng: random.Random) -> Model:
    names = list(MODEL_MIX)
    return MODELS[rng.choices(names, weights=[MODEL_MIX[n] for n in names])[0]]


def synthetic(
    jobs: int, load: float, total_gpus: int, seed: int, link_bps: float = DEFAULT_LINK_BPS
) -> list[TraceJob]:
    """A reproducible synthetic trace; offered GPU-time / (total_gpus x span) ~ ``load``."""
    if jobs < 1:
        raise FabricLabError(f"--jobs is {jobs}; it must be at least 1")
    if not 0 < load <= 10:
        raise FabricLabError(f"--load is {load}; it must be in (0, 10]")
    rng = random.Random(seed)
    sizes = [s for s in SIZES if s <= total_gpus] or [1]
    weights = SIZE_WEIGHTS[: len(sizes)]
    drawn = []
    for _ in range(jobs):
        gpus = rng.choices(sizes, weights=weights)[0]
        duration = rng.lognormvariate(math.log(DURATION_MEDIAN_S), DURATION_SIGMA)
        duration = min(max(duration, DURATION_RANGE_S[0]), DURATION_RANGE_S[1])
        drawn.append((gpus, duration, _pick_model(rng)))
    mean_gpu_time = sum(g * d for g, d, _ in drawn) / jobs
    rate = load * total_gpus / mean_gpu_time  # jobs per second
    out = []
    t = 0.0
    for i, (gpus, duration, model) in enumerate(drawn):
        if i:
            t += rng.expovariate(rate)
        out.append(
            TraceJob(f"j{i}", t, gpus, model.name, iterations_for(duration, gpus, model, link_bps),
                    model.compute_s, model.grad_bytes)
        )
    return out


def seconds_of(text: str) -> float | None:
    """Seconds since the epoch from a number, an ISO date ('YYYY-mm-dd HH:MM[:SS][+hh:mm]') or
    a 'YYYY/m/d HH:MM[:SS]' date; None when ``text`` is none of these. A date without a UTC
    offset is read in this machine's time zone (only differences between times are used)."""
    text = str(text).strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        return value if math.isfinite(value) else None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        pass
    for fmt in ("%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M"):
        try:
            return datetime.strptime(text, fmt).timestamp()
        except ValueError:
            continue
    return None


def _time(value: str, where: str) -> float:
    """Seconds since the epoch (:func:`seconds_of`), or one sentence naming ``where``."""
    seconds = seconds_of(value)
    if seconds is None:
        raise FabricLabError(f"{where}: time {str(value).strip()!r} is neither seconds nor a date")
    return seconds


def jobs_from_rows(
    rows: Sequence[tuple[str, float, int, float]], seed: int, link_bps: float
) -> list[TraceJob]:
    """(job_id, submit, gpus, duration) rows -> JobSpecs sorted by arrival, models seeded."""
    if not rows:
        raise FabricLabError("the trace holds no usable job (GPU jobs with a duration)")
    rng = random.Random(seed)
    t0 = min(r[1] for r in rows)
    out = []
    for job_id, submit, gpus, duration in sorted(rows, key=lambda r: (r[1], r[0])):
        model = _pick_model(rng)
        out.append(TraceJob(job_id, submit - t0, gpus, model.name,
                           iterations_for(duration, gpus, model, link_bps),
                           model.compute_s, model.grad_bytes))
    return out


@contextmanager
def trace_read_errors(path: Path, form: str) -> Iterator[None]:
    """Around reading the trace file ``path`` (``form``: CSV, JSON): a file that cannot be
    read, or is not UTF-8 text, becomes one :class:`FabricLabError` sentence."""
    try:
        yield
    except OSError as exc:
        raise FabricLabError(f"cannot read trace {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise FabricLabError(f"{path} is not a text (UTF-8) {form} file: byte {exc.start} is "
                             f"{exc.object[exc.start:exc.start + 1]!r}") from None


HELIOS_COLUMNS = ("job_id", "gpu_num", "submit_time", "duration")


def read_helios(path: str | Path, seed: int = 0, link_bps: float = DEFAULT_LINK_BPS
                ) -> list[TraceJob]:
    """SenseTime Helios ``cluster_log.csv``; CPU-only jobs and jobs without duration skipped."""
    path = Path(path)
    with trace_read_errors(path, "CSV"), path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in HELIOS_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise FabricLabError(
                f"{path} is not a Helios cluster_log.csv: it has no column {missing[0]}"
            )
        rows = []
        for line, rec in enumerate(reader, start=2):
            where = f"{path} line {line}"
            try:
                gpus = int(float(rec["gpu_num"] or 0))
                duration = float(rec["duration"] or 0)
            except ValueError:
                raise FabricLabError(f"{where}: gpu_num or duration is not a number") from None
            if gpus >= 1 and duration > 0:
                rows.append((str(rec["job_id"]), _time(rec["submit_time"], where), gpus,
                             duration))
    return jobs_from_rows(rows, seed, link_bps)


def read_philly(path: str | Path, seed: int = 0, link_bps: float = DEFAULT_LINK_BPS
                ) -> list[TraceJob]:
    """Microsoft Philly ``cluster_job_log`` (JSON list). GPUs and run time from the last
    attempt that has both times; jobs without one are skipped."""
    path = Path(path)
    try:
        with trace_read_errors(path, "JSON"):
            data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FabricLabError(f"{path} is not JSON (line {exc.lineno}): {exc.msg}") from None
    if not isinstance(data, list):
        raise FabricLabError(f"{path} is not a Philly cluster_job_log: expected a JSON list")
    rows = []
    for i, job in enumerate(data):
        where = f"{path} job {i}"
        if not isinstance(job, dict) or "jobid" not in job or "submitted_time" not in job:
            raise FabricLabError(f"{where} has no jobid or submitted_time")
        for attempt in reversed(job.get("attempts") or []):
            start, end = attempt.get("start_time"), attempt.get("end_time")
            if start in (None, "None") or end in (None, "None"):
                continue
            gpus = sum(len(d.get("gpus") or []) for d in attempt.get("detail") or [])
            duration = _time(end, where) - _time(start, where)
            if gpus >= 1 and duration > 0:
                rows.append((str(job["jobid"]), _time(job["submitted_time"], where), gpus,
                             duration))
            break
    return jobs_from_rows(rows, seed, link_bps)


def job_set_sha256(jobs: Sequence[TraceJob]) -> str:
    """A digest of every job's id, arrival, size, model and work: equal digests, equal jobs."""
    fields = [[j.job_id, j.arrival, j.gpus, j.model, j.iterations, j.compute_s, j.grad_bytes]
              + ([j.collective] if j.collective else [])  # older digests stay as they were
              for j in sorted(jobs, key=lambda j: (j.arrival, j.job_id))]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


# ---------------------------------------------------------------- the vClos paper's jobs
#
# arXiv 2308.05692 ("Isolated Scheduling for Distributed Training Tasks in GPU Clusters"),
# as its simulator RapidNetSim sets it up (large_exp_8192/5000_241, generated by
# base_conf_template/generate_tasks.py, get_fixed_requests_256_part_tasks_TPUv4_512):
# sizes on TPU-v4's job-size distribution capped at 512, Poisson arrivals 241 s apart on
# average, run times clamped to [1000, 100000] s and rounded down to 100 s, one iteration of
# compute then one collective, and a model mix that decides the collective.

PAPER_TRACE = "vclos-paper"
PAPER_MEAN_INTERARRIVAL_S = 241.0
PAPER_DURATION_RANGE_S = (1000.0, 100000.0)
PAPER_MAX_GPUS = 512
# TPU-v4 job sizes and the cumulative fractions RapidNetSim gives them. As written the third
# value (16 GPUs) is below the second, a negative mass; its sampler then never draws 16 or 32
# and takes the deficit from the next sizes, which is exactly the running maximum of these
# values (the monotone envelope), so that is what is used here (see docs/vclos-paper.md).
TPUV4_SIZES = (4, 8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048)
TPUV4_CDF_AS_CODED = (0.05, 0.1, 0.05, 0.09, 0.43, 0.605, 0.612, 0.729, 0.73, 0.849, 0.856,
                      0.893, 0.895, 1.0)
# Communication's share of a job's run time per model (RapidNetSim's ALL_REDUCE_COST; Pangu
# adds its all-to-all, all-gather and reduce-scatter shares).
PAPER_SMALL_MODELS: dict[str, float] = {
    "VGG16_4": 0.25, "VGG16_8": 0.23, "VGG16_16": 0.16, "VGG16_32": 0.1, "VGG16_64": 0.07,
    "VGG16_96": 0.04, "ResNet50_16": 0.04, "ResNet50_32": 0.05, "ResNet50_64": 0.04,
    "ResNet50_96": 0.03, "ResNet50_128": 0.02, "ResNet101_16": 0.05, "ResNet101_32": 0.05,
    "ResNet101_64": 0.04, "ResNet101_96": 0.02, "Bert_16": 0.12, "Bert_32": 0.08,
}
PAPER_PANGU_COMM_SHARE = 0.0737 + 0.258 + 0.0158 + 0.0002
# A power-of-two job runs halving-doubling with this probability, a ring up to the next
# value, else Pangu's all-to-all; other sizes always run a ring.
PAPER_MIX = (0.5, 0.7)


def paper_size_weights() -> dict[int, float]:
    """The size distribution drawn: TPU-v4's, monotone envelope, sizes above 512 at 512."""
    weights: dict[int, float] = {}
    prev = 0.0
    for size, cum in zip(TPUV4_SIZES, itertools.accumulate(TPUV4_CDF_AS_CODED, max),
                         strict=True):
        capped = min(size, PAPER_MAX_GPUS)
        weights[capped] = weights.get(capped, 0.0) + cum - prev
        prev = cum
    return {s: w for s, w in weights.items() if w > 0}


def collective_bytes(collective: str, gpus: int, comm_s: float, link_bps: float) -> float:
    """Bytes per rank whose collective takes ``comm_s`` alone at ``link_bps`` per host: an
    All-Reduce (ring or halving-doubling) sends 2(n-1)/n of them, an all-to-all (n-1)/n."""
    share = busbw_factor(gpus, ALLTOALL if collective == "all-to-all" else ALLREDUCE)
    return comm_s * link_bps / 8 / share


def vclos_paper_trace(jobs: int, seed: int, link_bps: float = DEFAULT_LINK_BPS
                      ) -> list[TraceJob]:
    """The paper's jobs (module comment above); run times from the synthetic log-normal, as
    the Helios log they were drawn from is not shipped."""
    if jobs < 1:
        raise FabricLabError(f"--jobs is {jobs}; it must be at least 1")
    rng = random.Random(seed)
    weights = paper_size_weights()
    sizes, size_weights = list(weights), list(weights.values())
    small = list(PAPER_SMALL_MODELS)
    out = []
    t = 0.0
    for i in range(jobs):
        t += rng.expovariate(1 / PAPER_MEAN_INTERARRIVAL_S)
        gpus = rng.choices(sizes, weights=size_weights)[0]
        run_s = rng.lognormvariate(math.log(DURATION_MEDIAN_S), DURATION_SIGMA)
        run_s = min(max(run_s, PAPER_DURATION_RANGE_S[0]), PAPER_DURATION_RANGE_S[1])
        run_s = 100.0 * math.floor(run_s / 100)
        draw = rng.random()
        power_of_two = gpus & (gpus - 1) == 0
        if draw < PAPER_MIX[1] or not power_of_two:
            model = rng.choice(small)
            collective = "halving-doubling" if draw < PAPER_MIX[0] and power_of_two else "ring"
            share = PAPER_SMALL_MODELS[model]
        else:
            model, collective, share = "Pangu", "all-to-all", PAPER_PANGU_COMM_SHARE
        grad = collective_bytes(collective, gpus, run_s * share, link_bps)
        out.append(TraceJob(f"j{i}", t, gpus, model, 1, run_s * (1 - share), round(grad),
                           collective))
    return out


# ------------------------------------------------------------- RapidNetSim's own job list
#
# The 5000 jobs RapidNetSim's generator wrote to its base_conf_template/log, reconstructed by
# scripts/rapidnetsim_jobs.py (how, and why not from the Helios log: that script's docstring).

RAPIDNETSIM_JOBS_CSV = Path(__file__).parent / "data" / "rapidnetsim_5000_jobs.csv"
RAPIDNETSIM_TRACES = ("rapidnetsim", "rapidnetsim-comm", "rapidnetsim-jittered")
# RapidNetSim's draw of a job's run time (its generator's model choice and its TaskStartEvent;
# checked against its own run: benchmarks/reference/): under ``random.seed(job index)`` one
# uniform(0, 1) picks small model (below 0.7, or any size not a power of two) or Pangu, and
# ``random.choice`` the small model by its All-Reduce share of the run time (its 17 small
# models, in its list order); at start, re-seeded, after one uniform(0, 1), the model's size
# is scaled by 1 + uniform(-0.5, 0.5). Its shares and collective times:
# testbed.sim.rapidnetsim_model.
RAPIDNETSIM_GAPS_S = (241.0, 285.0, 360.0, 421.0, 555.0)  # the paper's inter-arrival times


def rapidnetsim_drawn_run_s(job: int, gpus: int, run_s: float) -> float:
    """The run time RapidNetSim's simulator gives job ``job`` of its list (``run_s`` the
    list's own): compute, then the communication share scaled by its per-job draw
    (the comment above :data:`RAPIDNETSIM_GAPS_S`). A size not a power of two communicates what
    its ring over the largest power of two p below it takes, 2(p - 1) steps of a 1/(2p)
    share at the inter-server rate (100), for a model sized to its expected ring time."""
    rng = random.Random(job)
    power_of_two = gpus & (gpus - 1) == 0
    small = rng.uniform(0, 1) < 0.7 or not power_of_two
    share = rng.choice(SMALL_SHARES) if small else PANGU_SHARE
    rng.seed(job)
    rng.uniform(0, 1)
    factor = 1 + rng.uniform(-0.5, 0.5)
    if gpus <= 1:
        return run_s * (1 - share)
    if power_of_two:
        return run_s * (1 - share) + run_s * share * factor
    p = 1 << (gpus.bit_length() - 1)
    return (run_s * (1 - share)
            + run_s * share / ring_time(gpus) * factor * (p - 1) / p / INTER_RATE)


def rapidnetsim_trace(jobs: int, gap_s: float, with_comm: bool = False,
                      link_bps: float = DEFAULT_LINK_BPS, drawn: bool = False) -> list[TraceJob]:
    """The first ``jobs`` of RapidNetSim's job list, arriving ``gap_s`` apart on average.

    Without ``with_comm`` a job is its whole run time of compute and no bytes: its run time
    does not depend on placement or sharing, as in RapidNetSim, whose sharing reset
    (docs/vclos-paper.md) runs every flow at the full port rate. With it, the job's
    communication share is its collective's bytes (the collective the log's model implies),
    so placement and max-min sharing change its run time. With ``drawn`` the run times are
    those RapidNetSim's simulator draws (:func:`rapidnetsim_drawn_run_s`)."""
    if jobs < 1:
        raise FabricLabError(f"--jobs is {jobs}; it must be at least 1")
    if not (math.isfinite(gap_s) and gap_s > 0):
        raise FabricLabError(f"--trace rapidnetsim:GAP needs a mean inter-arrival time in "
                             f"seconds > 0, got {gap_s}")
    out = []
    with RAPIDNETSIM_JOBS_CSV.open(newline="", encoding="utf-8") as fh:
        for row in itertools.islice(csv.DictReader(fh), jobs):
            gpus, run_s, share = int(row["gpus"]), float(row["run_s"]), float(row["comm_share"])
            if drawn:
                run_s = rapidnetsim_drawn_run_s(int(row["job"]), gpus, run_s)
            collective = row["collective"]
            arrival = float(row["arrival_per_gap_s"]) * gap_s
            if with_comm and gpus > 1:
                grad = round(collective_bytes(collective, gpus, run_s * share, link_bps))
                compute_s = run_s * (1 - share)
            else:
                grad, compute_s = 0, run_s
            out.append(TraceJob(f"j{row['job']}", arrival, gpus, "rapidnetsim", 1, compute_s,
                               grad, collective))
    return out
