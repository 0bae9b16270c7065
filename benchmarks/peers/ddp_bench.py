#!/usr/bin/python3
"""PyTorch DDP on the same synthetic training step as weft-train-bench (docs/PERFORMANCE.md,
"Overlap"): one flat parameter per line of a model file (benchmarks/models/), a backward that
sleeps for each layer's FLOPs at --accel-tflops (a custom autograd Function, so the CPU is free
as under a GPU), gloo (TCP) or weft (the torch backend of frameworks/torch: Weft's transport, shared
memory on one node), N ranks with torch.multiprocessing. Prints our measurements (step,
backward, tail = backward end -> backward() returns, i.e. the exposed communication) and DDP's
own logged averages (avg_backward_compute_time / comm / overlap, if available).

Run with the system interpreter (Debian's python3-torch):
    /usr/bin/python3 benchmarks/peers/ddp_bench.py --model resnet50 --accel-tflops 10 --ranks 2
    PYTHONPATH=build/python /usr/bin/python3 benchmarks/peers/ddp_bench.py --backend weft ...

Compare `tail_ms` with weft-train-bench's `tail_ms` (both run from the end of the backward's
last layer to the moment the gradients are all reduced, the reducer's own work included), and
DDP over weft with DDP over gloo for the transport's share.
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


def load_model(name):
    path = name if os.path.isfile(name) else os.path.join(HERE, "..", "models", name + ".txt")
    layers = []
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                n, p, g = line.split()
                layers.append((n, int(p), float(g)))
    return os.path.splitext(os.path.basename(path))[0], layers


class Clock:
    """The simulated device: the backward of layer i finishes at t0 + sum of modelled times."""
    t0 = None
    modelled = 0.0
    bw_end = None


class SimLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, w, seconds, grad_buf, first):
        ctx.seconds, ctx.grad_buf, ctx.first = seconds, grad_buf, first
        return h.clone()

    @staticmethod
    def backward(ctx, g):
        if Clock.t0 is None:
            Clock.t0 = time.perf_counter()
        Clock.modelled += ctx.seconds
        delay = Clock.t0 + Clock.modelled - time.perf_counter()
        if delay > 1e-4:
            time.sleep(delay)
        if ctx.first:
            Clock.bw_end = time.perf_counter()
        return g, ctx.grad_buf, None, None, None


class SimModel(nn.Module):
    def __init__(self, layers, tflops):
        super().__init__()
        self.layers = layers
        self.params = nn.ParameterList()
        self.index = []  # layer -> parameter index or -1
        for _, p, _ in layers:
            if p > 0:
                self.index.append(len(self.params))
                self.params.append(nn.Parameter(torch.zeros(p)))
            else:
                self.index.append(-1)
        self.seconds = [g / (tflops * 1e3) for _, _, g in layers]
        self.grads = [torch.full((p,), 1e-3) if p > 0 else None for _, p, _ in layers]
        self.dummy = torch.zeros(1, requires_grad=True)

    def forward(self, x):
        h = x
        for i in range(len(self.layers)):
            w = self.params[self.index[i]] if self.index[i] >= 0 else self.dummy
            g = self.grads[i] if self.index[i] >= 0 else torch.zeros(1)
            h = SimLayer.apply(h, w, self.seconds[i], g, i == 0)
        return h.sum()


def worker(rank, args, port, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    if args.backend == "weft":
        import weft_torch  # noqa: F401  registers the "weft" backend
    dist.init_process_group(args.backend, rank=rank, world_size=args.ranks)
    name, layers = load_model(args.model)
    model = SimModel(layers, args.accel_tflops)
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb,
                                              gradient_as_bucket_view=True)
    if hasattr(ddp, "_set_ddp_runtime_logging_sample_rate"):
        ddp._set_ddp_runtime_logging_sample_rate(1)
    x = torch.zeros(1, requires_grad=True)
    rows = []
    for step in range(args.warmup + args.steps):
        Clock.t0, Clock.modelled, Clock.bw_end = None, 0.0, None
        dist.barrier()
        t_begin = time.perf_counter()
        loss = ddp(x)
        loss.backward()
        t_end = time.perf_counter()
        if step >= args.warmup:
            rows.append((t_end - t_begin, Clock.bw_end - Clock.t0, t_end - Clock.bw_end))
    logged = {}
    if hasattr(ddp, "_get_ddp_logging_data"):
        d = ddp._get_ddp_logging_data()
        for k in ("avg_backward_compute_time", "avg_backward_comm_time", "avg_backward_compute_comm_overlap_time",
                  "avg_forward_compute_time"):
            if k in d:
                logged[k.replace("avg_", "ddp_") + "_ms"] = d[k] / 1e6  # logged in ns
    if rank == 0:
        n = len(rows)
        step_ms, bw_ms, tail_ms = (1e3 * sum(r[i] for r in rows) / n for i in range(3))
        queue.put(dict(peer="pytorch-ddp", torch=torch.__version__, backend=args.backend, model=name, ranks=args.ranks,
                       compute="sim", accel_tflops=args.accel_tflops, bucket_cap_mb=args.bucket_cap_mb,
                       steps=args.steps, step_ms=step_ms, backward_ms=bw_ms, tail_ms=tail_ms,
                       sync_overhead_pct=100 * tail_ms / step_ms, **logged))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--bucket-cap-mb", type=float, default=25)
    ap.add_argument("--accel-tflops", type=float, default=100)
    ap.add_argument("--backend", choices=["gloo", "weft"], default="gloo")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(worker, args=(args, port, queue), nprocs=args.ranks, join=True)
    r = queue.get()
    if args.json:
        print(json.dumps(r))
    else:
        print(f"# PyTorch {r['torch']} DDP ({r['backend']}), {r['model']}, {r['ranks']} ranks, compute sim {r['accel_tflops']} TFLOPS, "
              f"bucket cap {r['bucket_cap_mb']} MB, {r['steps']} steps")
        for k, v in r.items():
            if k.endswith("_ms") or k.endswith("_pct"):
                print(f"{k:45s} {v:10.2f}")


if __name__ == "__main__":
    sys.exit(main())
