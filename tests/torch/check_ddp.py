"""DDP training with the weft backend against the same training with gloo, in one job: a small
MLP on generated data (fixed seeds, different data on every rank), N steps of SGD with momentum,
once over a weft group, once with weft_torch.DistributedDataParallel (gradients in node-shared
memory, all-reduced without copies) and once over a gloo group. Checks that the replicas agree
exactly within each and that weft's parameters match gloo's to floating-point tolerance; then
weft_torch.DistributedDataParallel's no_sync(), zero_grad(set_to_none=True), unused parameters
(an error naming them, or find_unused_parameters=True) and a group of another backend.

  check_ddp.py [--steps N]                   the check (prints "rank R: OK")
  check_ddp.py --bench [--width W] [--steps N] [--batch B]   time per step, weft and gloo
"""
import argparse
import json
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import weft_torch  # noqa: F401

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--bench", action="store_true")
ap.add_argument("--width", type=int, default=64)
ap.add_argument("--depth", type=int, default=3)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--warmup", type=int, default=3)
args = ap.parse_args()
torch.set_num_threads(1)  # two cores shared by every rank


def make_model(seed):
    torch.manual_seed(seed)
    layers, width_in = [], 32
    for _ in range(args.depth):
        layers += [nn.Linear(width_in, args.width), nn.ReLU()]
        width_in = args.width
    layers.append(nn.Linear(width_in, 10))
    return nn.Sequential(*layers)


def batches(rank, steps):
    g = torch.Generator().manual_seed(100 + rank)
    w = torch.randn(32, 10, generator=torch.Generator().manual_seed(7))
    for _ in range(steps):
        x = torch.randn(args.batch, 32, generator=g)
        yield x, (x @ w).argmax(1)


step_times = []  # weft_torch.step_end() after each weft step: (step seconds, exposed sync seconds)


