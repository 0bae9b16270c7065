"""Weft as a torch.distributed backend.

    import torch.distributed as dist
    import weft_torch                      # registers the backend "weft"
    dist.init_process_group("weft")        # env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)

Under weftrun, mpirun or Slurm, RANK/WORLD_SIZE/LOCAL_RANK are filled in from the launcher's own
variables when they are absent (see docs/PYTORCH.md); MASTER_ADDR/MASTER_PORT still have to be
given (weftrun -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 ...), except that a local weftrun job
defaults MASTER_ADDR to 127.0.0.1.
"""
import atexit
import os

import torch.distributed as _dist

from ._weft_torch import __version__, create_process_group, drain, dump, gpu_path_built, step_end  # noqa: F401

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
