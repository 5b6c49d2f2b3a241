"""The demo's headline, run after run; BENCHMARKS.md "The demo's ECMP draw, fixed and stated".

Does `make demo`'s routing headline hold in every run? (root; issue 30)

Runs `make demo`'s experiment (experiments/demo.yaml, every variant, or with --routing-only
just ecmp and vclos) ``--runs`` times with `fabriclab run`, optionally beside ``--busy`` busy
loops (testbed.emulator.stress). Per run it prints the routing headline's ECMP ÷ vClos
slowdown ratio (median [min, max] over the repeats), vClos's worst slowdown, each variant's
verdict, and whether the run's headline block opened with "not faithful". Last, whether every
run met issue 30's bounds: ratio > 1.3, vClos worst ≤ 1.05, every variant faithful (and, with
--busy, whether every run called faithful met them).

    flock /tmp/fabriclab-roottests.lock .venv/bin/python benchmarks/demo_property.py
        [--runs 5] [--busy 3] [--routing-only] [--spec experiments/demo.yaml] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from analysis.job_invariant import worst_size
from testbed.core.units import format_spread
from testbed.emulator.stress import busy_loops

ROOT = Path(__file__).resolve().parent.parent
RATIO_MIN, VCLOS_WORST_MAX = 1.3, 1.05


def routing_spec(spec: Path, out: Path) -> Path:
    """``spec`` with only its ecmp and vclos variants."""
    data = yaml.safe_load(spec.read_text())
    data["variants"] = [v for v in data["variants"] if v["name"] in ("ecmp", "vclos")]
    path = out / "routing.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def slowdowns(run_dir: Path) -> list[float]:
    jobs = json.loads((run_dir / "summary.json").read_text())["jobs"]
    return [j["slowdown"] for j in jobs.values() if j.get("slowdown") is not None]


def job_verdicts(run_dir: Path) -> dict[str, dict]:
    """Job → its job-invariant verdict in ``run_dir`` (tenant jobs: no solo baselines): the
    worst size's ratio, whether it was violated, and, where it shared links, whether it was
    held with its group and the group's span ratio."""
    with contextlib.suppress(OSError, ValueError):
        fid = json.loads((run_dir / "fidelity.json").read_text())
        return {v["job"]: {"ratio": worst_size(v)["ratio"],
                           "violated": v["violated"],
                           "held": bool((v.get("shared") or {}).get("held")),
                           "span_ratio": (v.get("shared") or {}).get("span_ratio")}
                for v in (fid.get("job") or {}).get("jobs") or []
                if v.get("sizes") and not v["job"].endswith("-solo")}
    return {}


def reasons(run_dir: Path) -> list[str]:
    with contextlib.suppress(OSError, ValueError):
        return list(json.loads((run_dir / "fidelity.json").read_text()).get("reasons") or [])
    return []


