"""Runs tests/torch/check_shrink.py twice and compares: a 4-rank DDP training under
weftrun --keep-going in which rank R dies (SIGKILL) at step K and the survivors shrink and finish
with 3 ranks, then a fresh 3-rank job continued from the state the survivors resumed from. The
survivors' final parameters must equal each other and the fresh job's, bit for bit; weftrun must
name the death and exit 75 (the job finished on the survivors). Exit 0 when all holds, 1 if not,
77 (ctest's skip) when /usr/bin/python3 cannot import torch (1 when the built weft_torch does not import).

  shrink_ddp.py --weftrun PATH --victim R [--die-at K] [--steps N]
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch import can_import, free_port  # noqa: E402

PY = sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))


def run(weftrun, np, args, keep_going, timeout):
    cmd = [weftrun, "-np", str(np), "--bind", "none", "-x", f"MASTER_PORT={free_port()}"]
    if keep_going:
        cmd.append("--keep-going")
    cmd += ["--", PY, os.path.join(HERE, "check_shrink.py")] + args
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    print(f"shrink_ddp.py: {' '.join(cmd[:4])} ...: exit {p.returncode} in {time.time() - t0:.1f} s", flush=True)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weftrun", required=True)
    ap.add_argument("--victim", type=int, required=True)
    ap.add_argument("--die-at", type=int, default=5)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--timeout", type=float, default=100)
    a = ap.parse_args()
    rc = can_import()  # 0, or 77 (no torch: skip) / 1 (the built backend does not import)
    if rc:
        return rc
    import torch

    ok = True
    with tempfile.TemporaryDirectory() as out:
        common = ["--out", out, "--steps", str(a.steps)]
        first = run(a.weftrun, 4, common + ["--victim", str(a.victim), "--die-at", str(a.die_at)], True, a.timeout)
        if first.returncode != 75 or f"rank {a.victim} (pid" not in first.stderr:
            print(f"shrink_ddp.py: FAILED: weftrun should name rank {a.victim}'s death and exit 75, got {first.returncode}")
            ok = False
        finals = sorted(glob.glob(os.path.join(out, "final.*.pt")))
        if len(finals) != 3 or not os.path.exists(os.path.join(out, "recovery.pt")):
            print(f"shrink_ddp.py: FAILED: {len(finals)} survivors saved their parameters (expected 3), recovery state "
                  f"{'saved' if os.path.exists(os.path.join(out, 'recovery.pt')) else 'missing'}")
            return 1
        recovery = torch.load(os.path.join(out, "recovery.pt"))
        print(f"shrink_ddp.py: the survivors resumed at step {recovery['step']}", flush=True)
        second = run(a.weftrun, 3, common + ["--resume", os.path.join(out, "recovery.pt")], False, a.timeout)
        if second.returncode != 0:
            print("shrink_ddp.py: FAILED: the fresh 3-rank run failed")
            return 1
        reference = torch.load(os.path.join(out, "reference.0.pt"))
        for f in finals:
            got = torch.load(f)
            for name, want in reference.items():
                if not torch.equal(got[name], want):
                    diff = (got[name] - want).abs().max().item()
                    print(f"shrink_ddp.py: FAILED: {os.path.basename(f)} {name} differs from the fresh run by up to {diff:g}")
                    ok = False
        if ok:
            print(f"shrink_ddp.py: OK: rank {a.victim} died at step {a.die_at}; 3 survivors finished {a.steps} steps with "
                  f"parameters equal, bit for bit, to a fresh 3-rank run from step {recovery['step']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
