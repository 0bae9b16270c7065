#!/usr/bin/env bash
# 2 emulated nodes x 2 ranks (scripts/netns-cluster): all-reduce with the hierarchical and the flat
# ring algorithm forced and with the automatic choice, results checked by weft-perf, and the shaped
# links must have carried the inter-node bytes; then 3 nodes x 2 ranks, hierarchical, every type
# and op at sizes that divide by nothing (257 and 250007 floats' worth); the same for reduce-scatter
# and all-gather. Skips (77) where network namespaces cannot be made (not root, no netns, no tc).
#   netns_allreduce.sh <scripts/netns-cluster> <weft-perf>
set -u
cluster=$1 perf=$2
"$cluster" --check || exit $?
for algo in hier ring auto; do
  a=(--algo "$algo"); [ "$algo" = auto ] && a=()
  # 1 MiB float sums: every rank's node link carries at least 2*(N-1)/N * 1 MiB / ranks-per-node
  # per call in each direction for hier (> 512 KiB); -n 4 -w 1 plus the check call: >= 3 MiB.
  "$cluster" --nodes 2 --ranks-per-node 2 --rate 2gbit --timeout 120 --expect-bytes $((3 << 20)) -- \
    "$perf" -c allreduce "${a[@]}" --sizes 4K,1000K,1M -n 4 -w 1 --check 1 -d float -o sum || {
    echo "netns_allreduce: $algo failed" >&2
    exit 1
  }
done
"$cluster" --nodes 3 --ranks-per-node 2 --rate 2gbit --timeout 200 -- \
  "$perf" -c allreduce --algo hier --sizes 1028,1000028 -n 1 -w 0 --check 1 -d all -o all || {
  echo "netns_allreduce: hier over 3x2 failed" >&2
  exit 1
}
# Reduce-scatter and all-gather: ring, hier and the automatic choice in one job on 2x2 (each size
# with each algorithm in turn, weftCommSetAlgorithm), then hier on 3x2 for every type and op.
"$cluster" --nodes 2 --ranks-per-node 2 --rate 2gbit --timeout 200 -- \
  "$perf" -c reducescatter,allgather --algo ring,hier,auto --sizes 4K,1000K -n 2 -w 1 --check 1 -d float,int32 -o sum,avg || {
  echo "netns_allreduce: reduce-scatter / all-gather over 2x2 failed" >&2
  exit 1
}
"$cluster" --nodes 3 --ranks-per-node 2 --rate 2gbit --timeout 200 -- \
  "$perf" -c reducescatter,allgather --algo hier --sizes 1028,100028 -n 1 -w 0 --check 1 -d all -o all || {
  echo "netns_allreduce: hier reduce-scatter / all-gather over 3x2 failed" >&2
  exit 1
}
echo "netns_allreduce: hier, ring and the automatic choice correct across 2 and 3 emulated nodes"
