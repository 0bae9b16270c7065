"""weft_torch.DistributedDataParallel: data parallelism whose gradients live in memory every rank
of the node shares, so that their all-reduce moves no bytes through staging copies.

    model = weft_torch.DistributedDataParallel(model, process_group=weft_group)
    loss_fn(model(x), y).backward()      # each bucket's all-reduce starts as its gradients are ready
    optimizer.step()                     # p.grad holds the average over the ranks

What torch's DistributedDataParallel does, for a group of the weft backend, with one difference:
every parameter's .grad is a view into a bucket allocated with weft_torch.empty_window
(weftMemAlloc), so autograd accumulates straight into memory that the other ranks of the node map.
Each rank then reduces its share of a bucket from every rank's bucket and writes the result into
all of them; the average is taken inside that pass. PyTorch's reducer instead divides every
gradient in a pass of its own and hands the bucket to the backend, which copies it through shared
memory twice (docs/PYTORCH.md, "Weft's DistributedDataParallel"; figures in docs/PERFORMANCE.md,
"End to end"). Across nodes the buckets are plain memory and the all-reduce takes Weft's usual path.

Like torch's DDP: parameters and buffers are broadcast from rank 0 at construction (buffers again
before every forward, broadcast_buffers=True); buckets are filled in the reverse order of
module.parameters() (about the order backward produces them), the first up to 1 MiB, the others
up to bucket_cap_mb (torch's rule: a bucket closes once it holds at least its cap), and rebuilt
once, at the forward after the first backward, in the order rank 0's gradients became ready then
(unless find_unused_parameters=True, as torch); they are launched in order, each once all its
gradients are ready, so every rank launches the same all-reduces in the same order; the backward returns once every bucket is reduced; no_sync() skips communication
(gradients accumulate); a parameter that got no gradient is an error naming it, unless
find_unused_parameters=True (its gradient, zero after zero_grad(), is averaged like the others).

Reproducible training (docs/DETERMINISM.md): deterministic=True puts the group in deterministic
mode (weft_torch.set_deterministic: every element summed in rank order) and keeps the buckets in
their first layout, a function of the parameter list alone (no rebuild from the observed ready
order): two runs on the same rank count give the same bits. virtual_shards=V (implies it) makes
the result independent of the rank count too: every step is V micro-batches (shards), each rank
runs forward and backward once per shard of its own (V / ranks of them, rank r the shards
r*V/ranks ...), and the backward of its last shard combines all V shards' gradients by one fixed
binary tree over V (weft_torch.all_reduce_shards) and averages over V; so 1, 2, 4 ... ranks
give the same parameters. The shards' gradients are kept apart until then (one copy of the
buckets per local shard); the all-reduce is not overlapped with the backward.
"""
import contextlib

import torch
import torch.distributed as dist

from . import all_reduce_shards, empty_window, set_deterministic
from ._weft_torch import _shard_layout_problem
from .hooks import WireState

__all__ = ["DistributedDataParallel"]


class _Bucket:
    __slots__ = ("flat", "params", "offsets", "ready", "pending", "work", "wire")

    def __init__(self, flat, params, offsets):
        self.flat, self.params, self.offsets = flat, params, offsets
        self.reset()

    def reset(self):
        self.ready = [False] * len(self.params)
        self.pending = len(self.params)
        self.work = None
        self.wire = None


