"""``fabriclab jobs list|add|remove``: place jobs by hand on the fabric ``fabriclab up`` keeps
running, through its controller's API on 127.0.0.1. The fabric is found by the record ``up``
leaves (:mod:`testbed.emulator.up_record`): ``--run DIR`` names its run directory, else the
one ``up`` running on this machine is used."""

from __future__ import annotations

import argparse
import http.client
import json
import re
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError

JOB_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # what the controller's API accepts
HOST = re.compile(r"h[0-9]{1,4}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", description=(
        "Place jobs by hand on the fabric `fabriclab up` keeps up, through its controller's "
        "API on 127.0.0.1. The fabric is the one `fabriclab up` running on this machine, or "
        "the one whose run directory --run names."))
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--run", type=Path, default=None, metavar="DIR",
                       help="run directory of the `fabriclab up` to use (default: the one "
                       "running on this machine)")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = actions.add_parser("list", parents=[where], help="the jobs placed now")
    ls.add_argument("--json", action="store_true", help="print JSON instead of the table")
    add = actions.add_parser("add", parents=[where], help="place a job (root)")
    add.add_argument("job_id", metavar="JOB_ID", help="its name: letters, digits, '.', '_', '-'")
    hosts = add.add_mutually_exclusive_group(required=True)
    hosts.add_argument("--hosts", help="exactly these hosts, comma-separated (h0,h2)")
    hosts.add_argument("--size", type=int, metavar="N",
                       help="N hosts, chosen by the controller's allocator")
    add.add_argument("--policy", default=None,
                     help="the job's policy, one the fabric's allows (e.g. ecmp on a vclos "
                     "fabric; default the fabric's)")
    rm = actions.add_parser("remove", parents=[where],
                            help="release a job and remove its rules (root)")
    rm.add_argument("job_id", metavar="JOB_ID")
    p.set_defaults(func=run)


def check_job_id(job_id: str) -> str:
    if not JOB_ID.fullmatch(job_id):
        raise FabricLabError(f"JOB_ID {job_id!r} is not a job name: use 1 to 64 letters, "
                             "digits, '.', '_' or '-'")
    return job_id


def parse_hosts(text: str) -> list[str]:
    """``h0,h2`` -> ``["h0", "h2"]``, or one sentence saying what is wrong."""
    names = [h.strip() for h in text.split(",")]
    for h in names:
        if not HOST.fullmatch(h):
            raise FabricLabError(f"--hosts {text!r}: {h!r} is not a host name (h0, h1, ...; "
                                 "comma-separated, no spaces needed)")
    if len(set(names)) != len(names):
        raise FabricLabError(f"--hosts {text!r}: a host is listed twice")
    return names


def run(args: argparse.Namespace) -> int:
    from testbed.emulator import up_record
    from testbed.emulator.controller_api import ControllerApi
    from testbed.emulator.preflight import require_root

    hosts: list[str] | None = None
    if args.action != "list":
        check_job_id(args.job_id)
    if args.action == "add":
        if args.hosts is not None:
            hosts = parse_hosts(args.hosts)
        elif args.size < 1:
            raise FabricLabError(f"--size is {args.size}; it must be at least 1")
    # the controller's API is a Unix socket only root can reach (sdn_app.listeners)
    require_root({"add": "place jobs on a running fabric", "list": "list the jobs of a "
                  "running fabric"}.get(args.action, "remove jobs from a running fabric"))
    record = up_record.find(args.run)
    if record.api_socket is None:
        raise FabricLabError(f"the fabric up in {record.run_dir} runs no controller (policy "
                             "static), so it places no jobs: bring it up again with a "
                             "policy (any --policy but static)")
    unknown = [h for h in hosts or [] if h not in record.hosts]
    if unknown:
        raise FabricLabError(f"--hosts: {unknown[0]} is not a host of the fabric up in "
                             f"{record.run_dir} (it has {describe_hosts(record.hosts)})")
    api = ControllerApi(record.api_socket)
    try:
        if args.action == "list":
            jobs = api.get("/jobs")
            print(json.dumps(jobs, indent=1) if args.json else "\n".join(job_table(jobs)))
        elif args.action == "add":
            job = api.create_job(args.job_id, hosts=hosts, hosts_wanted=args.size,
                                 policy=args.policy)
            print(f"job {job['job_id']} placed: {describe(job)}")
        else:
            job = api.delete_job(args.job_id)
            print(f"job {job['job_id']} removed: {', '.join(job.get('host_names', []))} free")
    except OSError as exc:  # refused, reset, timed out
        reason = getattr(exc, "reason", exc)
        raise FabricLabError(
            f"the controller of the fabric up in {record.run_dir} does not answer on "
            f"{api.url} ({getattr(reason, 'strerror', None) or reason}); see "
            f"{Path(record.run_dir) / 'controller.log'}") from None
    except (http.client.HTTPException, ValueError, KeyError, TypeError, AttributeError):
        raise FabricLabError(f"what answers on {api.url} is not the fabric's controller (it "
                             "did not reply as the controller's API does)") from None
    return 0


def describe_hosts(hosts: dict[str, list[str]]) -> str:
    names = list(hosts)
    return f"{names[0]} to {names[-1]}" if len(names) > 1 else ", ".join(names) or "no hosts"


def describe(job: dict[str, Any]) -> str:
    """One job in words: its hosts, and its spines and circuits where it has them."""
    text = ", ".join(job.get("host_names", []))
    if job.get("spines"):
        spines = job["spines"]
        text += f" (via spine{'s' if len(spines) > 1 else ''} {', '.join(map(str, spines))})"
    if job.get("ocs_ports"):
        text += f", {len(job['ocs_ports'])} OCS circuits"
    if job.get("policy"):
        text += f", policy {job['policy']}"
    return text


def job_table(jobs: list[dict[str, Any]]) -> list[str]:
    """The jobs as aligned lines (or one line saying there are none)."""
    if not jobs:
        return ["no jobs placed"]
    rows = [("job", "policy", "hosts", "spines", "circuits")]
    rows += [(j["job_id"], j.get("policy") or "", ",".join(j.get("host_names", [])),
              ",".join(str(s) for s in j.get("spines", [])), str(len(j.get("ocs_ports", []))))
             for j in jobs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
