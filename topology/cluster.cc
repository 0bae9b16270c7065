#include "topology/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "runtime/base/error.h"

namespace weft::topo {

int ClusterView::max_ranks_per_node() const {
  int m = 0;
  for (const auto& r : ranks_of_node) m = std::max(m, static_cast<int>(r.size()));
  return m;
}

bool ClusterView::uniform() const {
  for (const auto& r : ranks_of_node)
    if (r.size() != ranks_of_node.front().size()) return false;
  return true;
}

ClusterView build_cluster_view(std::vector<RankInfo> ranks) {
  ClusterView v;
  std::map<std::string, int> index;
  for (size_t r = 0; r < ranks.size(); ++r) {
    auto& info = ranks[r];
    auto [it, inserted] = index.emplace(info.node_key, static_cast<int>(v.nodes.size()));
    if (inserted) {
      v.node_keys.push_back(info.node_key);
      v.nodes.push_back(std::move(info.summary));
      v.ranks_of_node.emplace_back();
    }
    const int node = it->second;
    const NodeSummary& s = v.nodes[node];
    const Binding& b = info.binding;
    if (b.gpu >= s.num_gpus() || b.gpu < -1)
      fail(ErrorCode::kInvalidArgument, "cluster view: rank {} binds GPU {} but node '{}' has {} GPUs", r, b.gpu,
           info.node_key, s.num_gpus());
    if (!b.nic.empty() && s.nic_index(b.nic) < 0)
      fail(ErrorCode::kInvalidArgument, "cluster view: rank {} binds NIC '{}' which node '{}' does not have", r, b.nic,
           info.node_key);
    v.local_rank.push_back(static_cast<int>(v.ranks_of_node[node].size()));
    v.ranks_of_node[node].push_back(static_cast<int>(r));
    v.node_of_rank.push_back(node);
    v.bindings.push_back(b);
  }
  return v;
}

ClusterView make_uniform_cluster(const NodeSummary& node, int nodes, int ranks_per_node, const std::string& key_prefix) {
  require(nodes >= 1 && ranks_per_node >= 1, "cluster: need at least one node and one rank per node ({} x {})", nodes,
          ranks_per_node);
  require(static_cast<long long>(nodes) * ranks_per_node <= (1 << 20), "cluster: {} x {} ranks is too many", nodes,
          ranks_per_node);
  auto bindings = default_bindings(node, ranks_per_node);
  std::vector<RankInfo> ranks;
  for (int n = 0; n < nodes; ++n)
    for (int l = 0; l < ranks_per_node; ++l) {
      NodeSummary s = node;
      s.hostname = fmt::format("{}{}", key_prefix, n);
      ranks.push_back({s.hostname, std::move(s), bindings[l]});
    }
  return build_cluster_view(std::move(ranks));
}

std::string local_node_key(const NodeSummary& s) {
  const char* id = std::getenv("WEFT_NODE_ID");
  if (id && *id) return id;
  if (!s.hostname.empty()) return s.hostname;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) return host;
  return "localhost";
}

Bytes encode_rank_info(const RankInfo& info) {
  nlohmann::json j{{"node_key", info.node_key}, {"summary", to_json(info.summary)}, {"binding", to_json(info.binding)}};
  return to_bytes(j.dump());
}

RankInfo decode_rank_info(const Bytes& bytes) {
  nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("node_key") || !j["node_key"].is_string() ||
      !j.contains("summary") || !j.contains("binding"))
    fail(ErrorCode::kRemoteError, "cluster view: malformed rank topology record ({} bytes)", bytes.size());
  return RankInfo{j["node_key"].get<std::string>(), summary_from_json(j["summary"]), binding_from_json(j["binding"])};
}

}  // namespace weft::topo
