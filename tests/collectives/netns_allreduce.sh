#!/usr/bin/env bash
# 2 emulated nodes x 2 ranks (scripts/netns-cluster): all-reduce with the hierarchical and the flat
# ring algorithm forced, results checked by weft-perf, and the shaped links must have carried the
# inter-node bytes. Skips (77) where network namespaces cannot be made (not root, no netns, no tc).
#   netns_allreduce.sh <scripts/netns-cluster> <weft-perf>
set -u
cluster=$1 perf=$2
"$cluster" --check || exit $?
for algo in hier ring; do
  # 1 MiB float sums: every rank's node link carries at least 2*(N-1)/N * 1 MiB / ranks-per-node
  # per call in each direction for hier (> 512 KiB); -n 4 -w 1 plus the check call: >= 3 MiB.
  "$cluster" --nodes 2 --ranks-per-node 2 --rate 2gbit --timeout 120 --expect-bytes $((3 << 20)) -- \
    "$perf" -c allreduce --algo "$algo" --sizes 4K,1000K,1M -n 4 -w 1 --check 1 -d float -o sum || {
    echo "netns_allreduce: $algo failed" >&2
    exit 1
  }
done
echo "netns_allreduce: hier and ring correct across 2 emulated nodes"
