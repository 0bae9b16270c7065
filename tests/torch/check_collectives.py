"""Every collective of the weft backend against gloo (or, where gloo 1.13 lacks the operation or
type, against a reference computed from every rank's inputs), on every Weft data type, in one job
that holds a weft group (the default) and a gloo group; all_to_all_single and all_to_all with
unequal splits (zero rows included) against a reference and gloo. Then the errors: unsupported
type, split sizes of the wrong length, a non-CPU tensor, an unsupported reduce op; the group must
stay usable after each. Run through launch.py; prints "rank R: OK" and exits 0 on success.
"""
import sys

import torch
import torch.distributed as dist

import weft_torch  # noqa: F401  (registers "weft")

DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64]
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
       "avg": dist.ReduceOp.AVG}
quick = "--quick" in sys.argv  # skips the large (pipelined) sizes
failures = []
fallbacks = set()


def data(rank, n, dtype, salt=0):
    """Rank's input, reproducible anywhere: small integers (no overflow of int8 products over 4 ranks)
    or floats in [0.5, 1.5)."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * n + salt)
    if dtype in FLOATS:
        return (torch.rand(n, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    return torch.randint(0, 4, (n,), generator=g, dtype=torch.int64).to(dtype)


def reduce_ref(tensors, op, dtype):
    s = torch.stack([t.double() for t in tensors])
    r = {"sum": s.sum(0), "prod": s.prod(0), "min": s.min(0).values, "max": s.max(0).values, "avg": s.mean(0)}[op]
    return r.to(dtype)


def check(name, got, want):
    tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-5, torch.float64: 1e-12}.get(got.dtype, 0)
    ok = got.dtype == want.dtype and got.shape == want.shape and torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
    if not ok:
        failures.append(name)
        print(f"rank {rank}: MISMATCH {name}: got {got.flatten()[:6].tolist()} want {want.flatten()[:6].tolist()}", flush=True)


def with_gloo(fn, fallback, what):
    """Runs fn on the gloo group; when gloo cannot (type, op or operation unsupported in 1.13),
    returns fallback()."""
    try:
        return fn()
    except RuntimeError:
        fallbacks.add(what)
        return fallback()


def collectives(dtype, n):
    tag = f"{str(dtype)[6:]}[{n}]"
    mine = data(rank, n, dtype)
    everyone = [data(r, n, dtype) for r in range(size)]
    # all_reduce, every op (avg on floats only).
    for name, op in OPS.items():
        if name == "avg" and dtype not in FLOATS:
            continue
        t = mine.clone()
        dist.all_reduce(t, op=op)

        def gloo_ar():
            u = mine.clone()
            dist.all_reduce(u, op=op, group=gloo)
            return u
        check(f"all_reduce {name} {tag}", t, with_gloo(gloo_ar, lambda: reduce_ref(everyone, name, dtype),
                                                     f"all_reduce {name} {str(dtype)[6:]}"))
    # broadcast from the last rank, reduce (sum) to rank 1 % size.
    t = mine.clone()
    dist.broadcast(t, src=size - 1)
    check(f"broadcast {tag}", t, everyone[size - 1])
    t = mine.clone()
    dist.reduce(t, dst=1 % size)
    if rank == 1 % size:
        check(f"reduce {tag}", t, reduce_ref(everyone, "sum", dtype))
    # all_gather (list and into one tensor).
    outs = [torch.empty_like(mine) for _ in range(size)]
    dist.all_gather(outs, mine)
    for r in range(size):
        check(f"all_gather {tag} part {r}", outs[r], everyone[r])
    flat = torch.empty(size * n, dtype=dtype)
    dist.all_gather_into_tensor(flat, mine)
    check(f"all_gather_into_tensor {tag}", flat, torch.cat(everyone))
    # reduce_scatter (list and from one tensor): rank r's part r of every rank's input, summed.
    parts = [data(rank, n, dtype, salt=r + 1) for r in range(size)]
    want = reduce_ref([data(q, n, dtype, salt=rank + 1) for q in range(size)], "sum", dtype)
    out = torch.empty(n, dtype=dtype)
    dist.reduce_scatter(out, parts)
    check(f"reduce_scatter {tag}", out, want)
    out = torch.empty(n, dtype=dtype)
    dist.reduce_scatter_tensor(out, torch.cat(parts))
    check(f"reduce_scatter_tensor {tag}", out, want)
    # all_to_all_single (against gloo) and all_to_all (lists).
    src = torch.cat(parts)
    out = torch.empty_like(src)
    dist.all_to_all_single(out, src)
    want = torch.cat([data(q, n, dtype, salt=rank + 1) for q in range(size)])

    def gloo_a2a():
        u = torch.empty_like(src)
        dist.all_to_all_single(u, src, group=gloo)
        return u
    check(f"all_to_all_single {tag}", out, with_gloo(gloo_a2a, lambda: want, f"all_to_all_single {str(dtype)[6:]}"))
    outs = [torch.empty(n, dtype=dtype) for _ in range(size)]
    dist.all_to_all(outs, parts)
    check(f"all_to_all {tag}", torch.cat(outs), want)
    # gather to rank 0, scatter from the last rank (point-to-point inside weft).
    outs = [torch.empty(n, dtype=dtype) for _ in range(size)] if rank == 0 else None
    dist.gather(mine, outs, dst=0)
    if rank == 0:
        for r in range(size):
            check(f"gather {tag} part {r}", outs[r], everyone[r])
    root = size - 1
    out = torch.empty(n, dtype=dtype)
    dist.scatter(out, [data(root, n, dtype, salt=10 + r) for r in range(size)] if rank == root else None, src=root)
    check(f"scatter {tag}", out, data(root, n, dtype, salt=10 + rank))
    # send/recv around the ring; even ranks send first.
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    got = torch.empty(n, dtype=dtype)
    if rank % 2 == 0:
        dist.send(mine, nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(mine, nxt)
    check(f"send/recv {tag}", got, everyone[prv])


def extras():
    # Asynchronous: several operations in flight, completed through Work.wait and Future.wait.
    ts = [data(rank, 1000 + i, torch.float32) for i in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    fut = works[-1].get_future()
    for w in works[:-1]:
        w.wait()
    fut.wait()
    for i, t in enumerate(ts):
        check(f"async all_reduce {i}", t, reduce_ref([data(r, 1000 + i, torch.float32) for r in range(size)], "sum", torch.float32))
    # Non-contiguous tensors: staged through contiguous copies, results copied back.
    base = torch.stack([data(rank, 64, torch.float64, salt=s) for s in range(3)], 1)  # 64 x 3
    col = base[:, 1]
    assert not col.is_contiguous()
    dist.all_reduce(col)
    check("all_reduce non-contiguous", base[:, 1],
          reduce_ref([data(r, 64, torch.float64, salt=1) for r in range(size)], "sum", torch.float64))
    check("all_reduce non-contiguous leaves the rest", base[:, 0], data(rank, 64, torch.float64, salt=0))
    # Objects (all_gather of sizes, then of padded bytes) and barrier.
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "name": "x" * rank})
    if objs != [{"rank": r, "name": "x" * r} for r in range(size)]:
        failures.append("all_gather_object")
    dist.barrier()
    # batch_isend_irecv with every receive posted before any send (issue 43: a deadlock until the
    # timeout while the communicator ran one operation at a time), sizes from a few bytes to 2 MiB.
    for n in (3, 4099, 524288):
        ins = {p: torch.zeros(n) for p in range(size) if p != rank}
        ops = [dist.P2POp(dist.irecv, ins[p], p) for p in ins]
        ops += [dist.P2POp(dist.isend, torch.full((n,), float(100 * rank + p)), p) for p in ins]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        for p, t in ins.items():
            check(f"batch_isend_irecv {n} from {p}", t, torch.full((n,), float(100 * p + rank)))

    # recv without a source: rank 0 takes one message from each other rank, in whatever order they
    # arrive; the source torch returns is the sender.
    if rank == 0:
        got = []
        for _ in range(size - 1):
            t = torch.zeros(5)
            src = dist.recv(t)
            check(f"recv from any source ({src})", t, torch.full((5,), float(src)))
            got.append(src)
        if sorted(got) != list(range(1, size)):
            failures.append(f"recv from any source: sources {got}")
    else:
        dist.send(torch.full((5,), float(rank)), 0)
    # Coalesced calls (one Weft call each) and several tensors per process (reduced together, as gloo).
    ts = [data(rank, 5 + 3 * i, torch.float32, salt=i) for i in range(3)]
    dist.all_reduce_coalesced(ts)
    for i, t in enumerate(ts):
        check(f"all_reduce_coalesced {i}", t, reduce_ref([data(r, 5 + 3 * i, torch.float32, salt=i) for r in range(size)],
                                                         "sum", torch.float32))
    ins = [data(rank, 4 + i, torch.float64, salt=i) for i in range(2)]
    outs = [[torch.empty(4 + i, dtype=torch.float64) for i in range(2)] for _ in range(size)]  # outs[r][i]
    dist.all_gather_coalesced(outs, ins)
    for i in range(2):
        for r in range(size):
            check(f"all_gather_coalesced {i} from {r}", outs[r][i], data(r, 4 + i, torch.float64, salt=i))
    pair = [data(rank, 6, torch.float32, salt=1), data(rank, 6, torch.float32, salt=2)]
    dist.all_reduce_multigpu(pair)
    want = reduce_ref([data(r, 6, torch.float32, salt=s) for r in range(size) for s in (1, 2)], "sum", torch.float32)
    for t in pair:
        check("all_reduce of a tensor list", t, want)
    # A sparse COO tensor, SUM (gloo's one op for sparse): every rank holds entries of its own.
    i = torch.tensor([[rank, rank + 1], [0, 2]])
    sp = torch.sparse_coo_tensor(i, torch.tensor([1.0 + rank, 2.0]), (size + 1, 3))
    dist.all_reduce(sp)
    dense = torch.zeros(size + 1, 3)
    for r in range(size):
        dense[r, 0] += 1.0 + r
        dense[r + 1, 2] += 2.0
    check("all_reduce sparse", sp.to_dense(), dense)


def unequal_all_to_all():
    """all_to_all_single with input/output split sizes and all_to_all with lists of tensors of
    different sizes (rows of 3 elements; rank q sends rank p rows(q, p) rows, zero for some pairs,
    and for uint8 rank 0 sends nothing at all), against a reference built from every rank's input
    and against gloo where gloo 1.13 can."""
    width = 3
    for salt, dtype in enumerate((torch.float32, torch.int64, torch.bfloat16, torch.uint8)):
        def rows(q, p):
            return 0 if dtype == torch.uint8 and q == 0 else (q * 3 + p * 5 + salt) % 4

        def inp(q):
            return data(q, width * sum(rows(q, p) for p in range(size)), dtype, salt=50 + salt).view(-1, width)
        tag = f"{str(dtype)[6:]}"
        mine = inp(rank)
        in_splits = [rows(rank, p) for p in range(size)]
        out_splits = [rows(q, rank) for q in range(size)]
        want = torch.cat([inp(q).narrow(0, sum(rows(q, p) for p in range(rank)), rows(q, rank)) for q in range(size)])
        out = torch.full((sum(out_splits), width), 7, dtype=dtype)
        dist.all_to_all_single(out, mine, out_splits, in_splits)
        check(f"all_to_all_single unequal {tag}", out, want)

        def gloo_a2av():
            u = torch.empty_like(out)
            dist.all_to_all_single(u, mine, out_splits, in_splits, group=gloo)
            return u
        check(f"all_to_all_single unequal {tag} (gloo)", out,
              with_gloo(gloo_a2av, lambda: want, f"all_to_all_single unequal {tag}"))
        # The same blocks as lists of tensors, then all_to_all_single again, asynchronously.
        outs = [torch.full((rows(q, rank), width), 7, dtype=dtype) for q in range(size)]
        dist.all_to_all(outs, list(mine.split(in_splits)))
        check(f"all_to_all unequal {tag}", torch.cat(outs), want)
        work = dist.all_to_all_single(out.zero_(), mine, out_splits, in_splits, async_op=True)
        work.wait()
        check(f"all_to_all_single unequal async {tag}", out, want)


def expect_error(what, fn, text):
    try:
        fn()
    except RuntimeError as e:
        if text not in str(e):
            failures.append(f"error {what}: {str(e).splitlines()[0]}")
        return
    failures.append(f"error {what}: no exception")


def errors():
    expect_error("bool", lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool)), "are not supported")
    expect_error("int16", lambda: dist.broadcast(torch.ones(4, dtype=torch.int16), 0), "are not supported")
    splits = [1] * (size + 1)  # one entry too many
    expect_error("split sizes of the wrong length", lambda: dist.all_to_all_single(
        torch.empty(size + 1), torch.ones(size + 1), splits, splits), "_split_sizes has")
    # (A non-CPU tensor is refused with "the GPU path is not built"; this CPU-only PyTorch has no
    # device whose tensors reach the backend.)
    expect_error("band", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND), "reduce op")
    t = torch.ones(8)
    dist.all_reduce(t)  # still usable
    check("all_reduce after errors", t, torch.full((8,), float(size)))


dist.init_process_group("weft")
rank, size = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "weft", dist.get_backend()
gloo = dist.new_group(backend="gloo")
for dt in DTYPES:
    collectives(dt, 37)
if not quick:
    for dt in (torch.float32, torch.bfloat16, torch.int64):
        collectives(dt, 70001)  # larger than a slice: pipelined schedules
extras()
unequal_all_to_all()
errors()
dist.barrier()
if rank == 0 and fallbacks:
    print("rank 0: references computed locally where gloo 1.13 cannot:", ", ".join(sorted(fallbacks)), flush=True)
dist.destroy_process_group()
if failures:
    print(f"rank {rank}: FAILED {len(failures)}: {failures[:10]}", flush=True)
    sys.exit(1)
print(f"rank {rank}: OK", flush=True)
