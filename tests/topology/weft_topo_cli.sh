#!/usr/bin/env bash
# weft-topo plan from the outside (issue 43): the algorithm table's native rows are listed with
# their prediction (or "no prediction"), and "Weft algorithm" / weft_algorithm is what the runtime
# would run: the shared-memory direct path's native row on one node where it takes the call,
# pieces where ranks outnumber cores, a schedule across nodes, pairwise for all-to-all.
#   weft_topo_cli.sh WEFT_TOPO FIXTURES_DIR
set -u
topo=$1 fixtures=$2
node="$fixtures/dgx-a100-like-8gpu-nvswitch-8nic-nccl.xml"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset WEFT_DIRECT_BYTES WEFT_DIRECT_PIECE_BYTES WEFT_ALGO

runs() {  # runs WANT ARGS...: weft_algorithm of `plan --json ARGS`
  local want=$1; shift
  "$topo" plan --input "$node" --json "$@" > "$out/j" 2> "$out/e" || fail "weft-topo plan $*: $(cat "$out/e")"
  local got
  got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["weft_algorithm"])' "$out/j") || fail "JSON"
  [ "$got" = "$want" ] || fail "weft-topo plan $*: runs '$got', wanted '$want'"
}
runs direct -n 1 -r 4 -s 8 -c allreduce
runs direct -n 1 -r 4 -s 4K -c allgather   # 1 KiB per rank
runs direct -n 1 -r 4 -s 0 -c barrier
runs pieces -n 1 -r 4 -s 1M -c allreduce --host-ranks 8 --host-cores 2
runs pairwise -n 1 -r 4 -s 64K -c alltoall
WEFT_DIRECT_BYTES=0 runs rhd -n 1 -r 4 -s 8 -c allreduce
t=$("$topo" plan --input "$node" --json -n 2 -r 4 -s 8 -c allreduce | python3 -c 'import json,sys; print(json.load(sys.stdin)["weft_algorithm"])')
[ "$t" != direct ] && [ -n "$t" ] || fail "two nodes ran '$t'"

# The native rows with their predictions, and the rows without one said plainly.
"$topo" plan --input "$node" -n 1 -r 4 -s 8 -c allreduce > "$out/t" || fail "text plan"
for row in "direct   one_round" "window   shared_window" "pieces   direct_pieces"; do
  grep -F -- "$row" "$out/t" | grep -q "us   .*(native row)" || fail "no prediction line for '$row': $(cat "$out/t")"
done
grep -q "hier     hierarchical         no prediction" "$out/t" || fail "hier's missing prediction not said: $(cat "$out/t")"
grep -q "^Weft algorithm (WEFT_ALGO unset): direct (a native row" "$out/t" || fail "runtime choice line: $(cat "$out/t")"
"$topo" plan --input "$node" -n 1 -r 4 -s 64K -c alltoall > "$out/t" || fail "alltoall plan"
grep -q "pairwise .* no prediction" "$out/t" || fail "alltoall: $(cat "$out/t")"
"$topo" plan --input "$node" --json -n 1 -r 4 -s 64K -c alltoall > "$out/j" || fail "alltoall --json"
python3 - "$out/j" <<'PY' || fail "JSON: no_prediction"
import json, sys
j = json.load(open(sys.argv[1]))
assert [r["id"] for r in j["no_prediction"]] == ["pairwise"], j["no_prediction"]
PY
"$topo" plan --input "$node" --json -n 1 -r 4 -s 8 -c allreduce | python3 -c '
import json, sys
j = json.load(sys.stdin)
native = {c["id"] for c in j["candidates"] if c["native"]}
assert native == {"direct", "window", "pieces"}, native
assert all(c["predicted_us"] > 0 for c in j["candidates"]), j["candidates"]
' || fail "native candidates"

"$topo" plan --input "$node" -c allreduce2 > "$out/o" 2> "$out/e"; rc=$?
[ $rc = 1 ] && grep -q "unknown collective 'allreduce2' (allreduce, " "$out/e" || fail "bad collective: exit $rc, $(cat "$out/e")"
echo "weft_topo_cli OK"
