"""A small PyTorch DDP training job (Gloo, CPU) for a ``command`` job on the fabric.

A multilayer perceptron on synthetic data: every rank draws its own batches, DDP All-Reduces
the gradients over Gloo on the fabric interface the runner names (``GLOO_SOCKET_IFNAME``),
and every iteration is printed as one iteration-log line (:mod:`workloads.iteration_log`)
with the bytes of gradient it All-Reduced. At the end the ranks check that their parameters
are identical (what DDP promises); a rank that finds otherwise exits with code 3.

    python -m workloads.examples.torch_ddp [--steps 10] [--hidden 512] [--batch 32]

Reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the environment (``env://``). Needs
the CPU build of torch: the ``fabriclab/worker-torch`` image (`fabriclab images --torch`),
or ``pip install -e '.[peers]'`` for namespace hosts.
"""

from __future__ import annotations

import argparse
import time

from workloads.examples import exit_now, finish, parse_and_init, print_iteration


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2, help="first steps marked warm-up")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    args, torch = parse_and_init(ap)
    if torch is None:
        return 2
    import torch.nn.functional as F
    from torch import nn

    dist = torch.distributed
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts it anyway)
    layers: list[nn.Module] = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.hidden, args.hidden), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(args.hidden, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches
    for step in range(args.steps):
        x = torch.randn(args.batch, args.hidden, generator=data)
        y = torch.randint(0, 10, (args.batch,), generator=data)
        start = time.monotonic()
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()  # DDP All-Reduces the gradients here
        opt.step()
        took = time.monotonic() - start
        print_iteration(step, took, step < args.warmup, grad_bytes)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    spread = flat.clone()
    dist.all_reduce(spread, op=dist.ReduceOp.MAX)
    dist.all_reduce(flat, op=dist.ReduceOp.MIN)
    return finish(dist, torch.equal(spread, flat),
                  f"rank {rank}: parameters differ between ranks after training")


if __name__ == "__main__":
    exit_now(main())
