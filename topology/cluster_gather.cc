// Kept apart from cluster.cc so that binaries that never gather do not need store_all_gather.
#include "topology/cluster.h"
#include "runtime/error.h"

namespace weft::topo {

ClusterView gather_cluster_view(Store& store, int rank, int size, const NodeSummary& mine, const Binding& binding,
                                Millis timeout) {
  require(size >= 1 && rank >= 0 && rank < size, "gather_cluster_view: rank {} of {}", rank, size);
  RankInfo info{local_node_key(mine), mine, binding};
  std::vector<Bytes> all = store_all_gather(store, "topo/cluster", rank, size, encode_rank_info(info), timeout);
  if (static_cast<int>(all.size()) != size)
    fail(ErrorCode::kInternalError, "gather_cluster_view: got {} records for {} ranks", all.size(), size);
  std::vector<RankInfo> ranks;
  ranks.reserve(all.size());
  for (const auto& b : all) ranks.push_back(decode_rank_info(b));
  return build_cluster_view(std::move(ranks));
}

}  // namespace weft::topo
