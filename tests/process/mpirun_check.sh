#!/bin/bash
# The real-process check under Open MPI's mpirun (bootstrap through MPI): passes only when mpirun
# exits 0 and every rank, not just rank 0, printed its "rank R: OK N ranks" line.
#   mpirun_check.sh MPIEXEC NP WEFT_TEST_RANK
set -u
mpiexec=$1 np=$2 prog=$3
out=$("$mpiexec" --allow-run-as-root --oversubscribe -np "$np" "$prog" check 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne 0 ]; then echo "mpirun_check: mpirun exited $rc" >&2; exit 1; fi
for ((r = 0; r < np; r++)); do
  if ! grep -q "^rank $r: OK $np ranks" <<<"$out"; then echo "mpirun_check: rank $r did not report OK" >&2; exit 1; fi
done
echo "mpirun_check: all $np ranks OK"
