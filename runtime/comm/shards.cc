// weftAllReduceShards (shards.h): the shard tree, evaluated on each rank for its own subtree, then
// for the tree's top over the ranks' partial results, block by block: an all-to-all hands every
// rank the partial results of its block, it evaluates the top there, and an all-gather hands the
// blocks back. Both moves are exact, so the bits are the tree's alone.
#include "runtime/comm/shards.h"

#include <cstring>
#include <functional>
#include <list>
#include <vector>

#include <fmt/format.h>

#include "collectives/collective.h"
#include "collectives/reduce_kernels.h"
#include "runtime/base/error.h"
#include "runtime/comm/communicator.h"

namespace weft {

namespace {

int split_point(int lo, int hi) { return lo + (hi - lo + 1) / 2; }

// Whether [lo, hi) is a node of the tree over [0, shards).
bool is_node(int lo, int hi, int shards) {
  int a = 0, b = shards;
  while (a != lo || b != hi) {
    if (b - a <= hi - lo) return false;
    const int m = split_point(a, b);
    if (hi <= m) b = m;
    else if (lo >= m) a = m;
    else return false;
  }
  return true;
}

bool fits(int shards, int ranks) {
  if (ranks < 1 || shards % ranks != 0) return false;
  const int k = shards / ranks;
  for (int r = 0; r < ranks; ++r)
    if (!is_node(r * k, (r + 1) * k, shards)) return false;
  return true;
}

// A node of the tree given whole (a shard, or a rank's partial result), or nullptr to descend.
using Given = std::function<const void*(int lo, int hi)>;

// The value of node [lo, hi): left OP right, down to the nodes `given` has. Temporaries in `temps`.
const void* evaluate(int lo, int hi, const Given& given, DataType t, RedOp op, uint64_t n, std::list<std::vector<char>>& temps) {
  if (const void* p = given(lo, hi)) return p;
  if (hi - lo < 2) fail(ErrorCode::kInternalError, "shard tree: no data for shard {}", lo);
  const int m = split_point(lo, hi);
  const void* left = evaluate(lo, m, given, t, op, n, temps);
  const void* right = evaluate(m, hi, given, t, op, n, temps);
  void* out = temps.emplace_back(n * dtype_size(t)).data();
  reduce_into(t, op, out, left, right, n);  // kAvg: a sum (divided once at the end)
  return out;
}

}  // namespace

std::string shard_layout_problem(int shards, int ranks) {
  if (shards < 1) return fmt::format("the number of virtual shards must be at least 1 (got {})", shards);
  if (fits(shards, ranks)) return "";
  std::vector<int> ok;
  for (int r = 1; r <= shards; ++r)
    if (fits(shards, r)) ok.push_back(r);
  const std::string which = fmt::format("rank counts that can hold {} shards: {}", shards, fmt::join(ok, ", "));
  if (shards % ranks != 0)
    return fmt::format("{} virtual shards cannot be spread evenly over {} ranks ({})", shards, ranks, which);
  const int k = shards / ranks;
  for (int r = 0; r < ranks; ++r)
    if (!is_node(r * k, (r + 1) * k, shards))
      return fmt::format("rank {}'s shards {}..{} are not one subtree of the fixed binary tree over {} shards ({})", r,
                         r * k, (r + 1) * k - 1, shards, which);
  return "";
}

void all_reduce_shards(Communicator& comm, const void* send, void* recv, uint64_t count, int shards, DataType dtype,
                       RedOp op) {
  const int ranks = comm.size(), rank = comm.rank();
  const std::string problem = shard_layout_problem(shards, ranks);
  if (!problem.empty()) fail(ErrorCode::kInvalidArgument, "weftAllReduceShards: {}", problem);
  if (count == 0) return;
  const int k = shards / ranks;
  const uint64_t es = dtype_size(dtype), bytes = count * es;
  std::list<std::vector<char>> temps;
  const char* mine = static_cast<const char*>(send);
  const void* partial = evaluate(rank * k, (rank + 1) * k, [&](int lo, int hi) -> const void* {
    return hi - lo == 1 ? mine + static_cast<uint64_t>(lo - rank * k) * bytes : nullptr;
  }, dtype, op, count, temps);
  if (ranks == 1) {
    if (partial != recv) std::memmove(recv, partial, bytes);
    if (op == RedOp::kAvg) finish_avg(dtype, recv, count, shards);
    return;
  }
  // Rank p reduces elements [p c, (p+1) c) (the count padded with zeros to a multiple of the ranks).
  const uint64_t c = (count + ranks - 1) / ranks, block = c * es;
  std::vector<char> padded(ranks * block, 0), theirs(ranks * block), result(ranks * block);
  std::memcpy(padded.data(), partial, bytes);
  CollectiveArgs move;
  move.kind = CollectiveKind::kAllToAll;
  move.count = c;
  move.dtype = dtype;
  comm.run(move, padded.data(), theirs.data());
  const void* top = evaluate(0, shards, [&](int lo, int hi) -> const void* {
    return hi - lo == k ? theirs.data() + static_cast<uint64_t>(lo / k) * block : nullptr;
  }, dtype, op, c, temps);
  char* own = padded.data() + rank * block;  // this rank's block of the result (its send share is no longer needed)
  std::memcpy(own, top, block);
  if (op == RedOp::kAvg) finish_avg(dtype, own, c, shards);
  move.kind = CollectiveKind::kAllGather;
  comm.run(move, own, result.data());
  std::memcpy(recv, result.data(), bytes);
}

}  // namespace weft
