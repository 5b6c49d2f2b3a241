"""Gloo's All-Reduce (torch.distributed, CPU build) as a ``command`` job: the peer fabriclab's
own workers are measured against, by the same runner on the same fabric.

Each iteration fills a float32 tensor of ``--size-bytes`` with rank + 1, waits at a barrier,
then times ``all_reduce`` in place, as fabriclab's workers time theirs; it prints one
iteration-log line (:mod:`workloads.iteration_log`) with the bytes reduced, so the report
computes nccl-tests bandwidths for it. A wrong sum ends the program with code 3.

    python -m workloads.examples.gloo_allreduce --size-bytes 8388608 [--iters 5] [--warmup 1]

Reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and GLOO_SOCKET_IFNAME from the environment.
"""

from __future__ import annotations

import argparse
import time

from workloads.examples import exit_now, finish, parse_and_init, print_iteration


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-bytes", type=int, required=True)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    args, torch = parse_and_init(ap)
    if torch is None:
        return 2
    dist = torch.distributed
    rank, world = dist.get_rank(), dist.get_world_size()
    tensor = torch.empty(args.size_bytes // 4, dtype=torch.float32)
    want = world * (world + 1) / 2
    ok = True
    for it in range(args.warmup + args.iters):
        tensor.fill_(rank + 1)
        dist.barrier()
        start = time.monotonic()
        dist.all_reduce(tensor)
        took = time.monotonic() - start
        ok = ok and bool(torch.all(tensor == want))
        print_iteration(it, took, it < args.warmup, args.size_bytes)
    return finish(dist, ok, f"rank {rank}: the All-Reduce gave a wrong sum")


if __name__ == "__main__":
    exit_now(main())
