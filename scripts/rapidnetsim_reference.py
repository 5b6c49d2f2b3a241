"""Run RapidNetSim's own vClos-paper runs on fabriclab's copy of its job list.

RapidNetSim (github nothepeople/RapidNetSim) is a reference tool here, never a fabriclab
dependency: this script fetches it at the pinned commit into a scratch directory, makes a
venv for it there (gurobipy and what its imports need; nothing is installed into fabriclab's
environment), runs the chosen runs of ``large_exp_8192/5000_241`` and prints the average
JWT, JCT and JRT of each. It leaves nothing behind but ``--out``.

    /usr/bin/python3 scripts/rapidnetsim_reference.py [--runs static_routing,oxc_vclos]
        [--gaps 241] [--jobs 5000] [--out rapidnetsim-reference] [--time-limit-s 3000]
        [--csv benchmarks/reference/rapidnetsim_vclos_paper.csv]
        [--repo-url URL] [--venv DIR]

Needs git and Python 3 with venv (Debian 12: ``apt-get install git python3-venv``) and
PyPI. ``--venv DIR`` reuses (or makes, and keeps) a venv at DIR instead of a scratch one.

How RapidNetSim is driven, unmodified:

- inputs: its own ``generate_ini_conf.py`` of the run renders its own template into
  ``exp.ini``; the one call that reads the Helios log it cannot have here
  (``get_fixed_requests_256_part_tasks_TPUv4_512``, reading a local ``cluster_log_old.csv``)
  is replaced at run time by one that returns the same tuples from fabriclab's
  ``testbed/sim/data/rapidnetsim_5000_jobs.csv``: sizes and run times from that file, the
  model of job i from RapidNetSim's own ``random_choose_model_name(i, gpus)`` and the
  communication shares in its ``generate_tasks``, ``model_size`` and ``computation_time`` as
  its generator computes them, arrivals the running sum of
  ``numpy.random.default_rng(0).exponential(GAP, 5000)`` (its generator's draw). Only the
  first ``--jobs`` tuples are kept. The gap replaces the script's fixed 241 s.
- run: its ``rapidnetsim/main.py exp.ini`` is run (``runpy``) in a process that also records
  every Gurobi model's size before it is solved (``gurobi_models.jsonl``) and, at
  ``--time-limit-s``, flushes RapidNetSim's own logs and stops.
- results: from its ``task_time.log`` (arrival, start and finish of every job), as its
  ``cal_jrt_jwt.py`` computes them (that script itself is run too when all 5000 jobs finish).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PINNED_COMMIT = "890901b"
REPO_URL = "https://github.com/nothepeople/RapidNetSim"
EXPERIMENT = "large_exp_8192/5000_241"
RUNS = ("static_routing", "oxc_vclos")
PACKAGES = ("gurobipy==13.0.3", "numpy", "pandas", "matplotlib", "jinja2", "mmh3", "ortools")
CHECKOUT = ("rapidnetsim", "base_conf_template/__init__.py", "base_conf_template/generate_tasks.py",
            "base_conf_template/create_clos.py", "base_conf_template/base_ini_template.j2",
            EXPERIMENT)
FABRICLAB = Path(__file__).resolve().parent.parent
JOBS_CSV = FABRICLAB / "testbed/sim/data/rapidnetsim_5000_jobs.csv"
LIMIT_EXIT = 3   # the run hit --time-limit-s
ERROR_EXIT = 2   # RapidNetSim raised


class ReferenceError_(Exception):
    """One sentence for the user."""


# ---------------------------------------------------------------------------------------
# Inside the venv: generate exp.ini, run RapidNetSim.
# ---------------------------------------------------------------------------------------

def inside_generate(repo: Path, run_dir: Path, gap_s: float, jobs: int) -> None:
    """Render ``exp.ini`` with the run's own generate_ini_conf.py, its job list fed from
    fabriclab's CSV (cwd: the work directory)."""
    import runpy

    import numpy as np

    sys.path.insert(0, str(repo))
    import base_conf_template.generate_tasks as gt

    with JOBS_CSV.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))[:jobs]

    def fed(num, exponential_interval=True, beta=1, filename="", modify=False,
            random_beta=False, beta_list=(), ave_comm_ratio=0.2):
        # The run's script asks for 5000 jobs at a 241 s mean gap; check that it is the call
        # this replaces, then answer it as the generator would, at the requested gap.
        if num != 5000 or list(beta_list) != [241] or not random_beta:
            raise SystemExit(f"unexpected generator call num={num} beta_list={beta_list}")
        gaps = np.random.default_rng(0).exponential(gap_s, num)
        tasks, arriving = [], 0
        for i, row in enumerate(rows):
            gpus, run_s = int(row["gpus"]), float(row["run_s"])
            name, exp_comm = gt.random_choose_model_name(i, gpus)
            share = sum(table.get(name, 0) for table in
                        (gt.ALL_REDUCE_COST, gt.ALL2ALL, gt.ALLGATHER, gt.ReduceScatter))
            total = 100 * max(1, int(min(100000, max(1000, run_s)) / 100))
            model_size = total * share / exp_comm if gpus > 1 else 0
            arriving += gaps[i]
            # Plain floats: written into exp.ini as numpy 1.x printed them (numpy 2 would
            # print np.float64(...), which RapidNetSim's eval of the task list cannot read).
            tasks.append((float(arriving), float(model_size), gpus,
                          float(total * (1 - share)), 1))
        return tasks

    gt.get_fixed_requests_256_part_tasks_TPUv4_512 = fed
    runpy.run_path(str(repo / EXPERIMENT / run_dir.name.split("@")[0] / "generate_ini_conf.py"),
                   run_name="__main__")
    if "np." in Path("exp.ini").read_text(encoding="utf-8"):
        raise SystemExit("exp.ini holds numpy reprs RapidNetSim cannot eval")


