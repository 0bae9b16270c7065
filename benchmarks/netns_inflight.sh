#!/usr/bin/env bash
# Operations in flight across emulated nodes (issue 43's targets): K all-reduces of one size posted at
# once (weft-perf -z 0: all issued, then waited) against the same K one after another (-z 1), on
# scripts/netns-cluster with a link delay. Launches alternate between the two; each launch times
# ROWS batches of K (the first after K warm-up calls), time per batch = weft-perf's time per call
# (max over ranks, -a 3) x K, out-of-place. Prints every batch, then per mode the median and the
# worst over all batches and the ratio of the medians (posted at once / one after another).
#
#   netns_inflight.sh <weft-perf> NODES RANKS_PER_NODE SIZE K [LAUNCHES=5] [ROWS=3] [cluster options...]
#   e.g. netns_inflight.sh build/benchmarks/weft_perf/weft-perf 2 1 4K 64 5 3 --delay 1ms --rate 1gbit
set -u
perf=$1 nodes=$2 rpn=$3 size=$4 k=$5 launches=${6:-5} rows=${7:-3}
shift $(( $# < 7 ? $# : 7 ))
cluster=$(dirname "$0")/../scripts/netns-cluster
sizes="$size:$k:$k"
for ((r = 1; r < rows; r++)); do sizes+=",$size:$k:0"; done
declare -A all
for ((l = 0; l < launches; l++)); do
  for z in 0 1; do
    out=$("$cluster" --nodes "$nodes" --ranks-per-node "$rpn" --timeout 300 "$@" -- \
      "$perf" -c allreduce --sizes "$sizes" -z $z -a 3 --check 1 -d float -o sum 2>&1)
    t=$(awk -v k="$k" '/^ +[0-9]+ +[0-9]+ +float/ { if ($9 != 0) bad = 1; printf "%.2f ", $6 * k / 1000 } END { exit bad }' <<< "$out") || {
      echo "netns_inflight: wrong results or a failed launch:"; echo "$out"; exit 1; }
    [ -n "$t" ] || { echo "netns_inflight: no figures:"; echo "$out"; exit 1; }
    echo "launch $l -z $z: $t(ms per batch of $k)"
    all[$z]+="$t"
  done
done
python3 - "${all[0]}" "${all[1]}" "$nodes" "$rpn" "$size" "$k" <<'PY'
import statistics, sys
at_once, serial = ([float(x) for x in s.split()] for s in sys.argv[1:3])
n, rpn, size, k = sys.argv[3:]
ma, ms = statistics.median(at_once), statistics.median(serial)
print(f"{n} nodes x {rpn}, {k} x {size}: posted at once median {ma:.1f} ms, worst {max(at_once):.1f}; "
      f"one after another median {ms:.1f} ms, worst {max(serial):.1f}; ratio of medians {ma / ms:.2f} "
      f"({len(at_once)} batches each)")
PY
