"""Small synthetic run directories with known numbers, in the layout the runner writes.

:func:`build_multidim_run` — a 2x2 multidim fabric (dimension 0 at 80 Mbit/s, dimension 1 at
40 Mbit/s, both through switches); jobs ``baseline`` then ``themis`` on hosts h0..h3, each
All-Reducing ``SIZE`` = 1 MB in 2 chunks, 1 warm-up + 2 measured collectives. Every chunk phase
lasts ``UNIT`` = 0.125 s and every rank sends 250 kB in it. Baseline runs both chunks
RS d0 → AR d1 → AG d0, so a collective takes 4 units = 0.5 s, dimension 0 is busy all of it and
dimension 1 half of it; Themis turns chunk 1 round (RS d1 → AR d0 → AG d1): 3 units = 0.375 s
with both dimensions busy throughout (speedup 4/3). Bytes-based utilisation of baseline is
1 MB ÷ (10 MB/s · 0.5 s) = 0.2 on d0 and 0.5 MB ÷ (5 MB/s · 0.5 s) = 0.2 on d1.

:func:`build_leaf_spine_run` — 2 leaves × 2 spines × 2 hosts at 100 Mbit/s; ring jobs ``a``
(h0, h2) and ``b`` (h1, h3) All-Reduce ``LS_SIZE`` = 2 MB and share spine0 (an ECMP collision)
with collective times 0.4 s and 0.3 s against 0.2 s for their solo baselines ``a-solo`` and
``b-solo`` (slowdowns 2 and 1.5); a DNN job ``dnn`` has iteration time 0.5 s, exposed
communication 0.2 s, compute share 0.6.
Link counters follow the traffic the phases imply, sampled at 10 Hz.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from testbed.core.spec import LeafSpineSpec, MultidimSpec
from testbed.core.topology import build_plan
from testbed.core.traces import COLLECTIVE_SCHEMA, PHASE_SCHEMA, bandwidths
from workloads.hierarchical import Topology
from workloads.model import predict

SIZE = 1_000_000
LS_SIZE = 2_000_000  # leaf-spine jobs: 80 Mbit/s per host when alone
UNIT = 0.125
GAP = 0.25  # barrier and check between collectives


def chunk_schedule(orders: list[list[int]], unit: float = UNIT) -> list[dict]:
    """Greedy list schedule of chunks (RS on order[:-1], AR on order[-1], AG back); one phase
    per dimension at a time, each ``unit`` long, the lowest chunk first on ties."""
    seqs = []
    for order in orders:
        ops = [(d, "RS") for d in order[:-1]] + [(order[-1], "AR")]
        ops += [(d, "AG") for d in reversed(order[:-1])]
        seqs.append(ops)
    nxt = [0] * len(seqs)
    ready = [0.0] * len(seqs)
    free: dict[int, float] = {}
    out = []
    while any(i < len(s) for i, s in zip(nxt, seqs, strict=True)):
        best = None
        for c, s in enumerate(seqs):
            if nxt[c] < len(s):
                d, _ = s[nxt[c]]
                start = max(ready[c], free.get(d, 0.0))
                if best is None or start < best[0]:
                    best = (start, c)
        assert best is not None
        start, c = best
        d, op = seqs[c][nxt[c]]
        out.append({"chunk": c, "phase": nxt[c], "dim": d, "op": op,
                    "start": start, "end": start + unit})
        free[d] = ready[c] = start + unit
        nxt[c] += 1
    return out


def _write(rows: list[dict], schema: pa.Schema, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _write_job_traces(job_dir: Path, phases: list[dict], colls: list[dict]) -> None:
    for r in sorted({row["rank"] for row in colls}):
        _write([p for p in phases if p["rank"] == r], PHASE_SCHEMA,
               job_dir / f"phases-rank{r}.parquet")
        _write([c for c in colls if c["rank"] == r], COLLECTIVE_SCHEMA,
               job_dir / f"collectives-rank{r}.parquet")


def _coll_row(run: str, job: str, rank: int, k: int, warmup: int, size: int, world: int,
              algorithm: str, transport: str, chunks: int, start: float, t: float) -> dict:
    algbw, busbw = bandwidths(size, t, world)
    return {"run_id": run, "job_id": job, "rank": rank, "coll": k, "iteration": k - warmup,
            "warmup": k < warmup, "size": size, "count": size // 4, "world": world,
            "algorithm": algorithm, "transport": transport, "chunks": chunks, "start": start,
            "time": t, "algbw": algbw, "busbw": busbw, "correct": True}


def _cumulative(phases: list[dict], times: np.ndarray) -> np.ndarray:
    """Bytes sent by the phases up to each time (uniformly over each phase)."""
    total = np.zeros(times.size)
    for p in phases:
        frac = np.clip((times - p["start"]) / (p["end"] - p["start"]), 0, 1)
        total += frac * p["sent"]
    return total


def _samples(plan: dict, traffic: dict[tuple[str, str], list[dict]], t0: float,
             t1: float) -> pd.DataFrame:
    """10 Hz cumulative counters of every link direction; ``traffic[(src, dst)]`` lists the
    phases (start, end, sent) whose bytes cross that direction."""
    times = np.round(np.arange(t0, t1 + 1e-9, 0.1), 6)
    frames = []
    for lk in plan["links"]:
        name = f"{lk['a']}:{lk['a_port']}-{lk['b']}:{lk['b_port']}"
        for src, dst in ((lk["a"], lk["b"]), (lk["b"], lk["a"])):
            cum = _cumulative(traffic.get((src, dst), []), times)
            frames.append(pd.DataFrame({"time": times, "link": name, "src": src, "dst": dst,
                                        "capacity_mbit_s": float(lk["mbit_s"]),
                                        "bytes": np.round(cum).astype("int64")}))
    return pd.concat(frames, ignore_index=True).sort_values(["time", "link"])


def _common(root: Path, name: str, spec: dict, plan_obj, jobs: list[dict],
            samples: pd.DataFrame, faithful: bool, reasons: list[str]) -> Path:
    run = root / f"20261123-120000-{name}"
    run.mkdir(parents=True)
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    (run / "env.json").write_text(json.dumps({"python": "3.11", "fabriclab": "0.1.0"}))
    (run / "topology.json").write_text(plan_obj.to_json())
    (run / "jobs.json").write_text(json.dumps(jobs, indent=1))
    (run / "controller.log").write_text("controller started\n")
    samples.to_parquet(run / "link_samples.parquet", index=False)
    times = np.unique(samples["time"].to_numpy())
    pd.DataFrame({"time": times, "idle": 0.55}).to_parquet(run / "cpu_samples.parquet",
                                                           index=False)
    peaks = []
    for (src, dst, cap), g in samples.groupby(["src", "dst", "capacity_mbit_s"]):
        b = g["bytes"].to_numpy(dtype=float)
        t = g["time"].to_numpy(dtype=float)
        peaks.append({"src": src, "dst": dst, "configured_mbit_s": cap,
                      "peak_mbit_s": float((np.diff(b) * 8 / np.diff(t)).max() / 1e6)})
    fidelity = {"verdict": "faithful" if faithful else "not faithful",
                "reasons": [] if faithful else reasons, "cpu_idle_min": 0.55,
                "cpu_idle_mean": 0.55, "links": peaks}
    (run / "fidelity.json").write_text(json.dumps(fidelity, indent=1))
    return run


def build_multidim_run(root: Path, name: str = "themis", *, faithful: bool = True,
                       algorithms: tuple[str, ...] = ("baseline", "themis"),
                       transport: str = "zerocopy") -> Path:
    """The 2x2 multidim run described in the module docstring; returns its directory."""
    spec = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 80, "kind": "switch"},
                                         {"size": 2, "mbit_s": 40, "kind": "switch"}]}
    plan = build_plan(MultidimSpec.model_validate(spec))
    topo = Topology((2, 2))
    hosts = [f"h{i}" for i in range(4)]
    orders = {"baseline": [[0, 1], [0, 1]], "themis": [[0, 1], [1, 0]]}
    jobs, traffic = [], {}
    t = 100.0
    for alg in algorithms:
        sched = chunk_schedule(orders[alg])
        span = max(p["end"] for p in sched)
        phases, colls = [], []
        start = t
        for k in range(3):
            c0 = t + GAP
            for r in range(4):
                colls.append(_coll_row(name, alg, r, k, 1, SIZE, 4, alg, transport, 2, c0, span))
                for p in sched:
                    nbytes = SIZE // 2 if p["op"] != "AR" else SIZE // 4
                    row = {"run_id": name, "job_id": alg, "rank": r, "coll": k,
                           "iteration": k - 1, "warmup": k < 1, "chunk": p["chunk"],
                           "phase": p["phase"], "dim": p["dim"], "op": p["op"],
                           "bytes": nbytes, "start": c0 + p["start"], "end": c0 + p["end"],
                           "group": 2, "sent_bytes": nbytes // 2 * (2 if p["op"] == "AR" else 1)}
                    phases.append(row)
                    sent = row["sent_bytes"]
                    sw = f"d{p['dim']}s{r // 2 if p['dim'] == 0 else r % 2}"
                    for key in ((hosts[r], sw), (sw, hosts[topo.neighbour(r, p["dim"], 1)])):
                        traffic.setdefault(key, []).append(
                            {"start": row["start"], "end": row["end"], "sent": sent})
            t = c0 + span
        t += GAP
        _write_job_traces(root / "_staging" / alg, phases, colls)
        model_s = predict([2, 2], [80e6, 40e6], SIZE, 2, policy=alg, dim_kinds=plan.spec.kinds)
        jobs.append({"name": alg, "hosts": hosts, "dims": [2, 2], "policy": "static",
                     "model_s": {str(SIZE): model_s.time_s}, "spines": [],
                     "circuits": [], "algorithm": alg, "order": "fifo", "chunks": 2,
                     "transport": transport,
                     "workload": {"kind": "allreduce", "sizes": [SIZE], "iterations": 2,
                                  "warmup": 1},
                     "solo_of": None, "start": start, "end": t, "status": "ok"})
        t += 0.5
    samples = _samples(plan.to_dict(), traffic, 99.5, t + 0.5)
    run = _common(root, name, {"name": name, "fabric": spec}, plan, jobs, samples, faithful,
                  ["CPU idle fell to 3% (below the 10% floor)",
                   "link h0→d0s0 peaked at 61 of 80 Mbit/s"])
    (root / "_staging").rename(run / "jobs")
    return run


def _ls_route(src: int, dst: int, spine: int) -> list[tuple[str, str]]:
    """Directed hops host→leaf(→spine→leaf)→host on the 2x2x2 leaf-spine."""
    ls, ld = src // 2, dst // 2
    hops = [(f"h{src}", f"leaf{ls}")]
    if ls != ld:
        hops += [(f"leaf{ls}", f"spine{spine}"), (f"spine{spine}", f"leaf{ld}")]
    return [*hops, (f"leaf{ld}", f"h{dst}")]


def build_leaf_spine_run(root: Path, name: str = "ecmp", *, policy: str = "ecmp",
                         times: tuple[float, float] = (0.4, 0.3), spines: tuple[int, int] = (0, 0),
                         with_dnn: bool = True) -> Path:
    """The leaf-spine run described in the module docstring; returns its directory."""
    spec = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
            "host_link_mbit_s": 100, "uplink_mbit_s": 100}
    plan = build_plan(LeafSpineSpec.model_validate(spec))
    staging = root / "_staging"
    traffic: dict[tuple[str, str], list[dict]] = {}
    wl = {"kind": "allreduce", "sizes": [LS_SIZE], "iterations": 3, "warmup": 1}
    # (job, ranks' host ids, spine, start, collective time, solo_of)
    layout = [("a-solo", [0, 2], spines[0], 10.0, 0.2, "a"),
              ("b-solo", [1, 3], spines[1], 13.0, 0.2, "b"),
              ("a", [0, 2], spines[0], 20.0, times[0], None),
              ("b", [1, 3], spines[1], 20.0, times[1], None)]
    jobs = []
    for job, ids, spine, start, ct, solo in layout:
        phases, colls = [], []
        t = start
        for k in range(4):
            c0 = t + GAP
            for r, h in enumerate(ids):
                peer = (r + 1) % 2
                colls.append(_coll_row(name, job, r, k, 1, LS_SIZE, 2, "ring", "zerocopy", 1, c0,
                                       ct))
                phases.append({"run_id": name, "job_id": job, "rank": r, "coll": k,
                               "iteration": k - 1, "warmup": k < 1, "chunk": 0, "phase": 0,
                               "dim": 0, "op": "AR", "bytes": LS_SIZE, "start": c0,
                               "end": c0 + ct, "group": 2, "sent_bytes": LS_SIZE})
                for hop in _ls_route(h, ids[peer], spine):
                    traffic.setdefault(hop, []).append({"start": c0, "end": c0 + ct,
                                                        "sent": LS_SIZE})
            t = c0 + ct
        _write_job_traces(staging / job, phases, colls)
        jobs.append({"name": job, "hosts": [f"h{i}" for i in ids], "dims": [2],
                     "policy": policy,
                     "spines": [spine] if policy != "ecmp" else [], "circuits": [],
                     "algorithm": "ring", "order": "fifo", "chunks": 1,
                     "transport": "zerocopy", "workload": wl, "solo_of": solo,
                     "start": start, "end": t + GAP, "status": "ok"})
    if with_dnn:
        phases, colls, iters = [], [], []
        for k in range(3):
            it0 = 25.0 + 0.5 * k
            c0 = it0 + 0.3
            for r in range(2):
                colls.append(_coll_row(name, "dnn", r, k, 1, LS_SIZE, 2, "ring", "zerocopy", 1,
                                       c0, 0.2))
                phases.append({"run_id": name, "job_id": "dnn", "rank": r, "coll": k,
                               "iteration": k - 1, "warmup": k < 1, "chunk": 0, "phase": 0,
                               "dim": 0, "op": "AR", "bytes": LS_SIZE, "start": c0,
                               "end": c0 + 0.2, "group": 2, "sent_bytes": LS_SIZE})
                iters.append({"run_id": name, "job_id": "dnn", "rank": r, "iteration": k - 1,
                              "warmup": k < 1, "model": "resnet50", "start": it0,
                              "end": it0 + 0.5, "iteration_time": 0.5, "compute_time": 0.3,
                              "exposed_communication": 0.2, "compute_share": 0.6})
                for hop in _ls_route(r, (r + 1) % 2, 0):
                    traffic.setdefault(hop, []).append({"start": c0, "end": c0 + 0.2,
                                                        "sent": LS_SIZE})
        _write_job_traces(staging / "dnn", phases, colls)
        for r in range(2):
            pd.DataFrame([i for i in iters if i["rank"] == r]).to_parquet(
                staging / "dnn" / f"iterations-rank{r}.parquet", index=False)
        jobs.append({"name": "dnn", "hosts": ["h0", "h1"], "policy": policy, "spines": [],
                     "circuits": [], "algorithm": "ring", "order": "fifo", "chunks": 1,
                     "transport": "zerocopy",
                     "workload": {"kind": "dnn", "model": "resnet50", "iterations": 2,
                                  "warmup": 1},
                     "solo_of": None, "start": 25.0, "end": 26.5, "status": "ok"})
    samples = _samples(plan.to_dict(), traffic, 9.5, 27.0)
    run = _common(root, name, {"name": name, "fabric": spec, "policy": policy}, plan, jobs,
                  samples, True, [])
    staging.rename(run / "jobs")
    return run