def inside_run(repo: Path, time_limit_s: float) -> None:
    """Run RapidNetSim's main.py on ./exp.ini, recording Gurobi model sizes."""
    import runpy
    import signal
    import traceback

    sys.path.insert(0, str(repo))
    import gurobipy

    models = open("gurobi_models.jsonl", "w", encoding="utf-8")  # noqa: SIM115
    original = gurobipy.Model.optimize

    class RecordedModel(gurobipy.Model):
        """gurobipy's Model, writing each model's size (and Gurobi's answer) before solving."""

        def optimize(self, *args, **kwargs):
            caller = traceback.extract_stack(limit=2)[0]
            entry = {"name": self.ModelName, "caller": f"{Path(caller.filename).name}:"
                                                      f"{caller.name}"}
            try:
                self.update()
                entry.update(vars=self.NumVars, constrs=self.NumConstrs)
                original(self, *args, **kwargs)
                entry["status"] = self.Status
            except gurobipy.GurobiError as exc:
                entry["error"] = str(exc)
                raise
            finally:
                models.write(json.dumps(entry) + "\n")
                models.flush()

    # Before RapidNetSim imports gurobipy: its modules call gurobipy.Model(...) or take
    # Model from ``from gurobipy import *``; both now get the recording subclass.
    gurobipy.Model = RecordedModel

    def flush_logs() -> None:
        from rapidnetsim.core.simulator import Simulator
        if hasattr(Simulator, "task_time_logger"):
            Simulator.flush_logger()

    def stop(signum, frame):
        flush_logs()
        sys.stdout.flush()
        os._exit(LIMIT_EXIT)

    signal.signal(signal.SIGALRM, stop)
    signal.signal(signal.SIGTERM, stop)
    signal.alarm(max(1, int(time_limit_s)))
    sys.argv = ["main.py", "exp.ini"]
    try:
        runpy.run_path(str(repo / "rapidnetsim/main.py"), run_name="__main__")
    except Exception:  # reported, and the run's logs kept
        flush_logs()
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(ERROR_EXIT)


# ---------------------------------------------------------------------------------------
# Outside: fetch, venv, drive, report.
# ---------------------------------------------------------------------------------------

