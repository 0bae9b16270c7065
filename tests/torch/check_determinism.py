"""One job of tests/torch/determinism_ddp.py: a few steps of weft_torch.DistributedDataParallel
training in deterministic mode, each rank sleeping a random while before its backward, then rank 0
writes the parameters' bytes (hex of their SHA-256) to --out.

  check_determinism.py --out FILE [--shards V] [--steps N] [--default]

--shards V: every step is V micro-batches (the same V whatever the rank count); each rank runs its
V/ranks of them and DDP combines them by the shard tree (virtual_shards=V). Without it, rank r
trains on its own batch (deterministic=True). --default: torch's DDP ready-order rebuild and the
default all-reduce (deterministic=False), for comparison.
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
ap.add_argument("--shards", type=int, default=0)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--default", action="store_true")
args = ap.parse_args()
torch.set_num_threads(1)  # the same kernels' order on every rank count (docs/DETERMINISM.md)

dist.init_process_group("weft")
rank, size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 10))
if args.shards:
    ddp = weft_torch.DistributedDataParallel(model, virtual_shards=args.shards, bucket_cap_mb=0.1)
else:
    ddp = weft_torch.DistributedDataParallel(model, deterministic=not args.default, bucket_cap_mb=0.1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
loss_fn = nn.MSELoss()
jitter = random.Random()


def batch(step, who, n=16):
    g = torch.Generator().manual_seed(1000 * step + who)
    x = torch.randn(n, 32, generator=g) * 4
    return x, torch.sin(x[:, :10] * 3)


for step in range(args.steps):
    opt.zero_grad()
    if args.shards:
        per = args.shards // size
        for s in range(rank * per, (rank + 1) * per):
            x, y = batch(step, s)
            time.sleep(jitter.random() * 0.004)
            loss_fn(ddp(x), y).backward()
    else:
        x, y = batch(step, rank)
        time.sleep(jitter.random() * 0.004)
        loss_fn(ddp(x), y).backward()
    opt.step()

digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
gathered = [None] * size
dist.all_gather_object(gathered, digest)
assert len(set(gathered)) == 1, f"the replicas differ: {gathered}"
if rank == 0:
    with open(args.out, "w") as f:
        f.write(digest)
print(f"rank {rank}: OK {digest[:16]}", flush=True)
dist.destroy_process_group()
