"""Peer harness for benchmarks/compare: torch.distributed all_reduce (gloo backend, float32 sum,
in place: torch has no out-of-place all-reduce), timed exactly as weft-perf times Weft: buffers
allocated once and touched, W warm-up calls, a barrier, N timed calls, time per call = elapsed / N,
the MAXIMUM over ranks (weft-perf and nccl-tests' -a 3). Run with the system interpreter, one
process per rank:

  RANK=r WORLD_SIZE=n MASTER_ADDR=127.0.0.1 MASTER_PORT=p /usr/bin/python3 torch_allreduce.py SIZE:ITERS:WARMUP[,...]
prints CSV on rank 0: size,time_us,algbw,busbw,wrong. Every rank fills the buffer with rank+1, so
every element of a sum must be n(n+1)/2. In place, each timed call sums the previous result (the
values grow n-fold a call), so after the timed calls the buffer is refilled and one more call is
checked: wrong = its elements that differ from n(n+1)/2, summed over ranks (0: all right)."""
import sys
import time

import torch
import torch.distributed as dist


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    specs = []
    for tok in sys.argv[1].split(","):
        parts = [int(x) for x in tok.split(":")] + [20, 5]
        specs.append((max(4, parts[0]), parts[1], parts[2]))
    big = max(s[0] for s in specs) // 4
    buf = torch.full((big,), float(rank + 1), dtype=torch.float32)
    want = float(n * (n + 1) // 2)
    if rank == 0:
        print("size,time_us,algbw,busbw,wrong", flush=True)
    for size, iters, warm in specs:
        t = buf[: size // 4]
        for _ in range(warm):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        per = (time.perf_counter() - t0) / max(1, iters)
        x = torch.tensor([per], dtype=torch.float64)
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        t.fill_(float(rank + 1))
        dist.all_reduce(t)
        wrong = torch.tensor([int((t != want).sum().item())], dtype=torch.int64)
        t.fill_(float(rank + 1))
        dist.all_reduce(wrong)
        sec = x.item()
        algbw = size / sec / 1e9
        if rank == 0:
            print(f"{size},{sec * 1e6:.3f},{algbw:.4f},{algbw * 2 * (n - 1) / n:.4f},{wrong.item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