def sh(cmd: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ReferenceError_(f"{what} failed: {tail[0]}")
    return proc


def fetch(scratch: Path, url: str) -> Path:
    if shutil.which("git") is None:
        raise ReferenceError_("git is missing; install it (apt-get install git)")
    repo = scratch / "RapidNetSim"
    sh(["git", "clone", "--quiet", "--no-checkout", url, str(repo)], f"git clone {url}")
    # Only what the two runs read (the repository also holds large trace files it does not).
    sh(["git", "-C", str(repo), "checkout", "--quiet", PINNED_COMMIT, "--", *CHECKOUT],
       f"checking out RapidNetSim commit {PINNED_COMMIT}")
    return repo


def make_venv(venv: Path) -> Path:
    python = venv / "bin/python"
    if not python.exists():
        proc = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise ReferenceError_("cannot make a venv; install python3-venv "
                                  "(apt-get install python3-venv)")
    sh([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
        *PACKAGES], "pip install of RapidNetSim's packages into " + str(venv))
    return python


def read_task_log(path: Path) -> dict[int, dict[str, float]]:
    """{job: {arriving_time, start_time, finish_time}} from RapidNetSim's task_time.log."""
    jobs: dict[int, dict[str, float]] = {}
    if not path.exists():
        return jobs
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split(",")
        if len(parts) == 4 and parts[0].endswith("taskid"):
            jobs.setdefault(int(parts[1]), {})[parts[2]] = float(parts[3])
    return jobs


def summarise(jobs: dict[int, dict[str, float]]) -> dict:
    """Averages as cal_jrt_jwt.py takes them; JWT over the jobs started (under strict FIFO
    a prefix of the job list, so a run stopped early still gives the first jobs' waits),
    JCT and JRT over the jobs finished."""
    started = {j: t for j, t in jobs.items() if {"arriving_time", "start_time"} <= t.keys()}
    done = {j: t for j, t in started.items() if "finish_time" in t}
    out: dict = {"jobs_started": len(started), "jobs_finished": len(done)}
    if started:
        out["avg_jwt_s"] = (sum(t["start_time"] - t["arriving_time"] for t in started.values())
                            / len(started))
    if done:
        n = len(done)
        out["avg_jct_s"] = sum(t["finish_time"] - t["arriving_time"] for t in done.values()) / n
        out["avg_jrt_s"] = sum(t["finish_time"] - t["start_time"] for t in done.values()) / n
    return out


def write_jobs_csv(path: Path, jobs: dict[int, dict[str, float]], sizes: dict[int, int]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["job", "gpus", "arrival_s", "start_s", "finish_s"])
        for j in sorted(jobs):
            t = jobs[j]
            out.writerow([j, sizes.get(j, ""), t.get("arriving_time", ""),
                          t.get("start_time", ""), t.get("finish_time", "")])


def gurobi_refusal(models_path: Path) -> str:
    if not models_path.exists():
        return ""
    for line in models_path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if "error" in entry:
            return (f"Gurobi refused model '{entry['name']}' of {entry.get('caller', '?')} "
                    f"({entry.get('vars', '?')} variables, {entry.get('constrs', '?')} "
                    f"constraints): {entry['error']}")
    return ""


def run_one(python: Path, repo: Path, scratch: Path, out_dir: Path, run: str, gap_s: float,
            jobs: int, time_limit_s: float) -> dict:
    work = scratch / f"{run}@{gap_s:g}"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONHASHSEED": "0", "MPLBACKEND": "Agg"}
    me = str(Path(__file__).resolve())
    gen = subprocess.run([str(python), me, "--inside-generate", str(repo), str(gap_s),
                          str(jobs)], cwd=work, env=env, capture_output=True, text=True)
    if gen.returncode != 0 or not (work / "exp.ini").exists():
        tail = (gen.stderr or gen.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ReferenceError_(f"generating {run}'s exp.ini failed: {tail[0]}")
    start = time.perf_counter()
    with (work / "stdout.log").open("w") as so, (work / "stderr.log").open("w") as se:
        proc = subprocess.run(["nice", "-n", "10", str(python), me, "--inside-run", str(repo),
                               str(time_limit_s)], cwd=work, env=env, stdout=so, stderr=se,
                              timeout=time_limit_s + 600)
    wall_s = time.perf_counter() - start
    sizes = {}
    with JOBS_CSV.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            sizes[int(row["job"])] = int(row["gpus"])
    task_log = read_task_log(work / "task_time.log")
    summary = summarise(task_log)
    dest = out_dir / f"{run}_{gap_s:g}"
    dest.mkdir(parents=True, exist_ok=True)
    write_jobs_csv(dest / "jobs.csv", task_log, sizes)
    for name in ("exp.ini", "task_time.log", "gurobi_models.jsonl", "stderr.log",
                 "queue_length.txt"):
        if (work / name).exists():
            shutil.copy(work / name, dest / name)
    tail = (work / "stdout.log").read_text(errors="replace").splitlines()[-40:]
    (dest / "stdout_tail.txt").write_text("\n".join(tail) + "\n")
    status = {0: "complete", LIMIT_EXIT: f"stopped at --time-limit-s {time_limit_s:g}",
              ERROR_EXIT: "RapidNetSim raised"}.get(proc.returncode, f"exit {proc.returncode}")
    refusal = gurobi_refusal(work / "gurobi_models.jsonl")
    if refusal:
        status = refusal
    cal = ""
    if proc.returncode == 0 and jobs == 5000 and summary["jobs_finished"] == 5000:
        cal_dir = work / "cal"
        (cal_dir / "oxc_vclos").mkdir(parents=True)
        shutil.copy(work / "task_time.log", cal_dir / "oxc_vclos/task_time.log")
        shutil.copy(repo / EXPERIMENT / "cal_jrt_jwt.py", cal_dir)
        res = subprocess.run([str(python), "cal_jrt_jwt.py"], cwd=cal_dir, env=env,
                             capture_output=True, text=True)
        cal = (res.stdout.strip() if res.returncode == 0 else
               f"cal_jrt_jwt.py failed: {res.stderr.strip().splitlines()[-1:]}")
        (dest / "cal_jrt_jwt.txt").write_text(cal + "\n")
    return {"run": run, "gap_s": gap_s, "jobs": jobs, **summary, "wall_s": round(wall_s, 1),
            "status": status, "cal_jrt_jwt": cal}


def gurobi_version(python: Path) -> str:
    proc = subprocess.run([str(python), "-c", "import gurobipy; print(gurobipy.__version__)"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or "not importable"


CSV_FIELDS = ("run", "gap_s", "jobs", "jobs_started", "jobs_finished", "avg_jwt_s",
              "avg_jct_s", "avg_jrt_s", "wall_s", "status", "command", "date",
              "gurobipy_version", "rapidnetsim_commit")


def append_csv(path: Path, row: dict) -> None:
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="", encoding="utf-8") as fh:
        out = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        if new:
            out.writeheader()
        out.writerow(row)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--inside-generate":
        inside_generate(Path(sys.argv[2]), Path.cwd(), float(sys.argv[3]), int(sys.argv[4]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--inside-run":
        inside_run(Path(sys.argv[2]), float(sys.argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="static_routing")
    ap.add_argument("--gaps", default="241")
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--out", default="rapidnetsim-reference")
    ap.add_argument("--csv", default="", help="append one row per run to this CSV")
    ap.add_argument("--time-limit-s", type=float, default=3000.0)
    ap.add_argument("--repo-url", default=REPO_URL)
    ap.add_argument("--venv", default="", help="reuse or make a venv here (kept)")
    args = ap.parse_args()
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    try:
        bad = [r for r in runs if r not in RUNS]
        if bad or not runs:
            raise ReferenceError_(f"--runs must be among {', '.join(RUNS)}, got {args.runs!r}")
        try:
            gaps = [float(g) for g in args.gaps.split(",")]
        except ValueError:
            raise ReferenceError_(f"--gaps must be numbers of seconds, got {args.gaps!r}") from None
        if any(g <= 0 for g in gaps):
            raise ReferenceError_("--gaps must be > 0 seconds")
        if not 1 <= args.jobs <= 5000:
            raise ReferenceError_(f"--jobs must be 1..5000, got {args.jobs}")
        if not JOBS_CSV.exists():
            raise ReferenceError_(f"fabriclab's job list {JOBS_CSV} is missing")
        out_dir = Path(args.out).resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        command = shlex.join([Path(sys.executable).name, "scripts/rapidnetsim_reference.py",
                              *sys.argv[1:]])
        with tempfile.TemporaryDirectory(prefix="rapidnetsim-") as tmp:
            scratch = Path(tmp)
            repo = fetch(scratch, args.repo_url)
            python = make_venv(Path(args.venv).resolve() if args.venv else scratch / "venv")
            version = gurobi_version(python)
            for run in runs:
                for gap in gaps:
                    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ")
                    row = run_one(python, repo, scratch, out_dir, run, gap, args.jobs,
                                  args.time_limit_s)
                    row.update(command=command, date=date, gurobipy_version=version,
                               rapidnetsim_commit=PINNED_COMMIT)
                    if args.csv:
                        append_csv(Path(args.csv), row)
                    figures = "  ".join(f"{k} {row[k]:.1f}" for k in
                                        ("avg_jwt_s", "avg_jct_s", "avg_jrt_s") if k in row)
                    print(f"{run} gap {gap:g} s: {row['jobs_started']}/{args.jobs} jobs "
                          f"started (JWT), {row['jobs_finished']} finished (JCT, JRT)  "
                          f"{figures}  wall {row['wall_s']} s  [{row['status']}]", flush=True)
                    if row["cal_jrt_jwt"]:
                        print("  cal_jrt_jwt.py: " + " ".join(row["cal_jrt_jwt"].split()))
    except ReferenceError_ as exc:
        print(f"rapidnetsim_reference: {exc}", file=sys.stderr)
        return 1
    except subprocess.TimeoutExpired:
        print("rapidnetsim_reference: RapidNetSim did not stop at its time limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
