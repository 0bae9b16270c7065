"""Starts a torch test program on N local ranks and checks them: exit 0 when every rank exits 0,
1 otherwise (also when the built weft_torch does not import), 77 (ctest's skip code) when
/usr/bin/python3 cannot import torch.

  launch.py [--via env|weftrun|mpirun] [--weftrun PATH] [--timeout S] -np N program.py [args...]

--via env (default) sets torchrun's variables itself (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR=127.0.0.1, MASTER_PORT=a free port); --via weftrun runs `weftrun -np N -x MASTER_PORT=..
python3 program.py`, --via mpirun `mpirun -np N -x MASTER_ADDR -x MASTER_PORT ...`: the ranks then
find RANK/WORLD_SIZE through weft_torch's mapping of the launcher's variables.
"""
import argparse
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time

PY = sys.executable


def free_port():
    """A free port below the kernel's ephemeral range (as tests/support/spawn.h picks one): a port
    from bind(0) is ephemeral, and any socket bound to port 0 meanwhile may take it first."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
            if lo > 12000:
                low = lo
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random(os.getpid() ^ time.time_ns())
    for _ in range(50):
        port = rng.randrange(10000, low)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("0.0.0.0", port))
                return port
            except OSError:
                continue
    return port


def can_import():
    """77 (skip) when torch itself is missing; 1 (fail) when torch imports but the backend, which
    CMake built (these tests exist only then), does not: CI must not go green without it."""
    r = subprocess.run([PY, "-c", "import torch.distributed"], capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        print(f"SKIP: {PY} cannot import torch ({last}); install python3-torch (scripts/setup)")
        return 77
    r = subprocess.run([PY, "-c", "import weft_torch"], capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        print(f"FAIL: the weft backend was built but {PY} cannot import weft_torch ({last}); "
              f"PYTHONPATH={os.environ.get('PYTHONPATH', '')}")
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-np", type=int, required=True)
    ap.add_argument("--via", choices=["env", "weftrun", "mpirun"], default="env")
    ap.add_argument("--weftrun", default="weftrun")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--may-die", type=int, default=None, metavar="R",
                    help="rank R's exit status is not checked (with --via env, where each rank's is known)")
    ap.add_argument("--expect-transport", default=None, metavar="T",
                    help="(--via env) every rank but --may-die's must report that its communicator runs over "
                         "transport T (shm, ucx): its 'communicator ready: ... transport T' line at WEFT_LOG_LEVEL=info")
    ap.add_argument("program")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    rc = can_import()
    if rc:
        return rc
    port = str(free_port())
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    prog = [PY, a.program] + a.args
    if a.expect_transport and a.via != "env":
        print("launch.py: --expect-transport needs --via env")
        return 2
    if a.expect_transport:
        env["WEFT_LOG_LEVEL"] = "info"
    logs = []
    t0 = time.time()
    if a.via == "env":
        procs = []
        for r in range(a.np):
            e = dict(env, RANK=str(r), WORLD_SIZE=str(a.np), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(a.np),
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            err = None
            if a.expect_transport:  # the rank's stderr, read back below (a file: a pipe could fill up)
                err = tempfile.TemporaryFile(mode="w+")
                logs.append(err)
            procs.append(subprocess.Popen(prog, env=e, stderr=err))
    elif a.via == "weftrun":
        procs = [subprocess.Popen([a.weftrun, "-np", str(a.np), "-x", "MASTER_PORT=" + port, "--"] + prog, env=env)]
    else:
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs = [subprocess.Popen(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(a.np),
                                   "-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "PYTHONPATH"] + prog, env=env)]
    rcs = []
    for p in procs:
        try:
            rcs.append(p.wait(timeout=max(1.0, a.timeout - (time.time() - t0))))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            print(f"launch.py: timed out after {a.timeout:.0f} s")
            return 1
    print(f"launch.py: {a.via} -np {a.np} {os.path.basename(a.program)}: exit codes {rcs} "
          f"in {time.time() - t0:.1f} s")
    transport_ok = True
    for r, log in enumerate(logs):
        log.seek(0)
        text = log.read()
        sys.stderr.write(text)
        m = re.search(r"communicator ready: .* transport (\S+)", text)
        if r != a.may_die and (not m or m.group(1) != a.expect_transport):
            print(f"launch.py: rank {r} ran over {m.group(1) if m else 'no reported transport'}, "
                  f"not {a.expect_transport}")
            transport_ok = False
    if a.may_die is not None and a.via == "env":
        rcs = [rc for r, rc in enumerate(rcs) if r != a.may_die]
    return 0 if transport_ok and all(rc == 0 for rc in rcs) else 1


if __name__ == "__main__":
    sys.exit(main())
