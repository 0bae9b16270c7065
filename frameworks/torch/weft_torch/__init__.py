"""Weft as a torch.distributed backend.

    import torch.distributed as dist
    import weft_torch                      # registers the backend "weft"
    dist.init_process_group("weft")        # env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)

Under weftrun, mpirun or Slurm, RANK/WORLD_SIZE/LOCAL_RANK are filled in from the launcher's own
variables when they are absent (see docs/PYTORCH.md); MASTER_ADDR/MASTER_PORT still have to be
given (weftrun -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 ...), except that a local weftrun job
defaults MASTER_ADDR to 127.0.0.1.

After a rank failure, weft_torch.shrink_group(group) returns a group of the survivors (below).
"""
import atexit
import os

import torch.distributed as _dist

from ._weft_torch import __version__, create_process_group, drain, dump, gpu_path_built, step_end  # noqa: F401
from ._weft_torch import _all_reduce_shards, _empty_window, deterministic, set_deterministic  # noqa: F401
from ._weft_torch import shrink as _shrink


def empty_window(group, numel, dtype=None):
    """A 1-D CPU tensor of `numel` zeros of `dtype` (default: torch's default dtype) in a window:
    memory that every rank of the node maps (weftMemAlloc on the weft group `group`). Collective: every rank of
    the group calls it, in the same order, with the same numel and dtype. An all-reduce on the group
    whose tensors are such on every rank (views at any offset, in place or not) runs without
    copies: each rank reduces its share straight from every rank's tensor into all of them."""
    import torch
    return _empty_window(group, int(numel), torch.empty(0, dtype=dtype or torch.get_default_dtype()))


def all_reduce_shards(local, shards, group=None, op=_dist.ReduceOp.SUM):
    """weftAllReduceShards (docs/DETERMINISM.md, "Virtual shards"): `local` stacks this rank's
    shards/world_size shards on its first dimension (rank r holds shards r*shards/world_size, ...);
    returns local.shape[1:], the `shards` shards combined by one fixed binary tree over them, the
    same bits for every rank count that can hold them as aligned subtrees (for a power of two:
    every power of two up to it; others raise, naming the counts that can). op: SUM or AVG
    (divided by `shards`). Collective over `group` (default: the default group), a weft group."""
    c10d = _dist.distributed_c10d
    pg = group if group is not None else c10d._get_default_group()
    if op not in (_dist.ReduceOp.SUM, _dist.ReduceOp.AVG):
        raise ValueError(f"weft: all_reduce_shards takes ReduceOp.SUM or ReduceOp.AVG (got {op})")
    return _all_reduce_shards(pg, local, int(shards), op == _dist.ReduceOp.AVG)


def empty_shared(group, numel, dtype=None):
    """Deprecated: the old name of empty_window (one name for a window in C, C++ and Python)."""
    import warnings
    warnings.warn("weft_torch.empty_shared is deprecated: use weft_torch.empty_window", DeprecationWarning, stacklevel=2)
    return empty_window(group, numel, dtype)


from .ddp import DistributedDataParallel  # noqa: E402,F401
from .hooks import WireState, wire_hook  # noqa: E402,F401

# (torch variable, candidates in order): weftrun, Open MPI, MPICH/PMI, Slurm.
_LAUNCHER_VARS = {
    "RANK": ("WEFT_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"),
    "WORLD_SIZE": ("WEFT_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"),
    "LOCAL_RANK": ("WEFT_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"),
    "LOCAL_WORLD_SIZE": ("WEFT_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"),
}


def map_launcher_env(environ=os.environ):
    """Sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE from weftrun/mpirun/Slurm variables
    when they are absent, so that init_method env:// works under those launchers. Variables that
    are already set (torchrun) are never changed. Returns the names it set."""
    done = []
    if "RANK" in environ:
        return done
    for name, candidates in _LAUNCHER_VARS.items():
        if name in environ:
            continue
        for c in candidates:
            if environ.get(c, "") != "":
                environ[name] = environ[c]
                done.append(name)
                break
    if "MASTER_ADDR" not in environ and environ.get("WEFT_MASTER_ADDR", "").startswith("127."):
        environ["MASTER_ADDR"] = environ["WEFT_MASTER_ADDR"]  # a local weftrun job
        done.append("MASTER_ADDR")
    return done


map_launcher_env()

# Operations still in flight at exit complete (or fail) before Python's finalization, which would
# kill a completion thread that runs a Python Future callback (e.g. a DDP comm hook).
atexit.register(drain)

if not hasattr(_dist.Backend, "WEFT"):
    _dist.Backend.register_backend("weft", create_process_group)

_shrunk_groups = 0


def shrink_group(group=None, exclude_ranks=None):
    """Returns a working process group of the survivors of `group` (default: the default group),
    which must be a weft group. Collective over the survivors: every rank that is still alive
    calls it, after an operation on `group` raised (or on a healthy group, to leave ranks out).

    exclude_ranks: global ranks to leave out, the same on every survivor; None (default): the
    ranks the group saw fail, agreed among the survivors (weftCommShrink with NULL). The survivors
    keep their global ranks and are numbered densely, in their old order, inside the new group;
    the lowest survivor is the new group's rank 0 (dist.get_process_group_ranks(new)[0]).
    Afterwards `group` refuses every collective. Under weftrun the job's store lives in weftrun,
    so any rank, rank 0 included, may have died; with torch's own store (no weftrun) the rank
    that serves it (rank 0) must be alive. See docs/PYTORCH.md, "Surviving a failure".
    """
    global _shrunk_groups
    c10d = _dist.distributed_c10d
    pg = group if group is not None else c10d._get_default_group()
    old_ranks = c10d.get_process_group_ranks(pg)  # global rank of each group rank
    exclude = None
    if exclude_ranks is not None:
        unknown = [r for r in exclude_ranks if r not in old_ranks]
        if unknown:
            raise ValueError(f"weft: shrink_group: exclude_ranks {unknown} are not ranks of the group {old_ranks}")
        exclude = [old_ranks.index(r) for r in exclude_ranks]
    new_pg, members = _shrink(pg, exclude)
    new_ranks = [old_ranks[m] for m in members]
    # Registered as dist.new_group would (without its store barrier, which needs torch's store:
    # gone with rank 0), so that get_rank(group), broadcast(src=...) and DDP work on it.
    _shrunk_groups += 1
    c10d._pg_map[new_pg] = (_dist.Backend("weft"), c10d._pg_map.get(pg, (None, None))[1])
    c10d._pg_names[new_pg] = f"weft_shrunk_{_shrunk_groups}"
    c10d._pg_group_ranks[new_pg] = {g: i for i, g in enumerate(new_ranks)}
    return new_pg

