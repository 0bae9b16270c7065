#!/usr/bin/env bash
# weftCommSetAlgorithm through weft-perf --algo LIST: each size runs with each algorithm in turn in
# one job, and every result is checked. 4 ranks act as 2 nodes of 2 (WEFT_NODE_ID per rank), so
# that hier runs its hierarchical all-reduce, reduce-scatter and all-gather schedules, and auto the
# cost model's choice; ranks of different "nodes" talk through UCX.
#   algorithm_switch.sh <weftrun> <weft-perf>
set -u
weftrun=$1 perf=$2
out=$("$weftrun" -np 4 -- sh -c 'export WEFT_NODE_ID=node$((WEFT_RANK / 2)); exec "$0" "$@"' "$perf" \
  -c allreduce,reducescatter,allgather --algo ring,tree,rhd,hier,auto --sizes 1028,100028 -n 2 -w 1 --check 1 \
  -d float,int8,bfloat16 -o sum,max,avg 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "algorithm_switch: weft-perf failed ($rc)" >&2; exit 1; }
for a in ring tree rhd hier auto; do
  grep -q " $a\$" <<<"$out" || { echo "algorithm_switch: no row for $a" >&2; exit 1; }
done
# An unknown algorithm is refused on every rank with a message naming it.
bad=$("$weftrun" -np 2 -- "$perf" -c allreduce --algo ring,nosuch --sizes 64 -n 1 -w 0 2>&1) && {
  echo "algorithm_switch: --algo ring,nosuch was accepted" >&2; exit 1; }
grep -q "unknown algorithm 'nosuch'" <<<"$bad" || { echo "algorithm_switch: no clear error: $bad" >&2; exit 1; }
echo "algorithm_switch OK"
