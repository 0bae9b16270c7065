#!/usr/bin/python3
"""End-to-end PyTorch DDP training over Weft, against gloo and against compute alone (issue 21).

Real models, real data movement, real DDP: each rank trains the same model on its own synthetic
batches with SGD, one BLAS thread per rank. In one invocation the same processes run, side by side
(step i of every mode before step i + 1 of any, the order rotating every step) and repeated:

  compute   the model without DDP: forward, backward, optimizer step, no communication
  gloo      DistributedDataParallel over a gloo group
  weft      DistributedDataParallel over a Weft group (frameworks/torch: shared memory on one node)
  weft-ddp  weft_torch.DistributedDataParallel: gradients in windows (weftMemAlloc: node-shared memory), each
            bucket averaged in place across the ranks without copies or a division pass
  weft-avg  DDP over Weft with a Python comm hook averaging inside the all-reduce (ReduceOp.AVG)
            instead of DDP's division of every gradient before it: measured slower than weft
            (10.9 / 12.6% sync share against 6.6 / 6.6%, MLP / ResNet-18), so not the default
  ddp-nocomm DDP over gloo with a comm hook that sends nothing (returns the bucket as it is): what
            DDP itself costs (autograd hooks, buckets, futures) without communication; its
            parameters are not checked (every rank keeps its own gradients)
  weft-ddp-det weft-ddp with deterministic=True (docs/DETERMINISM.md), on a weft group of its own
  weft-fp16 (with --compress) DDP over Weft with the fp16 compression comm hook (changes numerics)
  weft-bf16 DDP over Weft with weft_torch.hooks.wire_hook: buckets on the wire as bfloat16, summed in
            float32 and rounded once (issue 46; changes numerics: training quality is
            benchmarks/e2e/wire_quality.py's)

It prints, per model and mode, the step time (median over the repeats of each repeat's median over
its steps, the spread over steps and over repeats; a step's time is the slowest rank's), the CPU
time a step costs (every thread of a rank's process, the ranks' mean; median over steps), the sync
share (step - compute-only step) / step and the speed-up against gloo, both from pairs of steps
that ran next to each other (median over a repeat's pairs, then over repeats). It checks that one
step's averaged gradients equal gloo's (same initial weights, same batch) within float32 tolerance,
at every rank count, and at 2 ranks that the parameters after the steps of each repeat do too (at
more ranks they are reported: a deep network's parameters drift apart after a few steps whatever
the all-reduce, since each sum order rounds its own way). --trace FILE writes a Chrome trace of one extra traced step per mode after its warm-up
(forward, backward, every bucket's all-reduce from submission to completion, optimizer; DDP's
all-reduce then runs as a comm hook doing the same average) and --svg FILE a picture of it.

Run with the system interpreter (Debian's python3-torch, python3-torchvision):
    PYTHONPATH=build/python /usr/bin/python3 benchmarks/e2e/ddp_e2e.py --models mlp,resnet18 --ranks 2
"""
import argparse
import copy
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ALL_MODES = ("compute", "ddp-nocomm", "gloo", "weft", "weft-ddp", "weft-ddp-det", "weft-avg", "weft-fp16", "weft-bf16")


# ---- models ------------------------------------------------------------------------------------

def mlp():
    widths = [1024, 2048, 4096, 2048, 2048, 1000]  # 25.2 M parameters
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


MODELS = {
    # name: (constructor, input shape without the batch, classes, default batch)
    "mlp": (mlp, (1024,), 1000, 64),
    "resnet18": (lambda: __import__("torchvision").models.resnet18(num_classes=1000), (3, 64, 64), 1000, 16),
}


def build(name):
    ctor, shape, classes, batch = MODELS[name]
    torch.manual_seed(0)  # every rank and every mode starts from the same weights
    return ctor(), shape, classes, batch


def batches(name, rank, batch, count=4):
    _, shape, classes, _ = MODELS[name]
    g = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn((batch,) + shape, generator=g), torch.randint(0, classes, (batch,), generator=g))
            for _ in range(count)]


def flat_params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()


def flat_grads(model):
    return torch.cat([p.grad.detach().reshape(-1) for p in model.parameters()]).clone()


# ---- tracing -----------------------------------------------------------------------------------

class Trace:
    """Chrome trace events of one step (times in us from the step's start, per rank)."""

    def __init__(self, rank):
        self.rank, self.events, self.t0 = rank, [], None

    def now(self):
        return (time.perf_counter() - self.t0) * 1e6

    def span(self, name, tid, begin, end, **args):
        self.events.append(dict(name=name, ph="X", pid=self.rank, tid=tid, ts=begin, dur=max(end - begin, 0.1),
                                args=args))


