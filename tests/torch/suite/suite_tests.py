"""torch's own `_DistTestBase` suite (torch.testing._internal.distributed.distributed_test), set
up the way torch's test/distributed/test_distributed_spawn.py sets it up, with one difference:
the process groups can be Weft's.

The suite itself always sees BACKEND=gloo, so that its many `BACKEND == "gloo"` gates open as they
do for gloo. With WEFT_SUITE_BACKEND=weft every group it creates with the gloo backend (the default
group of every test, `new_group(...)`, `new_group(backend="gloo")`) is created with the weft
backend instead: `torch.distributed.distributed_c10d._new_process_group_helper` gets "weft"
where it was asked for "gloo". The groups are then registered as weft groups, so that
`dist.get_backend()` says "weft" and torch's gloo-only calls (monitored_barrier) refuse them.

This module is imported by run_suite.py in the parent and by every rank that
MultiProcessTestCase spawns (the class is pickled by module name), so everything here depends on
the environment only: BACKEND, WORLD_SIZE, TEMP_DIR (set by run_suite.py before the import),
WEFT_SUITE_BACKEND (gloo or weft) and WEFT_SUITE_NOTES (a directory where a rank writes why it
skipped a test, which torch's harness otherwise only logs).
"""
import functools
import os
import sys
import unittest

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

SUITE_BACKEND = os.environ.get("WEFT_SUITE_BACKEND", "weft")

if SUITE_BACKEND == "weft":
    import weft_torch  # noqa: F401  registers the backend "weft"

    _helper = c10d._new_process_group_helper

    def _weft_instead_of_gloo(group_size, group_rank, global_ranks_in_group, backend, store, *args, **kwargs):
        if dist.Backend(backend) == dist.Backend.GLOO:
            backend = "weft"
        return _helper(group_size, group_rank, global_ranks_in_group, backend, store, *args, **kwargs)

    c10d._new_process_group_helper = _weft_instead_of_gloo
elif SUITE_BACKEND != "gloo":
    raise SystemExit(f"WEFT_SUITE_BACKEND must be weft or gloo, not {SUITE_BACKEND!r}")

from torch.testing._internal.common_distributed import MultiProcessTestCase  # noqa: E402
import torch.testing._internal.distributed.distributed_test as distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)

torch.backends.cuda.matmul.allow_tf32 = False


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    # As test_distributed_spawn.py; WEFT_SUITE_START=fork forks the ranks from the parent instead
    # of spawning fresh interpreters (each spawned rank imports torch and the suite again: about
    # 3 s of CPU per rank and test).
    def setUp(self):
        super().setUp()
        if os.environ.get("WEFT_SUITE_START", "spawn") == "fork":
            # A spawned rank reads INIT_METHOD when it imports the suite, after setUp has pointed
            # it at this test's fresh file; a forked one has the parent's copy: update it.
            distributed_test.INIT_METHOD = os.environ["INIT_METHOD"]
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        else:
            self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

    def __init__(self, method_name="runTest"):
        super().__init__(method_name)
        # A rank that raises unittest.SkipTest inside the test reaches the parent only as the
        # exit code of a "generic" skip, its reason in the log; keep the reason.
        inner = getattr(self, method_name)

        @functools.wraps(inner)  # keeps unittest's skip marks (__unittest_skip__) on the method
        def noting(*args, **kwargs):
            if self.rank == MultiProcessTestCase.MAIN_PROCESS_RANK:
                return inner(*args, **kwargs)
            try:
                return inner(*args, **kwargs)
            except unittest.SkipTest as e:
                _note(method_name, self.rank, str(e))
                raise

        setattr(self, method_name, noting)


def _note(test_name, rank, text):
    notes = os.environ.get("WEFT_SUITE_NOTES")
    if not notes:
        return
    try:
        with open(os.path.join(notes, f"{test_name}.rank{rank}"), "w") as f:
            f.write(text)
    except OSError:
        pass


def test_names():
    return sorted(n for n in dir(DistributedTest._DistTestBase) if n.startswith("test_"))


if __name__ == "__main__":
    sys.exit("run tests/torch/suite/run_suite.py")
