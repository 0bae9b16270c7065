// Membership: who the ranks of a communicator are and where they run. Collective over the ranks:
// each publishes its node identity, its machine's boot id (emulated nodes on one machine share
// it) and the cores it may use; every rank derives the same node numbering from that.
#pragma once
#include <string>
#include <vector>

#include "runtime/base/bytes.h"

namespace weft {

class Store;

struct Membership {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // within this rank's node
  int node = 0, num_nodes = 1;         // nodes numbered by their first rank
  std::vector<int> node_of_rank;       // node index of every rank (AlgoOptions::node_of_rank)
  // Most ranks on one machine (boot id), and the CPUs they may use between them (the union of
  // their affinity sets).
  int host_ranks = 1, host_cores = 0;

  // node_id "" = the hostname. A rank that does not publish its record in time fails the exchange
  // on every other rank, naming it; on the world communicator under weftrun also how its process
  // stands, and at once when weftrun saw it end (kWeftrunExitKey).
  static Membership exchange(Store& store, int rank, int size, const std::string& node_id, Millis timeout);
};

// weftrun (launcher/local_job.cc) records in the job's store, outside any communicator's prefix:
// kWeftrunSupervisedKey while it supervises the job, and kWeftrunExitKey + <rank> = how that
// rank's process ended ("exited with status 0").
inline constexpr const char* kWeftrunSupervisedKey = "weftrun/supervised";
inline constexpr const char* kWeftrunExitKey = "weftrun/exit/";

// This machine's hostname ("" when unknown).
std::string host_name();

}  // namespace weft
