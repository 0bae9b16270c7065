#!/usr/bin/env bash
# weft-sim from the outside: the --json document's shape (one object per collective x GPU count x
# size x algorithm, one automatic choice each, the anchors), --csv, --svg, and bad input refused
# with a message naming the problem and exit status 1.
#   weft_sim_cli.sh WEFT_SIM FIXTURES_DIR
set -u
sim=$1 fixtures=$2
node="$fixtures/dgx-a100-like-8gpu-nvswitch-8nic-nccl.xml"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset WEFT_DIRECT_BYTES WEFT_DIRECT_PIECE_BYTES

"$sim" --input "$node" --gpus 8,16,32 --size 1M,16M -c allreduce,allgather --fabric nics=8,rate=200gbit \
  --json --svg "$out/plot.svg" > "$out/sim.json" 2> "$out/err" || fail "weft-sim --json: $(cat "$out/err")"
python3 - "$out/sim.json" <<'PY' || fail "JSON shape"
import json, sys
j = json.load(open(sys.argv[1]))
rows = j["results"]
keys = {"collective", "gpus", "nodes", "size", "algorithm", "time_us", "busbw_gbps", "auto", "closed_us", "event_us", "level"}
per = {}
for r in rows:
    missing = keys - r.keys()
    assert not missing, f"missing {missing} in {r}"
    assert r["time_us"] > 0 and r["busbw_gbps"] > 0, r
    assert r["level"] in ("closed", "event"), r
    per.setdefault((r["collective"], r["gpus"], r["size"]), []).append(r)
# 2 collectives x 3 GPU counts x 2 sizes, every modelled algorithm of each collective once.
assert len(per) == 12, sorted(per)
for k, rs in per.items():
    algos = [r["algorithm"] for r in rs]
    assert len(algos) == len(set(algos)), (k, algos)
    assert {"ring", "hier"} <= set(algos), (k, algos)
    assert sum(r["auto"] for r in rs) == 1, (k, [(r["algorithm"], r["auto"]) for r in rs])
    # all-gather sizes: a whole number of 4-byte elements per rank
    assert rs[0]["size"] % (4 * (rs[0]["gpus"] if k[0] != "allreduce" else 1)) == 0, rs[0]
assert any(r["algorithm"] == "tree" for r in rows if r["collective"] == "allreduce")
assert len(j["anchors"]) == 4 and all(a["closed"] is not None for a in j["anchors"]), j["anchors"]
assert j["setup"]["cost_model"]["net"]["alpha_us"] > 0
PY
head -c 200 "$out/plot.svg" | grep -q '^<svg' || fail "the SVG does not start with <svg"
[ "$(grep -c '<polyline' "$out/plot.svg")" -ge 8 ] || fail "the SVG has fewer lines than algorithms x panels"
"$sim" --input "$node" --gpus 16 --size 1M --csv --no-anchors > "$out/sim.csv" || fail "--csv"
head -1 "$out/sim.csv" | grep -qx 'collective,gpus,nodes,size,algorithm,closed_us,event_us,time_us,busbw_gbps,auto' ||
  fail "CSV header: $(head -1 "$out/sim.csv")"
[ "$(wc -l < "$out/sim.csv")" -ge 4 ] || fail "CSV rows"

# One node, a small all-reduce: the native rows listed with their closed form, and the automatic
# choice is what the runtime runs there: the direct path, not a schedule (issue 43).
"$sim" --input "$node" --gpus 8,16 --size 8K -c allreduce --json --no-anchors > "$out/one.json" ||
  fail "weft-sim one node"
python3 - "$out/one.json" <<'PY' || fail "native rows on one node"
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
one = {r["algorithm"]: r for r in rows if r["gpus"] == 8}
assert {"direct", "window", "pieces"} <= set(one), sorted(one)
assert one["direct"]["auto"] and one["direct"]["level"] == "closed" and one["direct"]["time_us"] > 0, one["direct"]
assert all(not r["auto"] for r in rows if r["gpus"] == 16 and r["algorithm"] in ("direct", "window", "pieces")), rows
assert not {"direct", "window", "pieces"} & {r["algorithm"] for r in rows if r["gpus"] == 16}, "native rows across nodes"
PY

bad() {  # bad EXPECTED-TEXT ARGS...: exit status 1, the text on stderr, nothing on stdout
  local want=$1; shift
  "$sim" "$@" > "$out/o" 2> "$out/e"; local rc=$?
  [ $rc = 1 ] || fail "weft-sim $*: exit $rc, wanted 1"
  grep -qF -- "$want" "$out/e" || fail "weft-sim $*: stderr '$(cat "$out/e")' does not say '$want'"
  [ ! -s "$out/o" ] || fail "weft-sim $*: printed on stdout: $(head -c 200 "$out/o")"
}
bad "12 GPUs is not a whole number of 8-GPU nodes" --input "$node" --gpus 12 --no-anchors
bad "unknown key 'nicks'" --input "$node" --fabric nicks=8 --no-anchors
bad "queues=lifo (want fifo or fair)" --input "$node" --fabric queues=lifo --no-anchors
bad "bad rate unit in '400gbps!'" --input "$node" --fabric rate=400gbps! --no-anchors
bad "joins node 2 to itself" --input "$node" --links 0-1:1gbit,2-2:1gbit --no-anchors
bad "--gpus: 'x' is not a GPU count" --input "$node" --gpus 8,x --no-anchors
bad "bad size suffix" --input "$node" --size 1Q --no-anchors
bad "'broadcast' (allreduce, reducescatter or allgather)" --input "$node" -c broadcast --no-anchors
bad "'pairwise' has no prediction" --input "$node" --algo pairwise --no-anchors
bad "cannot open" --input "$out/missing.xml" --no-anchors
bad "a mesh (links) has no leaves" --input "$node" --fabric leaf=4 --links 0-1:1gbit --no-anchors
echo "weft-sim CLI: OK"