def timed_allreduce_hook(trace, compress, avg):
    """A DDP comm hook doing what DDP's built-in all-reduce does (average), recording each bucket's
    submission and completion; with compress the bucket travels as float16 (PyTorch's fp16 hook);
    with avg the all-reduce averages (weft_torch.allreduce_hook) instead of a division before it."""

    def hook(group, bucket):
        buf = bucket.buffer()
        world = dist.get_world_size(group)
        t = trace.now() if trace and trace.t0 is not None else 0.0
        index = bucket.index()
        if compress:
            wire = buf.to(torch.float16).div_(world)
        else:
            wire = buf if avg else buf.div_(world)
        op = dist.ReduceOp.AVG if avg and not compress else dist.ReduceOp.SUM
        fut = dist.all_reduce(wire, op=op, group=group, async_op=True).get_future()

        def done(f):
            if trace and trace.t0 is not None:
                trace.span(f"all-reduce bucket {index} ({buf.numel() * buf.element_size() / 2**20:.1f} MiB)", 1, t,
                           trace.now())
            if compress:
                buf.copy_(f.value()[0])
                return buf
            return f.value()[0]

        return fut.then(done)

    return hook


def avg_hook(group, bucket):
    """DDP's average inside the all-reduce (ReduceOp.AVG), no division before it."""
    fut = dist.all_reduce(bucket.buffer(), op=dist.ReduceOp.AVG, group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])  # a Python hook's future must hold the tensor itself


def nocomm_hook(group, bucket):
    """Sends nothing: DDP's own cost without communication."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def run_ranks(worker, args):
    """Spawns args.ranks processes of worker(rank, args, port, queue) meeting at a free local port;
    returns what rank 0 put on the queue."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(args, port, queue), nprocs=args.ranks, join=True)
    return queue.get()


# ---- one rank ----------------------------------------------------------------------------------

class Trainer:
    """One model in one mode on this rank: fresh weights (the same in every mode), its own
    optimizer and its batches; step() runs one training step and returns its time."""

    def __init__(self, name, mode, rank, groups, args, trace=None):
        model, _, _, batch = build(name)
        self.model, self.trace, self.barrier_group = model, trace, groups["gloo"]
        self.data = batches(name, rank, args.batch or batch)
        if mode == "compute":
            self.net = model
        elif mode in ("weft-ddp", "weft-ddp-det"):
            import weft_torch
            det = mode == "weft-ddp-det"
            self.net = weft_torch.DistributedDataParallel(model, process_group=groups["weft-det" if det else "weft"],
                                                          bucket_cap_mb=args.bucket_cap_mb, deterministic=det)
            if trace is not None:  # each bucket's all-reduce from submission to completion
                def launch(b, net=self.net, tr=trace):
                    t = tr.now() if tr.t0 is not None else 0.0
                    b.work = dist.all_reduce(b.flat, op=dist.ReduceOp.AVG, group=net.process_group, async_op=True)
                    mib = b.flat.numel() * b.flat.element_size() / 2**20
                    b.work.get_future().then(lambda f: tr.t0 is not None and tr.span(
                        f"all-reduce bucket ({mib:.1f} MiB)", 1, t, tr.now()))
                self.net._launch = launch
        else:
            group = groups["weft" if mode.startswith("weft") else "gloo"]
            self.net = nn.parallel.DistributedDataParallel(model, process_group=group,
                                                           bucket_cap_mb=args.bucket_cap_mb,
                                                           gradient_as_bucket_view=True)
            if mode == "weft-bf16":
                from weft_torch.hooks import WireState, wire_hook
                self.net.register_comm_hook(WireState(group, torch.bfloat16), wire_hook)
            elif mode == "weft-fp16" or trace is not None:  # traced: the same average, timed
                self.net.register_comm_hook(group, timed_allreduce_hook(trace, mode == "weft-fp16", mode == "weft-avg"))
            elif mode == "weft-avg":
                self.net.register_comm_hook(group, avg_hook)
            elif mode == "ddp-nocomm":
                self.net.register_comm_hook(group, nocomm_hook)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=args.lr, momentum=0.9)
        self.steps = 0

    def step(self, traced=False):
        x, y = self.data[self.steps % len(self.data)]
        self.steps += 1
        dist.barrier(group=self.barrier_group)  # every rank starts the step together
        c0 = time.process_time()  # CPU time of every thread of this process
        t0 = time.perf_counter()
        if traced:
            self.trace.t0 = t0
        out = self.net(x)
        loss = F.cross_entropy(out, y)
        t1 = time.perf_counter()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        t2 = time.perf_counter()
        self.opt.step()
        t3 = time.perf_counter()
        c3 = time.process_time()
        if traced:
            tr = self.trace
            tr.span("forward", 0, 0, (t1 - t0) * 1e6)
            tr.span("backward (DDP waits for its buckets at the end)", 0, (t1 - t0) * 1e6, (t2 - t0) * 1e6)
            tr.span("optimizer", 0, (t2 - t0) * 1e6, (t3 - t0) * 1e6)
            tr.t0 = None
        return t3 - t0, c3 - c0


