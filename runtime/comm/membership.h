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

  // node_id "" = the hostname.
  static Membership exchange(Store& store, int rank, int size, const std::string& node_id, Millis timeout);
};

// This machine's hostname ("" when unknown).
std::string host_name();

}  // namespace weft