class DistributedDataParallel(torch.nn.Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=25, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=True, static_graph=False, deterministic=False, virtual_shards=None,
                 wire_dtype=None, error_feedback=False):
        super().__init__()
        # torch's signature, so that code written for it runs unchanged; the gradients are always in
        # the buckets (gradient_as_bucket_view), and static_graph / check_reduction change nothing here.
        if device_ids or output_device is not None:
            raise ValueError("weft_torch.DistributedDataParallel takes CPU modules: device_ids and output_device "
                             f"must be None (got {device_ids}, {output_device})")
        if dim != 0:
            raise ValueError(f"weft_torch.DistributedDataParallel: dim must be 0 (got {dim})")
        group = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
        backend = dist.get_backend(group)
        if backend != "weft":
            raise ValueError(f"weft_torch.DistributedDataParallel needs a group of the weft backend (got {backend!r}); "
                             "for other backends use torch.nn.parallel.DistributedDataParallel")
        if bucket_cap_mb <= 0:
            raise ValueError(f"weft_torch.DistributedDataParallel: bucket_cap_mb must be positive (got {bucket_cap_mb})")
        self._shards = int(virtual_shards) if virtual_shards is not None else 0
        if virtual_shards is not None:
            problem = _shard_layout_problem(self._shards, dist.get_world_size(group))
            if problem:
                raise ValueError(f"weft_torch.DistributedDataParallel: virtual_shards={virtual_shards}: {problem}")
        self.deterministic = deterministic or self._shards > 0
        if self.deterministic:
            set_deterministic(group, True)
        self.module, self.process_group = module, group
        # wire_dtype (torch.bfloat16 / torch.float16): float32 buckets cross at 16 bits, averaged in
        # float32 and rounded once (weft_torch.hooks); error_feedback keeps each bucket's residual.
        self._wire = WireState(group, wire_dtype, error_feedback)
        self.broadcast_buffers, self.find_unused_parameters = broadcast_buffers, find_unused_parameters
        self._sync = True
        seen, params = set(), []
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
        for p in params:
            if p.device.type != "cpu" or p.is_sparse:
                raise ValueError("weft_torch.DistributedDataParallel takes dense CPU parameters "
                                 f"(got {p.device.type}{', sparse' if p.is_sparse else ''}); use torch's DDP for others")
        with torch.no_grad():
            for t in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(t, 0, group=group)
        self._names = {id(p): n for n, p in module.named_parameters()}
        self._params, self._bucket_cap = params, int(bucket_cap_mb * 2**20)
        self._buckets, self._where = [], {}
        self._build_buckets(list(reversed(params)))
        # As torch's DDP (static graph, or no unused parameters): the first backward records the
        # order in which gradients became ready, and the next forward rebuilds the buckets in that
        # order (rank 0's, broadcast), so that each bucket launches as soon as it can.
        self._ready_order = []
        self._rebuild_pending = not find_unused_parameters and not self.deterministic
        # virtual_shards: the gradients of each local shard of this step, per bucket (shard index first).
        self._local_shards = self._shards // dist.get_world_size(group) if self._shards else 0
        self._stash = [torch.empty((self._local_shards, b.flat.numel()), dtype=b.flat.dtype) for b in self._buckets] \
            if self._shards else []
        self._shard = 0
        # A hook on each parameter's gradient accumulator runs once its .grad is final for this backward.
        self._accumulators = []
        for p in params:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._make_hook(p))
            self._accumulators.append(acc)
        self._next_launch = 0
        self._armed = self._queued = False

    def _build_buckets(self, order):
        """Buckets as torch's DDP makes them, over `order` (the parameters in the order their
        gradients are expected): one dtype each, a bucket closed once it holds at least its cap;
        the first cap is 1 MiB (so the first all-reduce starts early), then bucket_cap_mb. Every
        .grad becomes a view into its bucket (its value, if any, copied in). Collective."""
        caps = [getattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES", 2**20), self._bucket_cap]
        groups, cur, cur_bytes = [], [], 0
        for p in order:
            if cur and p.dtype != cur[0].dtype:
                groups.append(cur)
                cur, cur_bytes = [], 0
            cur.append(p)
            cur_bytes += p.numel() * p.element_size()
            if cur_bytes >= caps[min(len(groups), 1)]:
                groups.append(cur)
                cur, cur_bytes = [], 0
        if cur:
            groups.append(cur)
        buckets, where = [], {}
        for gp in groups:
            total = sum(p.numel() for p in gp)
            flat = empty_window(self.process_group, total, gp[0].dtype)  # collective: the same sizes on every rank
            offsets, off = [], 0
            for p in gp:
                offsets.append(off)
                view = flat[off:off + p.numel()].view_as(p)
                if p.grad is not None:
                    view.copy_(p.grad)
                p.grad = view
                where[id(p)] = (len(buckets), len(offsets) - 1)
                off += p.numel()
            buckets.append(_Bucket(flat, gp, offsets))
        self._buckets, self._where = buckets, where

    def _rebuild_buckets(self):
        """Once, at the forward after the first backward that reduced every gradient: buckets in
        the order rank 0's gradients became ready (torch's DDP does the same)."""
        self._rebuild_pending = False
        index = {id(p): i for i, p in enumerate(self._params)}
        order = torch.tensor([index[id(p)] for p in self._ready_order], dtype=torch.int64)
        self._ready_order = []
        dist.broadcast(order, 0, group=self.process_group)
        new = [self._params[i] for i in order.tolist()]
        current = [p for b in self._buckets for p in b.params]
        if [id(p) for p in new] != [id(p) for p in current]:
            self._build_buckets(new)

    @property
    def bucket_order(self):
        """The parameter names of each bucket, in launch order (for inspection and tests)."""
        return [[self._names.get(id(p), "?") for p in b.params] for b in self._buckets]

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally inside; the first backward after it averages the sum."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old

    def forward(self, *args, **kwargs):
        if self.broadcast_buffers:
            with torch.no_grad():
                for b in self.module.buffers():
                    dist.broadcast(b, 0, group=self.process_group)
        if torch.is_grad_enabled() and self._sync:
            if self._rebuild_pending:
                if len(self._ready_order) == len(self._params):  # the last backward reduced them all
                    self._rebuild_buckets()
                else:
                    self._ready_order = []
            for b in self._buckets:
                b.reset()
            self._next_launch = 0
            self._armed, self._queued = True, False
        return self.module(*args, **kwargs)

    def _make_hook(self, p):
        def hook(*_):
            if not self._armed:
                return
            bi, pi = self._where[id(p)]
            b = self._buckets[bi]
            view = b.flat[b.offsets[pi]:b.offsets[pi] + p.numel()].view_as(p)
            if p.grad is None or p.grad.data_ptr() != view.data_ptr():
                # zero_grad(set_to_none=True) or a replaced .grad: back into the bucket.
                if p.grad is not None:
                    view.copy_(p.grad)
                p.grad = view
            if not self._queued:  # the first gradient of this backward: wait for all at its end
                self._queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._finish)
            if not b.ready[pi]:
                b.ready[pi] = True
                b.pending -= 1
                if self._rebuild_pending:
                    self._ready_order.append(p)
                self._launch_ready()
        return hook

    def _launch(self, b):
        if self._shards:  # combined at the backward of the step's last shard (_combine_shards)
            return
        if self._wire.wire_dtype is not None and b.flat.dtype == torch.float32:
            b.wire = self._wire.round(id(b), b.flat)
            b.work = dist.all_reduce(b.wire, op=dist.ReduceOp.AVG, group=self.process_group, async_op=True)
            return
        b.work = dist.all_reduce(b.flat, op=dist.ReduceOp.AVG, group=self.process_group, async_op=True)

    def _launch_ready(self):
        while self._next_launch < len(self._buckets) and self._buckets[self._next_launch].pending == 0:
            self._launch(self._buckets[self._next_launch])
            self._next_launch += 1

    def _finish(self):
        """The end of the backward: every bucket launched (or an error naming what got no
        gradient), then waited for."""
        self._armed = False
        if self._next_launch < len(self._buckets) and not self.find_unused_parameters:
            missing = [self._names.get(id(p), "?") for b in self._buckets for p, r in zip(b.params, b.ready) if not r]
            # Wait for what was launched before failing, so no all-reduce still reads the buckets.
            for b in self._buckets[:self._next_launch]:
                if b.work is not None:
                    b.work.wait()
            raise RuntimeError("weft_torch.DistributedDataParallel: these parameters got no "
                               f"gradient in this backward: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}; "
                               "pass find_unused_parameters=True if the model does not use every parameter in every step")
        while self._next_launch < len(self._buckets):
            self._launch(self._buckets[self._next_launch])
            self._next_launch += 1
        if self._shards:
            self._combine_shards()
            return
        for b in self._buckets:
            b.work.wait()
            if b.wire is not None:
                b.flat.copy_(b.wire)
                b.wire = None

    def _combine_shards(self):
        """virtual_shards: this shard's gradients are put aside (the buckets zeroed for the next
        shard); after the last local shard, every bucket is the tree combination of all V."""
        for b, stash in zip(self._buckets, self._stash):
            stash[self._shard].copy_(b.flat)
        self._shard += 1
        if self._shard < self._local_shards:
            for b in self._buckets:
                b.flat.zero_()
            return
        self._shard = 0
        for b, stash in zip(self._buckets, self._stash):
            b.flat.copy_(all_reduce_shards(stash, self._shards, group=self.process_group, op=dist.ReduceOp.AVG))
