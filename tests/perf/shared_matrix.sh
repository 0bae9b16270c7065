#!/usr/bin/env bash
# The shared-window path (weftMemAlloc buffers: all-reduces without copies) in real processes:
# every type x op, in place, out of place and mixed placement (odd ranks the other way), odd sizes
# (1 element, primes, not divisible by the rank count, past a 1 MiB piece), at 2, 3 and 5 ranks;
# every element and the guard bytes checked (weft-perf --check 1 exits non-zero otherwise).
#   shared_matrix.sh <weftrun> <weft-perf>
set -u
weftrun=$1 perf=$2
for n in 2 3 5; do
  for mixed in "" --mixed; do
    out=$("$weftrun" -np $n -- "$perf" -c allreduce --shared $mixed -d all -o all --check 1 \
      --sizes 4:2:1,28:2:1,4084:2:1,262148:2:1,1048604:2:1 2>&1)
    rc=$?
    [ $rc = 0 ] || { echo "$out"; echo "shared_matrix: $n ranks ${mixed:-(same placement)}: weft-perf failed ($rc)" >&2; exit 1; }
    rows=$(grep -cw "window" <<<"$out")
    [ "$rows" -ge 40 ] || { echo "$out"; echo "shared_matrix: $n ranks: only $rows rows on the shared path" >&2; exit 1; }
    echo "shared_matrix: $n ranks ${mixed:-(same placement)}: $rows rows, 0 wrong"
  done
done
echo "shared_matrix OK"
