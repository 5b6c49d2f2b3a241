"""``fabriclab images``: build the container images container hosts run (root).

Idempotent: each layer (base, runtime, worker) is built only when its tag is missing
(:mod:`testbed.emulator.images`). The Docker engine is started if it is not running, and
stopped again afterwards only if this command started it.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("images")
    p.add_argument("--torch", action="store_true",
                   help="also build fabriclab/worker-torch (the CPU build of torch, for "
                        "experiments/torch-ddp.yaml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from testbed.emulator import docker_engine, images
    from testbed.emulator.cleanup import STATE_DIR
    from testbed.emulator.preflight import require_root

    require_root("build container images")
    started = docker_engine.start(STATE_DIR / "dockerd.log")
    try:
        tags = images.build(docker_engine.client(timeout_s=600), torch=args.torch)
    finally:
        docker_engine.stop(started)
    print("ready: " + ", ".join(tags))
    return 0
