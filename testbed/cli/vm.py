"""``fabriclab vm``: the stock-kernel Debian 12 VM (root).

``vm build`` makes (or finds) the cached image, ``vm run -- CMD`` runs a command in a
throwaway copy with this checkout copied in and brings back what it wrote, ``vm check`` is
``make vm-check``, ``vm box`` builds the local Vagrant box (:mod:`testbed.vm`).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from testbed.core.errors import FabricLabError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("vm")
    vm = p.add_subparsers(dest="vm_command", required=True, metavar="{build,run,check,box}")
    b = vm.add_parser("build", help="build the VM image if it is not cached")
    b.add_argument("--rebuild", action="store_true", help="build it even if it is cached")
    r = vm.add_parser("run", help="run a command in a throwaway VM, as root, in a copy of "
                      "this checkout (scripts/install.sh finds the lock's wheels); what it "
                      "writes to $FABRICLAB_VM_OUT comes back to --out")
    r.add_argument("--out", type=Path, required=True,
                   help="a new directory for what the command wrote, its log and the console")
    _machine_args(r)
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    c = vm.add_parser("check", help="the fresh-machine check in the VM: install, smoke "
                      "tests, the demo's routing experiment; writes vm-check.json")
    c.add_argument("--out", type=Path, default=None,
                   help="a new directory for vm-check.json and the guest's logs "
                   "(default results/<timestamp>-vm-check)")
    _machine_args(c)
    x = vm.add_parser("box", help="build the local Vagrant box (libvirt) from the image and "
                      "`vagrant box add` it")
    x.add_argument("--name", default="fabriclab/bookworm", help="the box's name")
    p.set_defaults(func=run)


def _machine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpus", type=int, default=2, help="vCPUs")
    p.add_argument("--memory-mib", type=int, default=4096, help="memory in MiB")
    p.add_argument("--timeout-min", type=float, default=90, help="stop the VM after this long")


def run(args: argparse.Namespace) -> int:
    from testbed.emulator.preflight import require_root

    require_root("build and boot the VM")
    if getattr(args, "cpus", 1) < 1 or getattr(args, "memory_mib", 1024) < 1024:
        raise FabricLabError("--cpus must be at least 1 and --memory-mib at least 1024")
    if args.vm_command == "build":
        from testbed.vm import image

        built = image.ensure(rebuild=args.rebuild)
        print(f"image: {built.path} (kernel {built.info['kernel']})")
        return 0
    if args.vm_command == "run":
        return _run_command(args)
    if args.vm_command == "check":
        return _check(args)
    from testbed.vm import box

    print(f"box: {box.build_and_add(args.name)}")
    return 0


def _run_command(args: argparse.Namespace) -> int:
    from testbed.vm import image
    from testbed.vm.check import guest_script, wheelhouse
    from testbed.vm.machine import run_job

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise FabricLabError("give the command to run after --, e.g. "
                             "`fabriclab vm run --out DIR -- uname -r`")
    script = guest_script(
        'copy_checkout && cd "$SRC" && export FABRICLAB_VM_OUT=/mnt/job/out\n'
        # scripts/install.sh takes the lock's wheels from the host (hashes checked)
        "export PIP_NO_INDEX=1 PIP_FIND_LINKS=/mnt/wheels\n" + shlex.join(cmd) + "\n")
    built = image.ensure()
    shares = {"src": image.CHECKOUT, "wheels": wheelhouse(print)}
    result = run_job(built, script, args.out, shares,
                     cpus=args.cpus, memory_mib=args.memory_mib,
                     timeout_s=args.timeout_min * 60)
    print(f"vm: exit code {result.exit_code} after {result.wall_s:.0f} s "
          f"({result.accel}); output in {args.out} (job.log, console.log)")
    return 1 if result.exit_code != 0 else 0


def _check(args: argparse.Namespace) -> int:
    from testbed.core.rundir import new_run_dir
    from testbed.vm.check import run_check

    out = args.out or new_run_dir(Path("results"), "vm-check")
    record = run_check(out, cpus=args.cpus, memory_mib=args.memory_mib,
                       timeout_s=args.timeout_min * 60)
    smoke = record["smoke"]
    print(json.dumps({k: record[k] for k in ("kernel", "host_kernel", "accel", "netem",
                                             "datapath", "seconds")}, indent=1))
    print(f"smoke: {smoke['passed']} passed, {len(smoke['failed'])} failed, "
          f"{smoke['skipped']} skipped" + (f" ({', '.join(smoke['failed'])})"
                                           if smoke["failed"] else ""))
    print(f"routing: {record['routing']['headline'] or 'no headline'}")
    print(f"vm-check: {'passed' if record['passed'] else 'FAILED'}: {out / 'vm-check.json'}")
    return 0 if record["passed"] else 1
