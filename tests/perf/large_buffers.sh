#!/usr/bin/env bash
# Weft must not touch fresh memory on every large call (as a library that allocates scratch per
# call does: on a machine where first-touching pages is slow that collapsed 128 MiB all-reduces
# 4.7x, issue 19). Counted, not timed: two jobs on 2 ranks, the same 128 MiB all-reduces with 4
# and with 20 timed calls; the 16 extra calls may add at most 64 minor page faults per call and
# rank (a scratch buffer allocated per call would add 32768: 128 MiB of 4 KiB pages).
# Usage: large_buffers.sh WEFTRUN WEFT_PERF
set -uo pipefail
weftrun=$1 perf=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Each rank's count goes to a file of its own (WEFT_RANK): read from the ranks' merged output, two
# ranks' lines could interleave (one CI run found no "minflt" line to parse).
faults() {  # prints the ranks' minor faults, one line each
  local out rc r
  rm -f "$tmp"/minflt.*
  out=$("$weftrun" -np 2 --timeout 240 -- /bin/sh -c 'exec /usr/bin/time -o "$0/minflt.$WEFT_RANK" -f "%R" "$@"' "$tmp" \
        "$perf" -c allreduce -d float -z 1 --check 1 --sizes "128M:$1:1" --csv - 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then echo "$out" >&2; echo "weft-perf failed (exit $rc)" >&2; exit 1; fi
  for r in 0 1; do
    [ -s "$tmp/minflt.$r" ] || { echo "$out" >&2; echo "large_buffers: no fault count from rank $r" >&2; exit 1; }
    tail -n 1 "$tmp/minflt.$r"
  done
}
command -v /usr/bin/time >/dev/null || { echo "large_buffers: /usr/bin/time (package time) is missing"; exit 1; }
few=($(faults 4)) || exit 1
many=($(faults 20)) || exit 1
[ ${#few[@]} = 2 ] && [ ${#many[@]} = 2 ] || { echo "large_buffers: expected two ranks' fault counts, got '${few[*]}' and '${many[*]}'"; exit 1; }
echo "minor faults per rank: 4 calls ${few[*]}, 20 calls ${many[*]}"
for r in 0 1; do
  extra=$(( (many[r] - few[r]) / 16 ))
  echo "rank $r: $extra extra faults per 128 MiB call"
  if [ "$extra" -gt 64 ]; then echo "large buffers: fresh pages touched on every call"; exit 1; fi
done
echo "large buffers OK"
