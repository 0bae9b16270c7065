#!/usr/bin/env bash
# Weft must not touch fresh memory on every large call (as a library that allocates scratch per
# call does: on a machine where first-touching pages is slow that collapsed 128 MiB all-reduces
# 4.7x, issue 19). Counted, not timed: two jobs on 2 ranks, the same 128 MiB all-reduces with 4
# and with 20 timed calls; the 16 extra calls may add at most 64 minor page faults per call and
# rank (a scratch buffer allocated per call would add 32768: 128 MiB of 4 KiB pages).
# Usage: large_buffers.sh WEFTRUN WEFT_PERF
set -uo pipefail
weftrun=$1 perf=$2
faults() {  # prints the ranks' minor faults, one line each
  local out
  out=$("$weftrun" -np 2 --timeout 240 -- /usr/bin/time -f "minflt %R" "$perf" -c allreduce -d float -z 1 --check 1 \
        --sizes "128M:$1:1" --csv - 2>&1)
  local rc=$?
  if [ $rc -ne 0 ]; then echo "$out" >&2; echo "weft-perf failed (exit $rc)" >&2; exit 1; fi
  echo "$out" | awk '$1=="minflt" {print $2}'
}
command -v /usr/bin/time >/dev/null || { echo "large_buffers: /usr/bin/time (package time) is missing"; exit 1; }
few=($(faults 4)) || exit 1
many=($(faults 20)) || exit 1
[ ${#few[@]} = 2 ] && [ ${#many[@]} = 2 ] || { echo "large_buffers: expected two ranks' fault counts"; exit 1; }
echo "minor faults per rank: 4 calls ${few[*]}, 20 calls ${many[*]}"
for r in 0 1; do
  extra=$(( (many[r] - few[r]) / 16 ))
  echo "rank $r: $extra extra faults per 128 MiB call"
  if [ "$extra" -gt 64 ]; then echo "large buffers: fresh pages touched on every call"; exit 1; fi
done
echo "large buffers OK"
