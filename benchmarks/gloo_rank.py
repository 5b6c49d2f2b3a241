"""A Gloo rank for gloo_peer.py; BENCHMARKS.md "Ring All-Reduce against Gloo, on the same fabric".

One rank of a Gloo All-Reduce (``torch.distributed``, CPU build), run inside a fabric host
by ``benchmarks/gloo_peer.py``: the peer a user would pick instead of fabriclab.

It times every iteration the way fabriclab's workers do (a barrier, then the All-Reduce of a
float32 tensor in place), checks the sum, and prints one JSON line: this rank's seconds per
measured iteration and whether every result was right.

    python benchmarks/gloo_rank.py --rank R --world N --master IP:PORT --ifname INTF
        --size-bytes B [--iters 3] [--warmup 1]
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="IP:PORT of rank 0's rendezvous")
    ap.add_argument("--ifname", required=True, help="the host's fabric interface")
    ap.add_argument("--size-bytes", type=int, required=True)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--timeout-s", type=float, default=300.0)
    args = ap.parse_args()
    os.environ["GLOO_SOCKET_IFNAME"] = args.ifname  # Gloo's pairs use the fabric, not lo
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # fabriclab's workers reduce on one thread as well
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}", rank=args.rank,
                            world_size=args.world,
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    count = args.size_bytes // 4
    tensor = torch.empty(count, dtype=torch.float32)
    want = args.world * (args.world + 1) / 2
    seconds, correct = [], True
    for it in range(args.warmup + args.iters):
        tensor.fill_(args.rank + 1)
        dist.barrier()
        start = time.monotonic()
        dist.all_reduce(tensor)
        took = time.monotonic() - start
        correct &= bool(torch.all(tensor == want))
        if it >= args.warmup:
            seconds.append(took)
    dist.destroy_process_group()
    print(json.dumps({"rank": args.rank, "seconds": seconds, "correct": correct}), flush=True)


if __name__ == "__main__":
    main()
