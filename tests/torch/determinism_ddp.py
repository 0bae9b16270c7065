"""Reproducible DDP training (issue 47, docs/DETERMINISM.md): runs tests/torch/check_determinism.py
as several jobs and compares their final parameters bit for bit:
  - deterministic=True on 3 ranks, twice (random sleeps before each backward): equal;
  - virtual_shards=4 on 2 ranks, on 4 ranks and on 1 rank: equal;
  - the default mode on 2 and on 4 ranks over the same 4 shards' data differs from the shard run
    (else the check could not tell).
Exit 0 when all holds, 1 if not, 77 (ctest's skip) when /usr/bin/python3 cannot import torch.

  determinism_ddp.py [--steps N]
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch import can_import  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def job(np, extra, tmp, name):
    out = os.path.join(tmp, name)
    cmd = [sys.executable, os.path.join(HERE, "launch.py"), "--timeout", "100", "-np", str(np),
           os.path.join(HERE, "check_determinism.py"), "--out", out] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    if p.returncode != 0:
        sys.stdout.write(p.stdout + p.stderr)
        raise SystemExit(f"determinism_ddp.py: {name}: exit {p.returncode}")
    with open(out) as f:
        digest = f.read().strip()
    print(f"determinism_ddp.py: {name}: {digest[:16]}", flush=True)
    return digest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    rc = can_import()
    if rc:
        return rc
    steps = ["--steps", str(a.steps)]
    with tempfile.TemporaryDirectory() as tmp:
        runs = [job(3, steps, tmp, f"deterministic_3ranks_run{i}") for i in (1, 2)]
        shards = [job(n, steps + ["--shards", "4"], tmp, f"shards4_{n}ranks") for n in (2, 4, 1)]
        default = job(4, steps + ["--default"], tmp, "default_4ranks")
    ok = True
    if runs[0] != runs[1]:
        print("FAIL: two deterministic 3-rank runs gave different parameters")
        ok = False
    if len(set(shards)) != 1:
        print(f"FAIL: virtual_shards=4 gave different parameters on 2, 4 and 1 ranks: {shards}")
        ok = False
    if default == shards[1]:
        print("FAIL: the default mode gave the shard run's parameters: the check cannot tell orders apart")
        ok = False
    print("determinism_ddp.py: OK" if ok else "determinism_ddp.py: FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
