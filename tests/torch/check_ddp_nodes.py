"""torch DDP over weft across emulated nodes (scripts/netns-cluster), checked against gloo: each rank
trains one MLP three ways side by side from the same weights and batches, step i of each before step
i + 1 of any: torch's DistributedDataParallel over a weft group, the same over a gloo group (on the
namespace's link, GLOO_SOCKET_IFNAME, not 127.0.0.1), and weft_torch.DistributedDataParallel.
Small buckets, so that every step moves several; DDP rebuilds them in ready order after step 1.
After every backward, each parameter's averaged gradient must equal gloo's: bit for bit at 2 ranks
((a + b) / 2 is exact), else within --rtol of the element's magnitude (plus 1e-3 of the largest:
an average that cancels to ~0 keeps its terms' rounding), as sum orders differ.
With --min-rtt-ms D first rank 0 and the first rank of the last node time 20 UDP round trips over
their link: the fastest must take at least D (the cluster's --delay is really there).

  netns-cluster --nodes 2 --ranks-per-node 1 -- python3 check_ddp_nodes.py [--steps N] [--min-rtt-ms D]

Exit 77 (skip) when torch does not import; prints "rank R: OK" per rank.
"""
import argparse
import os
import socket
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
except ImportError as e:
    print(f"SKIP: cannot import torch ({e})")
    sys.exit(77)
import weft_torch

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--rtol", type=float, default=1e-4)
ap.add_argument("--min-rtt-ms", type=float, default=0)
args = ap.parse_args()
torch.set_num_threads(1)

env = os.environ
rank, size, local = int(env["WEFT_RANK"]), int(env["WEFT_WORLD_SIZE"]), int(env["WEFT_LOCAL_RANK"])
per_node = int(env["WEFT_LOCAL_SIZE"])
# torch's store beside Weft's own (one port up), on rank 0's node; gloo on this node's link.
env.update(MASTER_ADDR=env["WEFT_MASTER_ADDR"], MASTER_PORT=str(int(env["WEFT_MASTER_PORT"]) + 1),
           GLOO_SOCKET_IFNAME=env["WEFT_SOCKET_IFNAME"])


def udp_round_trips(peer_rank, count=20):
    """Rank 0 pings the given rank's node over the link (UDP); returns the fastest round trip in ms."""
    port = int(env["WEFT_MASTER_PORT"]) + 2
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    peer_node = peer_rank // per_node
    if rank == peer_rank:
        s.bind((f"10.250.0.{peer_node + 1}", port))
        for _ in range(count):
            data, addr = s.recvfrom(64)
            s.sendto(data, addr)
        return None
    best = float("inf")
    for i in range(count):
        for attempt in range(50):  # until the peer is bound; a late echo of another probe is skipped
            probe = b"%d.%d" % (i, attempt)
            t = time.perf_counter()
            s.sendto(probe, (f"10.250.0.{peer_node + 1}", port))
            s.settimeout(0.2 if i == 0 else 10)
            try:
                while s.recvfrom(64)[0] != probe:
                    pass
                break
            except socket.timeout:
                continue
        best = min(best, (time.perf_counter() - t) * 1e3)
    return best


failures = []
if args.min_rtt_ms > 0 and size > per_node:
    peer = size - per_node  # local rank 0 of the last node
    if rank in (0, peer):
        rtt = udp_round_trips(peer)
        if rtt is not None:
            print(f"rank 0: fastest UDP round trip to node {peer // per_node}: {rtt:.3f} ms", flush=True)
            if rtt < args.min_rtt_ms:
                failures.append(f"round trip {rtt:.3f} ms, shorter than the delay's {args.min_rtt_ms} ms")

dist.init_process_group("weft")
weft = dist.group.WORLD
gloo = dist.new_group(backend="gloo")


def make_model():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def data():
    g = torch.Generator().manual_seed(100 + rank)
    w = torch.randn(32, 10, generator=torch.Generator().manual_seed(7))
    for _ in range(args.steps):
        x = torch.randn(16, 32, generator=g)
        yield x, (x @ w).argmax(1)


kw = dict(bucket_cap_mb=0.05)  # ~13k floats a bucket: 6 buckets of the 76k parameters
modes = {
    "torch DDP over weft": nn.parallel.DistributedDataParallel(make_model(), process_group=weft, **kw),
    "torch DDP over gloo": nn.parallel.DistributedDataParallel(make_model(), process_group=gloo, **kw),
    "weft_torch.DistributedDataParallel": weft_torch.DistributedDataParallel(make_model(), process_group=weft, **kw),
}
opts = {m: torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9) for m, net in modes.items()}
for step, (x, y) in enumerate(data()):
    grads = {}
    for mode, net in modes.items():
        opts[mode].zero_grad(set_to_none=False)
        nn.functional.cross_entropy(net(x), y).backward()
        grads[mode] = [p.grad.detach().clone() for p in net.parameters()]
        opts[mode].step()
    # Each element against gloo's, relative to its own magnitude.
    ref = grads["torch DDP over gloo"]
    for mode in ("torch DDP over weft", "weft_torch.DistributedDataParallel"):
        for i, (g, r) in enumerate(zip(grads[mode], ref)):
            if size == 2 and torch.equal(g, r):
                continue
            scale = r.abs() + 1e-3 * r.abs().max() + 1e-30  # an average that cancels to ~0 is not exact
            rel = ((g - r).abs() / scale).max().item()
            if size == 2 or rel > args.rtol:
                failures.append(f"step {step}, {mode}, parameter {i}: gradient differs from gloo's by {rel:.3g} "
                                f"(relative){' (must be equal at 2 ranks)' if size == 2 else ''}")
params = {m: torch.cat([p.detach().flatten() for p in net.parameters()]) for m, net in modes.items()}
for mode, p in params.items():  # every rank holds the same replica
    first = p.clone()
    dist.broadcast(first, 0, group=gloo)
    if not torch.equal(first, p):
        failures.append(f"{mode}: the replicas differ after {args.steps} steps")
dist.barrier(group=gloo)
if failures:
    print(f"rank {rank}: FAILED: {failures[:5]}", flush=True)
    sys.exit(1)
print(f"rank {rank} (node {rank // per_node}, local rank {local}): OK, {args.steps} steps, gradients "
      f"{'equal to' if size == 2 else 'within %g of' % args.rtol} gloo's", flush=True)
dist.destroy_process_group()
