"""One job of tests/torch/determinism_ddp.py: a few steps of weft_torch.DistributedDataParallel
training from the same initial weights, each rank sleeping a random while before every backward;
rank 0 writes a line "<name> <SHA-256 of the parameters' bytes>" per training to --out:

  det      deterministic=True, rank r training on batch r of each step;
  shards   virtual_shards=V (--shards): every step is V micro-batches whatever the rank count, each
           rank running its V/ranks of them, DDP combining them by the shard tree;
  default  (only with one shard per rank) the same batches in the default mode, on a weft group of
           its own, for the driver to show that it differs.

  check_determinism.py --out FILE --shards V [--steps N]
"""
import argparse
import hashlib
import random
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import weft_torch

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--shards", type=int, required=True)
ap.add_argument("--steps", type=int, default=3)
args = ap.parse_args()
torch.set_num_threads(1)  # the same kernels' order on every rank count (docs/DETERMINISM.md)

dist.init_process_group("weft")
rank, size = dist.get_rank(), dist.get_world_size()
loss_fn = nn.MSELoss()
jitter = random.Random()


def batch(step, who, n=16):
    g = torch.Generator().manual_seed(1000 * step + who)
    x = torch.randn(n, 32, generator=g) * 4
    return x, torch.sin(x[:, :10] * 3)


def train(per, **ddp_args):
    """args.steps steps from the same initial weights; the parameters' SHA-256, equal on every rank."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 10))
    ddp = weft_torch.DistributedDataParallel(model, bucket_cap_mb=0.1, **ddp_args)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    for step in range(args.steps):
        opt.zero_grad()
        for s in range(rank * per, (rank + 1) * per):
            x, y = batch(step, s)
            time.sleep(jitter.random() * 0.004)
            loss_fn(ddp(x), y).backward()
        opt.step()
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    gathered = [None] * size
    dist.all_gather_object(gathered, digest)
    assert len(set(gathered)) == 1, f"the replicas differ: {gathered}"
    return digest


digests = {"det": train(1, deterministic=True), "shards": train(args.shards // size, virtual_shards=args.shards)}
if args.shards == size:  # the same batches in the default mode, on a group not in deterministic mode
    digests["default"] = train(1, process_group=dist.new_group(backend="weft"))
if rank == 0:
    with open(args.out, "w") as f:
        f.write("".join(f"{k} {v}\n" for k, v in digests.items()))
print(f"rank {rank}: OK", flush=True)
dist.destroy_process_group()
