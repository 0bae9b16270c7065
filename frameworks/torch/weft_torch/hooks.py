"""DDP comm hooks for torch's own DistributedDataParallel over the weft backend.

    import weft_torch
    from weft_torch.hooks import WireState, wire_hook
    model = torch.nn.parallel.DistributedDataParallel(model, process_group=weft_group)
    model.register_comm_hook(WireState(weft_group, torch.bfloat16, error_feedback=True), wire_hook)

wire_hook puts each float32 bucket on the wire at 16 bits (bfloat16 or float16): the bucket is
rounded once to the wire type, all-reduced as such with ReduceOp.AVG, and copied back. On a weft
group a 16-bit average is accumulated in float32 in rank order and rounded once (the f32acc
algorithm, docs/KERNELS.md), where PyTorch's fp16_compress_hook over gloo or NCCL rounds at every
hop of a ring; every rank ends with the same values. With error_feedback=True the rounding's
residual (the gradient minus its 16-bit value) is kept per bucket and added to that bucket's
gradient at the next step, as PowerSGD and 1-bit Adam do, so that no part of a gradient is lost
for good. Buckets of other types are averaged in their own type.
"""
import torch
import torch.distributed as dist

__all__ = ["WireState", "wire_hook"]

_WIRE_TYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def wire_type(dtype):
    """torch.bfloat16 / torch.float16 (or their names); None and "float32" give None (no wire type).
    Anything else is a ValueError naming the accepted values."""
    if dtype is None or dtype == "float32" or dtype == torch.float32:
        return None
    if isinstance(dtype, str):
        if dtype not in _WIRE_TYPES:
            raise ValueError(f"weft: wire_dtype {dtype!r} is not one of bfloat16, float16, float32 or None")
        return _WIRE_TYPES[dtype]
    if dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"weft: wire_dtype {dtype} is not torch.bfloat16, torch.float16, torch.float32 or None")
    return dtype


class WireState:
    """The hook's state: the group, the wire type and, with error feedback, each bucket's residual."""

    def __init__(self, process_group=None, wire_dtype=torch.bfloat16, error_feedback=False):
        self.process_group = process_group
        self.wire_dtype = wire_type(wire_dtype)
        self.error_feedback = bool(error_feedback)
        self.residuals = {}  # bucket index -> float32 residual of the last rounding

    def round(self, key, flat):
        """The 16-bit copy of the float32 tensor `flat` to send, with the residual of bucket `key`
        added first and the new residual kept (error feedback). `flat` itself is left as it was
        only without error feedback; with it, it holds the corrected gradient."""
        if self.error_feedback:
            r = self.residuals.get(key)
            if r is not None and r.numel() == flat.numel():
                flat.add_(r)
        wire = flat.to(self.wire_dtype)
        if self.error_feedback:
            self.residuals[key] = flat - wire.to(flat.dtype)
        return wire


def wire_hook(state, bucket):
    """The comm hook: the bucket's average over the group, on the wire at state.wire_dtype."""
    group = state.process_group
    buf = bucket.buffer()
    if state.wire_dtype is None or buf.dtype != torch.float32:
        fut = dist.all_reduce(buf, op=dist.ReduceOp.AVG, group=group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    try:  # buckets are rebuilt after the first step: a residual belongs to its parameters
        key = (bucket.index(), bucket.parameters()[0].data_ptr())
    except (AttributeError, IndexError):
        key = bucket.index()
    wire = state.round(key, buf)
    fut = dist.all_reduce(wire, op=dist.ReduceOp.AVG, group=group, async_op=True).get_future()

    def done(f):
        buf.copy_(f.value()[0])
        return buf

    return fut.then(done)
