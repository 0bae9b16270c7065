#!/usr/bin/env python3
"""Time from a rank's death to the first collective that succeeds on the survivors' shrunk
communicator (docs/RELIABILITY.md, "Shrink"), split into detection (kill -> the survivor's error)
and recovery (error -> first collective on the shrunk communicator, i.e. weftCommShrink plus one
all-gather).

  benchmarks/shrink_times.py --weftrun build/launcher/weftrun --rank build/tests/weft-test-rank \\
      [--ranks 4,8,16] [--victims 0,mid] [--repeats 3]

Each run is `weftrun --keep-going -np N --bind none weft-test-rank shrink V`: rank V SIGKILLs
itself 300 ms into a loop of 1 MiB all-reduces, every survivor shrinks with NULL and checks the
new communicator; the rank program prints system-clock times (KILL at, ERROR at, FIRST at), and
this script reports, per run, the median and the worst survivor.
"""
import argparse
import re
import statistics
import subprocess
import sys


def one_run(weftrun, rank_prog, n, victim, timeout):
    cmd = [weftrun, "-np", str(n), "--bind", "none", "--keep-going", rank_prog, "shrink", str(victim)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out = p.stdout
    kill = re.search(r"rank %d: KILL at (\d+)" % victim, out)
    errors = {int(r): int(t) for r, t in re.findall(r"rank (\d+): ERROR at (\d+)", out)}
    firsts = {int(r): int(t) for r, t in re.findall(r"rank (\d+): FIRST at (\d+)", out)}
    oks = len(re.findall(r"rank \d+: OK shrunk", out))
    if p.returncode != 75 or not kill or oks != n - 1 or len(firsts) != n - 1:
        sys.stderr.write(out + p.stderr)
        raise SystemExit(f"shrink_times.py: run failed: -np {n} victim {victim}: exit {p.returncode}, {oks} survivors OK")
    k = int(kill.group(1))
    detect = [errors[r] - k for r in firsts]
    recover = [firsts[r] - errors[r] for r in firsts]
    total = [firsts[r] - k for r in firsts]
    return detect, recover, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weftrun", required=True)
    ap.add_argument("--rank", required=True, help="weft-test-rank")
    ap.add_argument("--ranks", default="4,8,16")
    ap.add_argument("--victims", default="0,mid", help="ranks to kill: numbers, or 'mid' (N/2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    print("| ranks | victim | detection (kill -> error), ms | recovery (error -> first collective), ms | total, ms |")
    print("|---|---|---|---|---|")
    for n in [int(x) for x in a.ranks.split(",")]:
        for v in a.victims.split(","):
            victim = n // 2 if v == "mid" else int(v)
            d_all, r_all, t_all = [], [], []
            for _ in range(a.repeats):
                d, r, t = one_run(a.weftrun, a.rank, n, victim, a.timeout)
                d_all.append(d)
                r_all.append(r)
                t_all.append(t)

            def fmt(runs):
                return ", ".join(f"{statistics.median(x):.0f} (max {max(x)})" for x in runs)

            print(f"| {n} | {victim} | {fmt(d_all)} | {fmt(r_all)} | {fmt(t_all)} |", flush=True)


if __name__ == "__main__":
    main()