def verdict(run_dir: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        return str(json.loads((run_dir / "fidelity.json").read_text()).get("verdict"))
    return "none"


def one_run(spec: Path, out: Path) -> dict:
    """Run the experiment once into ``out``; what it showed."""
    proc = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(spec), "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True)
    runs = sorted(d for d in out.iterdir() if d.is_dir() and not d.name.endswith("-report"))
    by_variant: dict[str, list[Path]] = {}
    for d in runs:
        by_variant.setdefault(d.name.split("-", 2)[2].rsplit("-", 1)[-1], []).append(d)
    ecmp, vclos = by_variant.get("ecmp", []), by_variant.get("vclos", [])
    ratios = [statistics.mean(slowdowns(e)) / statistics.mean(slowdowns(v))
              for e, v in zip(ecmp, vclos, strict=False) if slowdowns(e) and slowdowns(v)]
    headline = proc.stdout[proc.stdout.find("report:"):].splitlines()[1:2]
    return {"exit": proc.returncode, "ratios": ratios,
            "ecmp_jobs": [job_verdicts(e) for e in ecmp],
            "reasons": {d.name: why for d in runs if (why := reasons(d))},
            "vclos_worst": max((max(slowdowns(v)) for v in vclos if slowdowns(v)), default=None),
            "verdicts": {k: [verdict(d) for d in ds] for k, ds in by_variant.items()},
            "says_not_faithful": bool(headline) and headline[0].startswith("not faithful")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--busy", type=int, default=0, help="busy loops beside every run")
    ap.add_argument("--routing-only", action="store_true")
    ap.add_argument("--spec", type=Path, default=ROOT / "experiments" / "demo.yaml")
    ap.add_argument("--keep", type=Path, help="keep the run directories here")
    args = ap.parse_args()
    out = args.keep or Path(tempfile.mkdtemp(prefix="demo-property-"))
    out.mkdir(parents=True, exist_ok=True)
    spec = routing_spec(args.spec, out) if args.routing_only else args.spec
    print(f"{spec}: {args.runs} runs" + (f" beside {args.busy} busy loops" if args.busy else ""))
    results = []
    with busy_loops(args.busy) if args.busy else contextlib.nullcontext():
        for k in range(args.runs):
            res = one_run(spec, out / f"run{k + 1}")
            results.append(res)
            faithful = all(v == "faithful" for vs in res["verdicts"].values() for v in vs)
            ok = (faithful and res["ratios"] and min(res["ratios"]) > RATIO_MIN
                  and res["vclos_worst"] is not None and res["vclos_worst"] <= VCLOS_WORST_MAX)
            res["faithful"], res["meets"] = faithful, bool(ok)
            worst = "n/a" if res["vclos_worst"] is None else f"{res['vclos_worst']:.2f}"
            ratio = format_spread(res["ratios"], ".2f") if res["ratios"] else "n/a"
            print(f"run {k + 1}: ECMP ÷ vClos {ratio}, vClos worst {worst}, "
                  f"verdicts {res['verdicts']}, first line says not faithful: "
                  f"{res['says_not_faithful']}, exit {res['exit']}, meets the bounds: {ok}",
                  flush=True)
            for e, jobs in enumerate(res["ecmp_jobs"]):
                print(f"  ecmp repeat {e + 1}: " + ", ".join(
                    f"{j} {v['ratio']:.2f}" + (" held" if v["held"] else "")
                    + (" VIOLATED" if v["violated"] else "") for j, v in sorted(jobs.items()))
                    + (f"; group span {next(iter(jobs.values()))['span_ratio']}"
                       if jobs else ""), flush=True)
            for name, why in res["reasons"].items():
                print(f"  {name}: " + " | ".join(w[:240] for w in why), flush=True)
    every = all(r["meets"] for r in results)
    ecmp = [v for r in results for jobs in r["ecmp_jobs"] for v in jobs.values()]
    within = [v for v in ecmp if abs(1 - v["ratio"]) <= 0.10]
    spans = [v["span_ratio"] for v in ecmp if v["span_ratio"] is not None]
    print(f"ECMP tenant jobs: {len(within)} of {len(ecmp)} within 10% of their prediction "
          f"alone, {sum(v['held'] for v in ecmp)} held with their group, "
          f"{sum(v['violated'] for v in ecmp)} violated; group span ratio "
          + (format_spread(spans, ".3f") if spans else "n/a"))
    unfaithful = {k: sum(v != "faithful" for r in results for v in r["verdicts"].get(k, []))
                  for k in sorted({k for r in results for k in r["verdicts"]})}
    print(f"variant runs not faithful, per variant: {unfaithful}")
    told = all(r["says_not_faithful"] for r in results if not r["faithful"])
    print(f"every run met ratio > {RATIO_MIN}, vClos worst ≤ {VCLOS_WORST_MAX}, all faithful: "
          f"{every}; every faithful run met the bounds: "
          f"{all(r['meets'] for r in results if r['faithful'])}; every unfaithful run said so "
          f"first: {told}")
    print(f"run directories: {out}")
    return 0 if every else 1


if __name__ == "__main__":
    sys.exit(main())
