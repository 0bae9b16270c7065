// NetGraph: the capacitated network of a job as a directed graph. Vertices are the ranks and the
// things between them: per node a host hub (shared memory / PCIe paths), an NVSwitch (when the
// node's GPU links go through switches), a router (mesh fabrics); per NIC a vertex; leaf
// switches, a spine, or one core switch. Edges carry a bandwidth each way. route(a, b) is the
// path a message from rank a to rank b takes: a direct GPU link, the node's NVSwitch or hub
// inside a node; NIC, leaf (spine, leaf), NIC between nodes; the mesh links in a mesh.
//
// The planner's closed forms charge flows to it (flows_time_us), the packed spanning trees
// (forest.h) pack over its routes and bound their time by its cuts, and weft-sim's event-driven
// simulation shares its edges among the messages in flight.
#pragma once
#include <cstdint>
#include <vector>

#include "topology/cluster.h"
#include "topology/cost.h"
#include "topology/flows.h"

namespace weft::topo {

struct NetEdge {
  int from = 0, to = 0;
  double gbs = 0;  // one direction
};

class NetGraph {
 public:
  NetGraph(const ClusterView& view, const CostModel& model);

  int ranks() const { return ranks_; }
  int vertices() const { return vertices_; }
  const std::vector<NetEdge>& edges() const { return edges_; }
  // The edges a message from rank a to rank b crosses, in order (empty for a == b). Appends to out.
  void route(int a, int b, std::vector<int>& out) const;
  std::vector<int> route(int a, int b) const {
    std::vector<int> out;
    route(a, b, out);
    return out;
  }
  // The latency of one message from a to b: the path class's alpha inside a node, the network's
  // between nodes (a mesh: the sum of its links' alphas along the route).
  double alpha_us(int a, int b) const;
  // What the vertices are, for messages: "rank 3", "node 1 NIC mlx5_0", "leaf 2", ...
  std::string vertex_name(int v) const;
  // The node a vertex belongs to (a rank, its node's hub, NVSwitch, router or NICs); -1 for the
  // switches between nodes.
  int node_of_vertex(int v) const { return node_of_vertex_.at(v); }
  // The cost model's fabric.queues: links between nodes shared in proportion to each connection's
  // queued messages ("fifo") rather than equally ("fair").
  bool fifo_queues() const { return model_.fabric.fifo_queues; }

 private:
  int add_vertex(std::string name, int node = -1);
  int add_pair(int a, int b, double gbs);  // both directions; returns the a -> b edge
  int edge_between(int a, int b) const;    // -1 when none
  // The constructor's parts: inside node n, then between the nodes (a mesh or switches).
  void build_node(int n);
  void build_mesh();
  void build_switched();

  const ClusterView& view_;
  const CostModel& model_;
  int ranks_ = 0, vertices_ = 0;
  std::vector<NetEdge> edges_;
  std::vector<std::string> names_;
  std::vector<int> node_of_vertex_;
  std::vector<std::vector<std::pair<int, int>>> out_;  // per vertex: (to, edge)
  std::vector<int> hub_, nvswitch_, router_;            // per node (-1: none)
  std::vector<int> nic_vertex_;                         // per rank: its NIC's vertex (-1: none)
  // The edge from a rank to its hub, NVSwitch port, router, NIC (the way back is edge + 1).
  std::vector<int> rank_hub_, rank_switch_, rank_router_, rank_nic_;
  std::vector<int> nic_up_;   // per NIC vertex: the edge to its leaf or core switch
  std::vector<int> leaf_up_;  // per leaf vertex: the edge to the spine
  int spine_ = -1;
  // Mesh: per (node a, node b) the node-level path (edge ids between routers).
  std::vector<std::vector<std::vector<int>>> mesh_route_;
  std::vector<std::vector<double>> mesh_alpha_;
};

// Microseconds for all `flows` to move at once over the graph: the busiest edge's bytes over its
// bandwidth (each edge's bytes are the flows routed across it). `busiest` (optional): that edge.
double flows_time_us(const NetGraph& g, const std::vector<Flow>& flows, int* busiest = nullptr);

}  // namespace weft::topo
