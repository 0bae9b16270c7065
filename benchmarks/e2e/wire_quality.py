#!/usr/bin/python3
"""Training quality with gradients on the wire at 16 bits (issue 46): the same model trained from
the same weights on the same fixed synthetic task, by torch's own DistributedDataParallel over a
weft group, in several modes side by side, for a few hundred steps:

  float32      DDP's own all-reduce (float32 on the wire)
  bf16         weft_torch.hooks.wire_hook, bfloat16 on the wire (float32 sums, rounded once)
  bf16-ef      the same with error feedback (each bucket's rounding residual added to its next step)
  fp16         wire_hook with float16 on the wire
  env-bf16     no hook: a weft group made with WEFT_WIRE_DTYPE=bfloat16 (the backend's float32
               all-reduces cross at 16 bits: the f32acc algorithm)
  weft-ddp-bf16 weft_torch.DistributedDataParallel(wire_dtype=torch.bfloat16)

The task: inputs drawn once from a fixed generator (each rank its own), labels from a fixed random
teacher network, SGD with momentum. Printed: each mode's loss (mean over the last tenth of the
steps) and its difference from float32's, relative and as a fraction of the float32 run's loss drop
(first loss - final loss); the check fails (exit 1) when a mode's final loss is further from
float32's than --tolerance (default 2%) of that drop, when the ranks' parameters differ at the end,
or when a wire mode's losses equal float32's at every step (nothing went on the wire at 16 bits).

    PYTHONPATH=build/python /usr/bin/python3 benchmarks/e2e/wire_quality.py --models mlp,resnet18 --steps 300
    (CI: --models small --steps 150, a few seconds at 2 ranks)
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
ALL_MODES = ("float32", "bf16", "bf16-ef", "fp16", "env-bf16", "weft-ddp-bf16")


def small():
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def models():
    import ddp_e2e  # the benchmark's MLP (25.2 M parameters) and ResNet-18
    return {
        "small": (small, (64,), 10, 32, 0.05),
        "mlp": (ddp_e2e.mlp, (1024,), 1000, 64, 0.02),
        "resnet18": (lambda: __import__("torchvision").models.resnet18(num_classes=100), (3, 32, 32), 100, 16, 0.02),
    }


class Task:
    """A fixed synthetic task: `count` batches per rank, labelled by a fixed random teacher."""

    def __init__(self, name, rank, count=16):
        ctor, shape, classes, batch, self.lr = models()[name]
        torch.manual_seed(12345)
        teacher = nn.Sequential(nn.Flatten(), nn.Linear(int(torch.tensor(shape).prod()), classes))
        g = torch.Generator().manual_seed(1000 + rank)
        self.batches = []
        with torch.no_grad():
            for _ in range(count):
                x = torch.randn((batch,) + shape, generator=g)
                self.batches.append((x, teacher(x).argmax(dim=1)))
        self.ctor = ctor


def make(mode, task, groups):
    torch.manual_seed(0)  # every mode starts from the same weights
    model = task.ctor()
    import weft_torch
    from weft_torch.hooks import WireState, wire_hook
    if mode == "weft-ddp-bf16":
        net = weft_torch.DistributedDataParallel(model, process_group=groups["weft"], wire_dtype=torch.bfloat16)
    else:
        group = groups["weft-env"] if mode == "env-bf16" else groups["weft"]
        net = nn.parallel.DistributedDataParallel(model, process_group=group, gradient_as_bucket_view=True)
        wire = {"bf16": torch.bfloat16, "bf16-ef": torch.bfloat16, "fp16": torch.float16}.get(mode)
        if wire is not None:
            net.register_comm_hook(WireState(group, wire, error_feedback=mode == "bf16-ef"), wire_hook)
    return model, net, torch.optim.SGD(net.parameters(), lr=task.lr, momentum=0.9)


def worker(rank, args, port, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    import weft_torch  # noqa: F401  registers the "weft" backend
    groups = {"gloo": dist.group.WORLD, "weft": dist.new_group(backend="weft")}
    if "env-bf16" in args.modes:
        os.environ["WEFT_WIRE_DTYPE"] = "bfloat16"  # read once, when the group's communicator is made
        groups["weft-env"] = dist.new_group(backend="weft")
        del os.environ["WEFT_WIRE_DTYPE"]
    out = []
    for name in args.models:
        task = Task(name, rank)
        runs = {m: make(m, task, groups) for m in args.modes}
        losses = {m: [] for m in args.modes}
        for step in range(args.steps):
            x, y = task.batches[step % len(task.batches)]
            for mode, (_, net, opt) in runs.items():
                opt.zero_grad(set_to_none=False)
                loss = F.cross_entropy(net(x), y)
                loss.backward()
                opt.step()
                losses[mode].append(loss.item())
        for mode, (model, _, _) in runs.items():
            flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            gathered = [torch.empty_like(flat) for _ in range(args.ranks)]
            dist.all_gather(gathered, flat, group=groups["gloo"])
            same = all(torch.equal(g, gathered[0]) for g in gathered)
            loss = torch.tensor(losses[mode], dtype=torch.float64)
            dist.all_reduce(loss, group=groups["gloo"])  # the ranks' mean loss at every step
            out.append((name, mode, (loss / args.ranks).tolist(), same))
        del runs
    if rank == 0:
        queue.put(out)
    dist.barrier(group=groups["gloo"])
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="small")
    ap.add_argument("--modes", default=",".join(ALL_MODES))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=0.02,
                    help="the largest |final loss - float32's| as a fraction of float32's loss drop (first - final)")
    args = ap.parse_args()
    args.models, args.modes = args.models.split(","), args.modes.split(",")
    for m in args.modes:
        if m not in ALL_MODES:
            ap.error(f"unknown mode {m!r} (known: {', '.join(ALL_MODES)})")
    if "float32" not in args.modes:
        args.modes.insert(0, "float32")
    import ddp_e2e
    results = ddp_e2e.run_ranks(worker, args)
    tail = max(1, args.steps // 10)
    failed = False
    print(f"{args.ranks} ranks, {args.steps} steps; loss = the ranks' mean over the last {tail} steps")
    print(f"{'model':10} {'mode':14} {'first loss':>10} {'final loss':>10} {'vs float32':>10} {'of drop':>9}  "
          "ranks equal  differs from float32")
    ref, ref_losses = {}, {}
    for name, mode, losses, same in results:
        final = sum(losses[-tail:]) / tail
        if mode == "float32":
            ref[name], ref_losses[name] = final, losses
        rel = (final - ref[name]) / ref[name]
        # Against the training the float32 run did (its first loss minus its final loss): a final
        # loss near zero makes a relative difference meaningless.
        of_drop = (final - ref[name]) / max(ref_losses[name][0] - ref[name], 1e-12)
        # A wire mode whose losses equal float32's at every step did not put anything on the wire.
        applied = mode == "float32" or losses != ref_losses[name]
        bad = abs(of_drop) > args.tolerance or not same or not applied
        failed |= bad
        print(f"{name:10} {mode:14} {losses[0]:10.4f} {final:10.6f} {rel:+10.2%} {of_drop:+9.3%}  "
              f"{'yes' if same else 'NO':11}  {'-' if mode == 'float32' else 'yes' if applied else 'NO'}"
              f"{'  <- FAILED' if bad else ''}")
    if failed:
        print(f"FAILED: a final loss further from float32's than {args.tolerance:.0%} of float32's loss drop, ranks "
              "that differ, or a wire mode that changed nothing")
        return 1
    print(f"OK: every mode's final loss is within {args.tolerance:.0%} of the float32 run's loss drop of that run's "
          "final loss; parameters equal on every rank")
    return 0


if __name__ == "__main__":
    sys.exit(main())