def worker(rank, args, port, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if args.bind:
        cores = sorted(os.sched_getaffinity(0))
        per = max(1, len(cores) // args.ranks)
        first = (rank * per) % len(cores)
        os.sched_setaffinity(0, cores[first:first + per])  # this thread's; threads made later inherit it
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    groups = {"gloo": dist.group.WORLD}
    if any(m.startswith("weft") for m in args.modes):
        import weft_torch  # noqa: F401  registers the "weft" backend
        groups["weft"] = dist.new_group(backend="weft")
        if "weft-ddp-det" in args.modes:  # deterministic mode is per group: its own
            groups["weft-det"] = dist.new_group(backend="weft")
    results = []  # (model, repeat, mode, [slowest rank's step time], [ranks' mean CPU time per step])
    checks = []
    for name in args.models:
        for rep in range(args.repeats):
            # Every mode's model lives side by side; step i of each runs before step i + 1 of any,
            # the order rotating every step, so that a mode and the compute-only step it is compared
            # with meet the same machine (these VMs' speed drifts by 2x within minutes).
            trainers = {m: Trainer(name, m, rank, groups, args) for m in args.modes}
            times = {m: [] for m in args.modes}
            cpus = {m: [] for m in args.modes}
            for step in range(args.warmup + args.steps):
                k = step % len(args.modes)
                for mode in args.modes[k:] + args.modes[:k]:
                    t, c = trainers[mode].step()
                    if step >= args.warmup:
                        times[mode].append(t)
                        cpus[mode].append(c)
            for mode in args.modes:
                t = torch.tensor(times[mode], dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX, group=groups["gloo"])
                c = torch.tensor(cpus[mode], dtype=torch.float64)
                dist.all_reduce(c, op=dist.ReduceOp.SUM, group=groups["gloo"])
                results.append((name, rep, mode, t.tolist(), (c / args.ranks).tolist()))
            params = {m: flat_params(tr.model) for m, tr in trainers.items()}
            del trainers
            if "gloo" in params:
                for mode in ("weft", "weft-ddp", "weft-avg", "weft-fp16"):
                    if mode in params:
                        d = (params[mode] - params["gloo"]).abs()
                        scale = params["gloo"].abs().max().item()
                        checks.append((name, rep, mode, d.max().item(), scale,
                                       torch.equal(params[mode], params["gloo"])))
    # One step's averaged gradients against gloo's, from the same weights and batches: what the
    # all-reduce alone decides. (After many steps the parameters of a deep network drift apart at
    # more than 2 ranks whatever the all-reduce, as different sum orders round differently: ResNet-18
    # at 4 ranks, 1.5e-8 after one step, x100 a step; PERFORMANCE.md, "End to end".)
    # Taken at the second step, with the first step's weights restored: DDP (torch's and Weft's
    # wrapper) rebuilds its buckets in ready order after the first backward, so these gradients went
    # through the rebuilt layout, every bucket of it. Compared element by element: the largest
    # |difference| relative to that element's own magnitude (the mean over ranks of each rank's
    # |gradient| of it), not to the largest gradient.
    grad_checks = []
    if "gloo" in args.modes:
        for name in args.models:
            grads = {}
            scale = None  # per element: the mean over ranks of |this rank's own gradient|
            for mode in [m for m in args.modes if m in ("gloo", "weft", "weft-ddp", "weft-avg")]:
                tr = Trainer(name, mode, rank, groups, args)
                first = {k: v.detach().clone() for k, v in tr.model.state_dict().items()}
                tr.step()
                with torch.no_grad():
                    tr.model.load_state_dict(first)
                x, y = tr.data[0]
                if scale is None:  # each rank's own gradient, from a plain copy of the same weights
                    local = copy.deepcopy(tr.model)
                    local.zero_grad(set_to_none=False)
                    F.cross_entropy(local(x), y).backward()
                    scale = flat_grads(local).abs()
                    dist.all_reduce(scale, group=groups["gloo"])
                    scale /= args.ranks
                    del local
                tr.opt.zero_grad(set_to_none=False)
                F.cross_entropy(tr.net(x), y).backward()
                grads[mode] = flat_grads(tr.model)
                del tr
            for mode, g in grads.items():
                if mode != "gloo":
                    ref = grads["gloo"]
                    # Relative to the element's own magnitude: the mean |contribution| of the ranks
                    # (a sum that cancels to ~0 is still held to its terms' rounding).
                    rel = ((g - ref).abs() / scale.clamp_min(1e-30)).max()
                    dist.all_reduce(rel, op=dist.ReduceOp.MAX, group=groups["gloo"])
                    same = torch.tensor([1.0 if torch.equal(g, ref) else 0.0])
                    dist.all_reduce(same, op=dist.ReduceOp.MIN, group=groups["gloo"])
                    grad_checks.append((name, mode, rel.item(), ref.abs().max().item(), bool(same.item())))
    traces = []
    if args.trace:
        # The warm-up steps (DDP 1.13 starts with one bucket holding every gradient and rebuilds
        # its buckets in the order gradients became ready), then one traced step per mode.
        for name in args.models:
            for mode in args.modes:
                tr = Trace(rank)
                trainer = Trainer(name, mode, rank, groups, args, trace=tr)
                for _ in range(max(args.warmup, 2)):
                    trainer.step()
                trainer.step(traced=True)
                del trainer
                for e in tr.events:
                    e["pid"] = f"{name} {mode} rank {rank}"
                traces += tr.events
        gathered = [None] * args.ranks
        dist.all_gather_object(gathered, traces, group=groups["gloo"])
        traces = [e for g in gathered for e in g]
    if rank == 0:
        queue.put(dict(results=results, checks=checks, grad_checks=grad_checks, trace=traces))
    dist.barrier(group=groups["gloo"])
    dist.destroy_process_group()


# ---- report ------------------------------------------------------------------------------------

def summarise(results, checks, grad_checks, args):
    """Step times per repeat (median over its steps); the sync share and the speed-up against gloo
    from pairs of steps that ran next to each other (step i of the mode and of the reference), the
    median over a repeat's pairs, then the median (and range) over the repeats."""
    rows = []
    for name in args.models:
        steps = {(rep, m): t for (n, rep, m, t, _) in results if n == name}
        cpu = {(rep, m): c for (n, rep, m, _, c) in results if n == name}

        def paired(mode, ref, f):
            per_rep = []
            for rep in range(args.repeats):
                a, b = steps.get((rep, mode)), steps.get((rep, ref))
                if a and b:
                    per_rep.append(statistics.median(f(x, y) for x, y in zip(a, b)))
            return per_rep

        for mode in args.modes:
            meds = [statistics.median(steps[(rep, mode)]) for rep in range(args.repeats)]
            every = [t for rep in range(args.repeats) for t in steps[(rep, mode)]]
            row = dict(model=name, mode=mode, ranks=args.ranks, steps=args.steps, repeats=args.repeats,
                       step_ms=1e3 * statistics.median(meds), repeat_min_ms=1e3 * min(meds),
                       repeat_max_ms=1e3 * max(meds), step_min_ms=1e3 * min(every), step_max_ms=1e3 * max(every),
                       repeat_medians_ms=[1e3 * m for m in meds],
                       cpu_ms=1e3 * statistics.median(c for rep in range(args.repeats) for c in cpu[(rep, mode)]))
            if mode != "compute" and "compute" in args.modes:
                shares = paired(mode, "compute", lambda t, c: (t - c) / t)
                row.update(sync_share_pct=100 * statistics.median(shares), sync_share_min_pct=100 * min(shares),
                           sync_share_max_pct=100 * max(shares))
            if mode.startswith("weft") and "gloo" in args.modes:
                sp = paired(mode, "gloo", lambda t, g: g / t)
                row.update(speedup_vs_gloo=statistics.median(sp), speedup_vs_gloo_min=min(sp),
                           speedup_vs_gloo_max=max(sp))
            rows.append(row)
    failed = []
    for name, mode, rel, scale, equal in grad_checks:
        if mode not in ("weft", "weft-ddp", "weft-avg"):
            continue
        if args.strict and args.ranks == 2 and not equal:
            failed.append(f"{name}: {mode}'s averaged gradients are not bitwise gloo's at 2 ranks ((a+b)/2 is exact; "
                          f"largest relative difference {rel:.3g})")
        elif rel > args.grad_tolerance:
            failed.append(f"{name}: {mode}'s averaged gradients differ from gloo's by {rel:.3g} of an element "
                          f"(> {args.grad_tolerance:.3g})")
    for name, rep, mode, maxdiff, scale, equal in checks:
        if args.ranks > 2:
            continue  # reported, not checked: see the gradient check above
        if mode in ("weft", "weft-ddp", "weft-avg") and args.strict and not equal:
            failed.append(f"{name} repeat {rep}: {mode}'s parameters are not bitwise gloo's at 2 ranks (by {maxdiff:.3g})")
            continue
        tol = args.tolerance * max(1.0, scale)
        if mode in ("weft", "weft-ddp", "weft-avg") and maxdiff > tol:
            failed.append(f"{name} repeat {rep}: weft's parameters differ from gloo's by {maxdiff:.3g} (> {tol:.3g})")
    return rows, failed


def write_svg(events, path):
    """Draws the traced steps: one band per (model, mode, rank), compute on the upper lane and
    every bucket's all-reduce on the lower one."""
    bands = []
    for e in events:
        if e["pid"] not in bands:
            bands.append(e["pid"])
    span = max((e["ts"] + e["dur"] for e in events), default=1.0)
    W, left, lane, gap = 1100, 230, 16, 14
    H = 40 + len(bands) * (2 * lane + gap) + 30
    colour = {"forward": "#4c78a8", "optimizer": "#72b7b2"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<text x="10" y="18" font-size="13">One DDP training step per mode: compute (upper lane) and each bucket\'s '
           f'all-reduce from submission to completion (lower lane); 0 to {span / 1e3:.0f} ms</text>']
    scale = (W - left - 20) / span
    for i, band in enumerate(bands):
        y = 34 + i * (2 * lane + gap)
        out.append(f'<text x="10" y="{y + lane + 4}">{band}</text>')
        for e in events:
            if e["pid"] != band:
                continue
            x = left + e["ts"] * scale
            w = max(e["dur"] * scale, 0.8)
            yy = y + (lane if e["tid"] == 1 else 0)
            c = colour.get(e["name"], "#f58518" if e["tid"] == 1 else "#9d9d9d")
            out.append(f'<rect x="{x:.1f}" y="{yy}" width="{w:.1f}" height="{lane - 2}" fill="{c}" stroke="white" '
                       f'stroke-width="0.5"><title>{e["name"]}: {e["ts"] / 1e3:.1f} + {e["dur"] / 1e3:.1f} ms</title></rect>')
    y = H - 14
    for k, (label, c) in enumerate([("forward", "#4c78a8"), ("backward", "#9d9d9d"), ("optimizer", "#72b7b2"),
                                    ("bucket all-reduce", "#f58518")]):
        out.append(f'<rect x="{left + k * 150}" y="{y - 10}" width="12" height="12" fill="{c}"/>'
                   f'<text x="{left + k * 150 + 16}" y="{y}">{label}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mlp,resnet18", help="comma list of: " + ", ".join(MODELS))
    ap.add_argument("--modes", default="compute,gloo,weft,weft-ddp", help="comma list of: " + ", ".join(ALL_MODES))
    ap.add_argument("--compress", action="store_true", help="also run weft-fp16 (fp16 comm hook; reported apart)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per mode and repeat")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps before them")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=0, help="per-rank batch (0 = the model's default: mlp 64, resnet18 16)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--bucket-cap-mb", type=float, default=25)
    ap.add_argument("--bind", action="store_true",
                    help="bind each rank (all its threads: compute, gloo's, Weft's) to its own share of the cores")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="weft vs gloo: max |difference| of any parameter, relative to max(1, max |parameter|)")
    ap.add_argument("--strict", action="store_true",
                    help="at 2 ranks, require the gradients and parameters to equal gloo's bit for bit (fail otherwise)")
    ap.add_argument("--grad-tolerance", type=float, default=1e-5,
                    help="weft vs gloo, the averaged gradients of a step through the rebuilt buckets: the largest "
                         "|difference| relative to each element's own magnitude (the ranks' mean |gradient| of it; checked at every rank count; the "
                         "parameters after the run only at 2 ranks, where they must match within --tolerance)")
    ap.add_argument("--trace", metavar="FILE", help="Chrome trace of one traced step per model and mode")
    ap.add_argument("--svg", metavar="FILE", help="with --trace: a picture of it")
    ap.add_argument("--json", metavar="FILE", help="the rows as JSON ('-' = stdout instead of the table)")
    args = ap.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    args.modes = [m for m in args.modes.split(",") if m]
    if args.compress and "weft-fp16" not in args.modes:
        args.modes.append("weft-fp16")
    for m in args.models:
        if m not in MODELS:
            ap.error(f"unknown model {m!r}; choose from {', '.join(MODELS)}")
    for m in args.modes:
        if m not in ALL_MODES:
            ap.error(f"unknown mode {m!r}; choose from {', '.join(ALL_MODES)}")
    if args.ranks < 1 or args.steps < 1 or args.repeats < 1 or args.warmup < 0:
        ap.error("--ranks, --steps and --repeats must be >= 1, --warmup >= 0")
    if args.svg and not args.trace:
        ap.error("--svg draws the trace: give --trace FILE too")
    if "resnet18" in args.models:
        try:
            import torchvision  # noqa: F401
        except ImportError:
            sys.exit("ddp_e2e: resnet18 needs torchvision (Debian: python3-torchvision; scripts/setup installs it)")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    r = run_ranks(worker, args)
    rows, failed = summarise(r["results"], r["checks"], r["grad_checks"], args)
    if args.trace:
        with open(args.trace, "w") as f:
            json.dump(dict(traceEvents=r["trace"], displayTimeUnit="ms"), f)
        if args.svg:
            write_svg(r["trace"], args.svg)
    if args.json:
        doc = dict(torch=torch.__version__, ranks=args.ranks, rows=rows,
                   checks=[dict(model=n, repeat=rep, mode=m, max_abs_diff=d, max_abs_param=s, bitwise_equal=e)
                           for n, rep, m, d, s, e in r["checks"]],
                   grad_checks=[dict(model=n, mode=m, max_rel_diff=d, max_abs_grad=s, bitwise_equal=e)
                                for n, m, d, s, e in r["grad_checks"]], failed=failed)
        if args.json == "-":
            print(json.dumps(doc, indent=1))
        else:
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1)
    if args.json != "-":
        print(f"# PyTorch {torch.__version__} DDP, {args.ranks} ranks x {args.threads} thread(s), bucket cap "
              f"{args.bucket_cap_mb} MB, {args.steps} steps after {args.warmup} warm-up, {args.repeats} repeats "
              f"(modes interleaved step by step){' bound to cores' if args.bind else ''}; step = slowest rank; ms")
        print(f"{'model':9s} {'mode':10s} {'step':>8s} {'repeats':>15s} {'steps':>15s} {'sync share':>16s} {'vs gloo':>17s} {'cpu/step':>9s}")
        for row in rows:
            share = (f"{row['sync_share_pct']:5.1f}% ({row['sync_share_min_pct']:.0f}-{row['sync_share_max_pct']:.0f})"
                     if "sync_share_pct" in row else "")
            vs = f"{row['speedup_vs_gloo']:.2f}x ({row['speedup_vs_gloo_min']:.2f}-{row['speedup_vs_gloo_max']:.2f})" if "speedup_vs_gloo" in row else ""
            print(f"{row['model']:9s} {row['mode']:10s} {row['step_ms']:8.1f} "
                  f"{row['repeat_min_ms']:7.1f}-{row['repeat_max_ms']:<7.1f} {row['step_min_ms']:7.1f}-{row['step_max_ms']:<7.1f} "
                  f"{share:>16s} {vs:>17s} {row['cpu_ms']:9.1f}")
        for n, m, d, s, e in r["grad_checks"]:
            print(f"# averaged gradients of {n} (rebuilt buckets): {m} vs gloo, largest |diff| relative to the element "
                  f"{d:.3g} (max |gradient| {s:.3g}){'; bitwise equal on every rank' if e else ''}")
        for n, rep, m, d, s, e in r["checks"]:
            print(f"# parameters after repeat {rep} of {n}: {m} vs gloo max |diff| {d:.3g} "
                  f"(max |param| {s:.3g}){' bitwise equal' if e else ''}")
    for f in failed:
        print("ddp_e2e: FAILED: " + f, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
