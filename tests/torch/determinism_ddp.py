"""Reproducible DDP training (issue 47, docs/DETERMINISM.md): runs tests/torch/check_determinism.py
as three jobs (2 ranks, 2 ranks again, 4 ranks; 4 virtual shards) and compares their final
parameters bit for bit:
  - deterministic=True on 2 ranks, in the two 2-rank jobs (random sleeps before each backward): equal;
  - virtual_shards=4 on 2 ranks (twice) and on 4 ranks: equal;
  - the default mode on 4 ranks over the same 4 batches differs from them (else the check could
    not tell orders apart).
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


def job(np, steps, tmp, name):
    """Runs one job; {training: digest of its parameters}."""
    out = os.path.join(tmp, name)
    cmd = [sys.executable, os.path.join(HERE, "launch.py"), "--timeout", "100", "-np", str(np),
           os.path.join(HERE, "check_determinism.py"), "--out", out, "--shards", "4", "--steps", str(steps)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    if p.returncode != 0:
        sys.stdout.write(p.stdout + p.stderr)
        raise SystemExit(f"determinism_ddp.py: {name}: exit {p.returncode}")
    with open(out) as f:
        digests = dict(line.split() for line in f if line.strip())
    print(f"determinism_ddp.py: {name}: " + ", ".join(f"{k} {v[:16]}" for k, v in digests.items()), flush=True)
    return digests


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    rc = can_import()
    if rc:
        return rc
    with tempfile.TemporaryDirectory() as tmp:
        first, second, four = (job(n, a.steps, tmp, name) for n, name in ((2, "2ranks_run1"), (2, "2ranks_run2"), (4, "4ranks")))
    ok = True
    if first["det"] != second["det"]:
        print("FAIL: two deterministic 2-rank runs gave different parameters")
        ok = False
    if not first["shards"] == second["shards"] == four["shards"]:
        print("FAIL: virtual_shards=4 gave different parameters on 2 ranks (twice) and 4 ranks")
        ok = False
    if four["default"] == four["shards"]:
        print("FAIL: the default mode gave the shard runs' parameters: the check cannot tell orders apart")
        ok = False
    print("determinism_ddp.py: OK" if ok else "determinism_ddp.py: FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
