#include "runtime/comm/membership.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include "runtime/base/error.h"
#include "runtime/store/store.h"

namespace weft {

std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

namespace {

// The machine's identity: its boot id (emulated nodes on one machine share it), else the hostname.
std::string machine_id() {
  std::string machine;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, machine);
  return machine.empty() ? host_name() : machine;
}

// The cores this process may use.
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  return cores > 0 ? cores : static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

Membership Membership::exchange(Store& store, int rank, int size, const std::string& node_id_in, Millis timeout) {
  Membership m;
  m.rank = rank;
  m.size = size;
  const std::string node_id = node_id_in.empty() ? host_name() : node_id_in;
  // The cost model charges the CPU that ranks on one machine queue for when they outnumber its
  // cores (topo::HostCpu): with the node id go the machine and the cores.
  auto gathered = store_all_gather(store, "node", rank, size,
                                   to_bytes(node_id + '\n' + machine_id() + '\n' + std::to_string(usable_cores())), timeout);
  std::vector<std::string> ids(size);
  std::map<std::string, std::pair<int, int>> machines;  // ranks, fewest cores
  for (int r = 0; r < size; ++r) {
    std::string v = to_string(gathered[r]);
    const size_t b = v.rfind('\n'), a = b == std::string::npos ? b : v.rfind('\n', b - 1);
    if (a == std::string::npos) fail(ErrorCode::kInternalError, "rank {} published a malformed node record", r);
    ids[r] = v.substr(0, a);
    auto& mc = machines.try_emplace(v.substr(a + 1, b - a - 1), 0, 1 << 30).first->second;
    mc.first++;
    mc.second = std::min(mc.second, std::atoi(v.c_str() + b + 1));
  }
  for (const auto& [id, mc] : machines)
    if (mc.first > m.host_ranks) m.host_ranks = mc.first, m.host_cores = mc.second;
  std::vector<std::string> nodes;
  m.local_rank = 0;
  m.local_size = 0;
  for (int r = 0; r < size; ++r) {
    if (std::find(nodes.begin(), nodes.end(), ids[r]) == nodes.end()) nodes.push_back(ids[r]);
    if (ids[r] == node_id) {
      if (r < rank) m.local_rank++;
      m.local_size++;
    }
  }
  m.num_nodes = static_cast<int>(nodes.size());
  m.node_of_rank.assign(size, 0);
  for (int r = 0; r < size; ++r)
    m.node_of_rank[r] = static_cast<int>(std::find(nodes.begin(), nodes.end(), ids[r]) - nodes.begin());
  m.node = static_cast<int>(std::find(nodes.begin(), nodes.end(), node_id) - nodes.begin());
  return m;
}

}  // namespace weft
