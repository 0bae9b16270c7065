"""DDP training that survives a rank's death: the example of docs/PYTORCH.md ("Surviving a
failure"), run by tests/torch/shrink_ddp.py.

  check_shrink.py --out DIR [--steps N] [--victim R --die-at K]     the training (weftrun --keep-going)
  check_shrink.py --out DIR [--steps N] --resume DIR/recovery.pt    a fresh run from the recovery state

Rank R SIGKILLs itself at the start of step K. The others catch the RuntimeError of that step,
shrink the group (weft_torch.shrink_group), rebuild DDP on it (which broadcasts the parameters
from the new group's rank 0, the lowest survivor), take the step counter from that rank too, and
finish with one rank fewer. The new group's rank 0 saves the state it resumed from
(DIR/recovery.pt); every rank saves its final parameters (DIR/final.<rank>.pt). With --resume, a
fresh job (as many ranks as survived) starts from that state and saves DIR/reference.<rank>.pt:
the driver checks they are equal. Each step's batch depends only on (step, rank in the group).
"""
import argparse
import gc
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import weft_torch

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--victim", type=int, default=-1)
ap.add_argument("--die-at", type=int, default=5)
ap.add_argument("--resume", default=None)
args = ap.parse_args()
torch.set_num_threads(1)
LR = 0.05


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


def batch(step, group_rank):
    g = torch.Generator().manual_seed(1000 * step + group_rank)
    x = torch.randn(8, 16, generator=g)
    return x, torch.randn(8, 4, generator=g)


dist.init_process_group("weft")
rank = dist.get_rank()
group = dist.group.WORLD
module = make_model()
step = 0
if args.resume:
    state = torch.load(args.resume)
    module.load_state_dict(state["params"])
    step = state["step"]
model = DDP(module, process_group=group)
opt = torch.optim.SGD(model.parameters(), lr=LR)
shrinks = 0
while step < args.steps:
    if rank == args.victim and step == args.die_at:
        print(f"rank {rank}: dying at step {step}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        x, y = batch(step, dist.get_rank(group))
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        step += 1
    except RuntimeError as e:
        print(f"rank {rank}: step {step} failed: {str(e).splitlines()[0][:200]}", flush=True)
        # The survivors' group; DDP rebuilt on it broadcasts the parameters from its rank 0 (the
        # lowest survivor), whose step counter everyone takes too (a rank may have finished the
        # failed step, another not).
        group = weft_torch.shrink_group(group)
        shrinks += 1
        lowest = dist.get_process_group_ranks(group)[0]
        del model, opt
        gc.collect()  # the old DDP's hooks go with it
        model = DDP(module, process_group=group)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        counter = torch.tensor([step])
        dist.broadcast(counter, src=lowest, group=group)
        step = int(counter)
        print(f"rank {rank}: rank {dist.get_rank(group)} of {group.size()} in the shrunk group, resuming at step {step} "
              f"from rank {lowest}", flush=True)
        if dist.get_rank(group) == 0:
            torch.save({"params": module.state_dict(), "step": step}, os.path.join(args.out, "recovery.pt"))
name = "reference" if args.resume else "final"
torch.save(module.state_dict(), os.path.join(args.out, f"{name}.{dist.get_rank(group)}.pt"))
print(f"rank {rank}: OK {name} after {step} steps, {shrinks} shrink(s), group of {group.size()}", flush=True)
# Leave cleanly: destroying the groups withdraws this rank's death notices, which would otherwise
# tell the others that it died while they finish.
del model, opt
group = None
dist.destroy_process_group()
gc.collect()
sys.stdout.flush()
os._exit(0)  # torch's store may have gone with rank 0: no interpreter teardown that might touch it
