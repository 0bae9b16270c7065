"""A rank dies in the middle of DDP training (SIGKILL, or os._exit with --exit); every other rank
must get a RuntimeError from Weft within WEFT_TIMEOUT_MS (set to 2000 here unless given) plus a
margin, and then leave. The dead rank is the last one (--victim R picks another; rank 0 serves
torch's TCPStore, so its death is seen through the store). Survivors print "rank R: OK (...)" and
exit 0; launch.py is told that the last rank may fail. --within S: the error must come within S
seconds (default: WEFT_TIMEOUT_MS + 10 s).
"""
import os
import signal
import sys
import time

os.environ.setdefault("WEFT_TIMEOUT_MS", "2000")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import weft_torch  # noqa: F401,E402

DIE_AT = 3
torch.set_num_threads(1)
dist.init_process_group("weft")
rank, size = dist.get_rank(), dist.get_world_size()
victim = int(sys.argv[sys.argv.index("--victim") + 1]) if "--victim" in sys.argv else size - 1
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
timeout_s = int(os.environ["WEFT_TIMEOUT_MS"]) / 1000
last_ok = time.monotonic()
try:
    for step in range(1000):
        if step == DIE_AT and rank == victim:
            print(f"rank {rank}: dying at step {step}", flush=True)
            if "--exit" in sys.argv:
                os._exit(3)
            os.kill(os.getpid(), signal.SIGKILL)
        opt.zero_grad()
        model(torch.randn(8, 16)).sum().backward()
        opt.step()
        last_ok = time.monotonic()
    print(f"rank {rank}: FAILED: training went on without rank {victim}", flush=True)
    sys.exit(1)
except RuntimeError as e:
    waited = time.monotonic() - last_ok
    msg = str(e).splitlines()[0]
    print(f"rank {rank}: RuntimeError {waited:.1f} s after the last good step: {msg}", flush=True)
    limit = float(sys.argv[sys.argv.index("--within") + 1]) if "--within" in sys.argv else timeout_s + 10
    if waited > limit:
        print(f"rank {rank}: FAILED: the error came {waited:.1f} s after the last good step "
              f"(WEFT_TIMEOUT_MS {timeout_s:.0f} s, limit {limit:.0f} s)", flush=True)
        sys.exit(1)
    if "weft" not in msg:
        print(f"rank {rank}: FAILED: the error does not come from weft", flush=True)
        sys.exit(1)
# A further collective on the broken group fails at once, with the reason.
try:
    dist.all_reduce(torch.ones(4))
    print(f"rank {rank}: FAILED: the broken group still takes collectives", flush=True)
    sys.exit(1)
except RuntimeError as e:
    print(f"rank {rank}: next collective refused: {str(e).splitlines()[0][:160]}", flush=True)
print(f"rank {rank}: OK (step {step})", flush=True)
os._exit(0)  # leave without the collective teardown of the group a peer of which is dead
