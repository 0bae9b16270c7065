// An event-driven simulation of an algorithm's schedules over a modelled network: every rank's
// schedule is built as the communicator would build it, and its steps run as the executor runs
// them (a step starts once the steps it waits for are done; the k-th send from a to b meets the
// k-th receive at b from a). Sends are eager, as over Weft's transports: the bytes leave when the
// send is posted, and the receive completes once they have arrived and it is posted. A message
// waits its route's latency (NetGraph::alpha_us), then its bytes flow over the route's links at
// its max-min fair share (water-filling over the messages on the links it crosses and the links
// those cross; every start and end of a message re-shares them), and the messages from one
// rank to another move one after the other, as over one connection (Weft's transports keep a
// queue per peer). Where the cost model's fabric.queues is "fifo" (TCP, as on the emulated
// cluster), the share is weighted: a connection between nodes weighs as many messages as it has
// queued, as a FIFO queue serves each connection in proportion to what it put there (the 4x1
// tree, whose two trees queue slices on the connections of its busiest links, played 1.18x its
// measured time with equal shares and 1.00x with these); "fair" (default) keeps every
// connection's share equal, as credit-based fabrics arbitrate. Reductions and copies take
// bytes / compute_gbs on their rank, one at a time.
// The time of the collective is the moment the last step of any rank ends.
//
// This is the second level of weft-sim's model (the first is the planner's closed form,
// collectives/planner.h): it sees what a formula cannot (pipeline fill, a slice waiting for its
// scratch slot, two trees meeting on one link) at the cost of playing every step: its size is
// the schedules' total steps, O(p^2) for the ring, so it stops at `max_steps`.
#pragma once
#include <cstdint>
#include <string>

#include "collectives/collective.h"
#include "topology/netgraph.h"

namespace weft {

struct EventSimOptions {
  double compute_gbs = 0;                 // reductions, copies, averages: GB/s per rank (0: free)
  uint64_t max_steps = 12'000'000;        // the schedules' total steps it will play (else ran = false; < 2^32)
};

struct EventSimResult {
  bool ran = false;
  std::string why_not;          // when !ran: why (too many steps)
  double time_us = 0;           // the last step's end
  uint64_t steps = 0;           // over all ranks
  uint64_t messages = 0;
  double busiest_bytes = 0;     // bytes over the link that carried the most
  int busiest_edge = -1;        // that link (NetGraph::edges index)
};

// Plays `algo`'s schedules for `args` on every rank of g (g.ranks() ranks) with `opt`.
EventSimResult simulate_schedules(const Algorithm& algo, const CollectiveArgs& args, const AlgoOptions& opt,
                                  const topo::NetGraph& g, const EventSimOptions& so = {});

}  // namespace weft
