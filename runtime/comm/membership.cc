#include "runtime/comm/membership.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include <fmt/format.h>

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

// The CPUs this process may use, as hex words ("ff.0.1": CPUs 0-7 and 128): ranks bound to one
// core each (mpirun --bind-to core) share a machine's cores without outnumbering them, so the
// machine's cores are the union of its ranks' sets, not the smallest set.
std::string usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) == 0) {
    CPU_ZERO(&set);
    const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int c = 0; c < n && c < CPU_SETSIZE; ++c) CPU_SET(c, &set);
  }
  std::vector<uint64_t> words(CPU_SETSIZE / 64, 0);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) words[c / 64] |= uint64_t{1} << (c % 64);
  while (words.size() > 1 && words.back() == 0) words.pop_back();
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += fmt::format("{}{:x}", i ? "." : "", words[i]);
  return out;
}

// ORs a usable_cpus() record into `into`; false when it is malformed.
bool merge_cpus(const std::string& text, std::vector<uint64_t>& into) {
  size_t i = 0, pos = 0;
  while (pos <= text.size()) {
    const size_t dot = std::min(text.find('.', pos), text.size());
    if (dot == pos) return false;
    char* end = nullptr;
    const std::string word = text.substr(pos, dot - pos);
    const uint64_t v = std::strtoull(word.c_str(), &end, 16);
    if (*end != '\0') return false;
    if (into.size() <= i) into.resize(i + 1, 0);
    into[i++] |= v;
    pos = dot + 1;
  }
  return true;
}

// The job's store under the world communicator's store ("world<g>/" over the job's store), or
// nullptr for any other communicator (its ranks are not the job's: weftrun's record does not apply).
Store* job_store_of_world(Store& store) {
  auto* world = dynamic_cast<PrefixStore*>(&store);
  if (!world || world->prefix().rfind("world", 0) != 0 || dynamic_cast<PrefixStore*>(world->base().get())) return nullptr;
  return world->base().get();
}

// Every rank's node record, waited for in slices: a rank that cannot come any more (weftrun saw its
// process end) fails the start-up at once, and one that did not come within the timeout fails it
// naming every rank missing and, under weftrun, how their processes stand.
std::vector<Bytes> join(Store& store, int rank, int size, const Bytes& mine, Millis timeout) {
  Store* job = job_store_of_world(store);
  store.set(fmt::format("node/{}", rank), mine);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<Bytes> all(size);
  all[rank] = mine;
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    const std::string key = fmt::format("node/{}", r);
    for (;;) {
      const auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
      try {
        all[r] = store.get(key, std::max(Millis(1), job ? std::min(left, Millis(250)) : left));
        break;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kTimeout) throw;
      }
      const bool ended = job && job->check(kWeftrunExitKey + std::to_string(r));
      if (!ended && std::chrono::steady_clock::now() < deadline) continue;
      std::vector<std::string> missing;
      for (int q = 0; q < size; ++q) {
        if (q == rank || store.check(fmt::format("node/{}", q))) continue;
        std::string how;
        if (job && job->check(kWeftrunExitKey + std::to_string(q)))
          how = fmt::format(" (weftrun: its process {})", to_string(job->get(kWeftrunExitKey + std::to_string(q), Millis(1000))));
        else if (job && job->check(kWeftrunSupervisedKey))
          how = " (weftrun: its process is running; it has not called weftCommInit)";
        missing.push_back(fmt::format("rank {}{}", q, how));
      }
      if (missing.empty()) continue;  // it joined meanwhile
      std::string names;
      for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
      fail(ErrorCode::kTimeout, "start-up: {} of {} ranks never joined{}: {}", missing.size(), size,
           ended ? std::string() : fmt::format(" within the timeout of {} ms (WEFT_TIMEOUT_MS)", timeout.count()), names);
    }
  }
  return all;
}

}  // namespace

Membership Membership::exchange(Store& store, int rank, int size, const std::string& node_id_in, Millis timeout) {
  Membership m;
  m.rank = rank;
  m.size = size;
  const std::string node_id = node_id_in.empty() ? host_name() : node_id_in;
  // The cost model charges the CPU that ranks on one machine queue for when they outnumber its
  // cores (topo::HostCpu): with the node id go the machine and the cores.
  auto gathered = join(store, rank, size, to_bytes(node_id + '\n' + machine_id() + '\n' + usable_cpus()), timeout);
  std::vector<std::string> ids(size);
  std::map<std::string, std::pair<int, std::vector<uint64_t>>> machines;  // ranks, union of their CPUs
  for (int r = 0; r < size; ++r) {
    std::string v = to_string(gathered[r]);
    const size_t b = v.rfind('\n'), a = b == std::string::npos ? b : v.rfind('\n', b - 1);
    if (a == std::string::npos) fail(ErrorCode::kInternalError, "rank {} published a malformed node record", r);
    ids[r] = v.substr(0, a);
    auto& mc = machines[v.substr(a + 1, b - a - 1)];
    mc.first++;
    if (!merge_cpus(v.substr(b + 1), mc.second)) fail(ErrorCode::kInternalError, "rank {} published a malformed CPU set", r);
  }
  for (const auto& [id, mc] : machines) {
    int cores = 0;
    for (uint64_t w : mc.second) cores += __builtin_popcountll(w);
    if (mc.first > m.host_ranks) m.host_ranks = mc.first, m.host_cores = cores;
  }
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
