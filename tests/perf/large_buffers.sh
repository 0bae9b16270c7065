#!/usr/bin/env bash
# Weft must not collapse on large buffers (as a library that allocates scratch per call does on a
# machine where first-touching fresh pages is slow): in one weft-perf run on 2 ranks, the
# all-reduce bus bandwidth at 128 MiB must be at least a quarter of that at 16 MiB. Best of 3 runs,
# so that one noisy run on a shared machine does not fail it. A quarter, not a half: 16 MiB is
# partly cache-resident here, and a healthy build measured 128 MiB at 0.35-0.48 of 16 MiB in all
# three attempts of one loaded CI run (4 Dec 2026), while the collapses this guards against were
# 4.7x (4.7 against 1.0 GB/s, issue 19's bimodal launches) and more.
# Usage: large_buffers.sh WEFTRUN WEFT_PERF
set -uo pipefail
weftrun=$1 perf=$2
for attempt in 1 2 3; do
  out=$("$weftrun" -np 2 --timeout 240 -- "$perf" -c allreduce -d float -z 1 --check 1 \
        --sizes 16M:10:2,64M:4:1,128M:4:1 --csv - 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then echo "$out"; echo "weft-perf failed (exit $rc)"; exit 1; fi
  # collective,nranks,size,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,...
  read -r bw16 bw128 < <(echo "$out" | awk -F, '$1=="allreduce" && $3==16777216 {a=$10} $1=="allreduce" && $3==134217728 {b=$10} END {print a, b}')
  echo "attempt $attempt: busbw 16 MiB $bw16 GB/s, 128 MiB $bw128 GB/s"
  if [ -n "$bw16" ] && [ -n "$bw128" ] && awk -v a="$bw16" -v b="$bw128" 'BEGIN {exit !(b >= 0.25 * a)}'; then
    echo "large buffers OK"; exit 0
  fi
done
echo "large buffers COLLAPSE: 128 MiB below a quarter of 16 MiB in every attempt"
exit 1