def train(group, steps, timed=False, wrap=DDP, accumulate=False):
    # Different initial weights on every rank: DDP's broadcast from rank 0 must make them equal.
    model = wrap(make_model(seed=rank), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    t0 = None
    for step, (x, y) in enumerate(batches(rank, steps)):
        if timed and step == args.warmup:
            dist.barrier(group=group)
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=step % 2 == 1)  # both: .grad zeroed in place, and dropped
        if accumulate:  # half the batch without communication, then the other half with it
            with model.no_sync():
                loss_fn(model(x[: len(x) // 2]), y[: len(y) // 2]).backward()
            loss_fn(model(x[len(x) // 2:]), y[len(y) // 2:]).backward()
        else:
            loss_fn(model(x), y).backward()
        opt.step()
        if group is weft and not timed and wrap is DDP and not accumulate:
            step_times.append(weft_torch.step_end())
    per_step = (time.perf_counter() - t0) / (steps - args.warmup) if timed else None
    return torch.cat([p.detach().flatten() for p in model.parameters()]), per_step


dist.init_process_group("weft")
rank, size = dist.get_rank(), dist.get_world_size()
weft = dist.group.WORLD
gloo = dist.new_group(backend="gloo")

if args.bench:
    nparams = sum(p.numel() for p in make_model(0).parameters())
    res = {}
    for name, group in (("gloo", gloo), ("weft", weft), ("gloo", gloo), ("weft", weft)):
        _, t = train(group, args.steps + args.warmup, timed=True)
        res.setdefault(name, []).append(t)
    # The gradient exchange alone: all_reduce of every parameter at once (one float32 bucket).
    flat = torch.ones(nparams)
    ar = {}
    for name, group in (("gloo", gloo), ("weft", weft)) * 2:
        dist.all_reduce(flat, group=group)
        dist.barrier(group=group)
        t0 = time.perf_counter()
        for _ in range(10):
            dist.all_reduce(flat, group=group)
        ar.setdefault(name, []).append((time.perf_counter() - t0) / 10)
    if rank == 0:
        line = ", ".join(f"{k} {min(v) * 1e3:.2f} ms/step" for k, v in res.items())
        line += "; all_reduce of the gradients alone: " + ", ".join(f"{k} {min(v) * 1e3:.2f} ms" for k, v in ar.items())
        print(f"DDP {size} ranks, MLP {args.depth}x{args.width} ({nparams} parameters, {nparams * 4 / 1e6:.2f} MB of "
              f"gradients), batch {args.batch}: {line} (best of 2 runs of {args.steps} steps)", flush=True)
    dist.destroy_process_group()
    sys.exit(0)

pw, _ = train(weft, args.steps)
pg, _ = train(gloo, args.steps)
ps, _ = train(weft, args.steps, wrap=weft_torch.DistributedDataParallel)
pa, _ = train(weft, 4, wrap=weft_torch.DistributedDataParallel, accumulate=True)
pga, _ = train(gloo, 4, accumulate=True)
failures = []
# Replicas must agree bit for bit within a backend (every rank applies the same averaged gradient).
for name, p in (("weft", pw), ("gloo", pg), ("weft_torch.DistributedDataParallel", ps)):
    ref = p.clone()
    dist.broadcast(ref, 0, group=gloo)
    if not torch.equal(ref, p):
        failures.append(f"{name} replicas differ from rank 0's by {(ref - p).abs().max().item():.3g}")
diff = (pw - pg).abs().max().item()
# Step metrics (docs/OBSERVABILITY.md): the first call starts the count; every later step's exposed
# sync time lies within the step, and some is > 0 (the last bucket's all-reduce runs after backward).
if len(step_times) != args.steps or step_times[0] != (0.0, 0.0):
    failures.append(f"step_end returned {step_times[:3]}... for {args.steps} steps")
elif not all(0 <= e <= s for s, e in step_times[1:]) or not any(e > 0 for _, e in step_times[1:]):
    failures.append(f"step_end: exposed sync outside the step or never > 0: {step_times}")
# The flight recorder of the "torch" group: DDP's all-reduces, all done.
path = weft_torch.dump()
with open(path) as f:
    ops = [c for c in json.load(f)["communicators"] if c["name"] == "torch"][0]["ops"]
if not ops or any(o["state"] != "done" for o in ops) or not any(o["collective"] == "allreduce" for o in ops):
    failures.append(f"weft_torch.dump() at {path}: unexpected operations {ops[-3:]}")
if not torch.allclose(pw, pg, rtol=1e-4, atol=1e-5):
    failures.append(f"weft and gloo parameters differ by up to {diff:.3g}")
for name, a, b in (("weft_torch.DistributedDataParallel", ps, pg), ("no_sync() accumulation", pa, pga)):
    if not torch.allclose(a, b, rtol=1e-4, atol=1e-5):
        failures.append(f"{name}: parameters differ from gloo DDP's by up to {(a - b).abs().max().item():.3g}")
# Its buckets took the shared path (no copies): the recorder names the algorithm of each operation.
if not any(o.get("algorithm") == "window" for o in ops):
    failures.append("weft_torch.DistributedDataParallel: no all-reduce took the shared path")



class Shuffled(nn.Module):
    """Parameters declared in another order than the one backward produces their gradients in."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.c, self.a, self.b = nn.Linear(512, 10), nn.Linear(32, 512), nn.Linear(512, 512)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def train_shuffled(group, wrap):
    model = wrap(Shuffled(seed=rank), process_group=group, bucket_cap_mb=0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    orders = []
    for x, y in batches(rank, 4):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        orders.append(getattr(model, "bucket_order", None))
    return torch.cat([p.detach().flatten() for p in model.parameters()]), orders


# Buckets rebuilt in the order gradients became ready (as torch's DDP does after its first step):
# declared c, a, b, so the first buckets hold b (reverse declaration order); backward produces c's
# gradients first, then b's, then a's.
pr, orders = train_shuffled(weft, weft_torch.DistributedDataParallel)
prg, _ = train_shuffled(gloo, DDP)
first = [set(b) for b in orders[0]]
rebuilt = [set(b) for b in orders[1]]
if not ({"b.weight", "b.bias"} <= first[0] and {"c.weight", "c.bias"} <= rebuilt[0]
        and rebuilt[-1] == {"a.weight", "a.bias"} and orders[1] == orders[3]):
    failures.append(f"buckets not rebuilt in the order gradients became ready: {orders[0]} then {orders[1]}, {orders[3]}")
if not torch.allclose(pr, prg, rtol=1e-4, atol=1e-5):
    failures.append(f"rebuilt buckets: parameters differ from gloo DDP's by up to {(pr - prg).abs().max().item():.3g}")
ref = pr.clone()
dist.broadcast(ref, 0, group=gloo)
if not torch.equal(ref, pr):
    failures.append(f"rebuilt buckets: replicas differ from rank 0's by {(ref - pr).abs().max().item():.3g}")


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.used, self.spare = nn.Linear(8, 4), nn.Linear(8, 4)

    def forward(self, x):
        return self.used(x)


m = weft_torch.DistributedDataParallel(Unused(), process_group=weft)
try:
    m(torch.ones(2, 8)).sum().backward()
    failures.append("a parameter without a gradient was not reported")
except RuntimeError as e:
    if "spare.weight" not in str(e) or "find_unused_parameters" not in str(e):
        failures.append(f"unused parameters: unclear error: {e}")
m = weft_torch.DistributedDataParallel(Unused(), process_group=weft, find_unused_parameters=True)
m(torch.full((2, 8), float(rank))).sum().backward()
want = torch.full((4, 8), sum(range(size)) * 2 / size)  # d(sum)/d(weight) = the batch's column sums, averaged
if not torch.allclose(m.module.used.weight.grad, want) or m.module.spare.weight.grad.abs().max() != 0:
    failures.append(f"find_unused_parameters=True: gradients {m.module.used.weight.grad[0]} (expected {want[0]})")
# torch's keyword arguments are accepted (the same call works for both classes).
weft_torch.DistributedDataParallel(Unused(), device_ids=None, process_group=weft, bucket_cap_mb=1,
                                   gradient_as_bucket_view=True, static_graph=False, find_unused_parameters=True)
try:
    weft_torch.DistributedDataParallel(Unused(), process_group=gloo)
    failures.append("a gloo group was accepted")
except ValueError as e:
    if "weft backend" not in str(e):
        failures.append(f"a gloo group: unclear error: {e}")
# Leave without destroy_process_group and with an operation in flight whose Future has a Python
# callback: weft_torch's exit handler must let it complete before Python's finalization (which
# would otherwise kill the completion thread inside the callback: "terminate called").
late = dist.all_reduce(torch.ones(100000), async_op=True)
late.get_future().then(lambda f: f.value())
if failures:
    print(f"rank {rank}: FAILED: {failures}", flush=True)
    sys.exit(1)
print(f"rank {rank}: OK ({pw.numel()} parameters after {args.steps} steps, max |weft - gloo| = {diff:.3g})", flush=True)
