// Event-driven simulation of schedules over a NetGraph (event_sim.h).
#include "collectives/event_sim.h"

#include <algorithm>
#include <deque>
#include <queue>
#include <unordered_map>

#include "runtime/base/error.h"

namespace weft {
namespace {

// Every rank's steps, compacted (a Schedule keeps buffer references the simulation does not need).
struct Steps {
  std::vector<uint64_t> base;        // per rank: its first step's global index; size p + 1
  std::vector<uint8_t> kind;         // StepKind
  std::vector<int32_t> owner, peer;
  std::vector<uint64_t> bytes;
  std::vector<uint32_t> msg;
  std::vector<uint32_t> waiting;     // dependencies not yet done
  std::vector<uint32_t> dep_begin;   // into dependents (global step indices); size steps + 1
  std::vector<uint32_t> dependents;

  void reserve(uint64_t steps, uint64_t deps) {
    kind.reserve(steps), owner.reserve(steps), peer.reserve(steps), bytes.reserve(steps), msg.reserve(steps);
    waiting.reserve(steps), dep_begin.reserve(steps + 1), dependents.reserve(deps);
  }

  void add(const Schedule& s, int rank) {
    const uint64_t b = kind.size();
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const Step& st = s.steps[i];
      kind.push_back(static_cast<uint8_t>(st.kind));
      owner.push_back(rank);
      peer.push_back(st.peer);
      bytes.push_back(st.bytes);
      msg.push_back(st.msg);
      waiting.push_back(s.initial_deps[i]);
      dep_begin.push_back(static_cast<uint32_t>(dependents.size()));
      for (uint32_t k = s.dependents_begin[i]; k < s.dependents_begin[i + 1]; ++k)
        dependents.push_back(static_cast<uint32_t>(b + s.dependents[k]));
    }
    base.push_back(kind.size());
  }
};

constexpr uint64_t kNone = ~0ull;

struct SimFlow {
  uint64_t send = 0, recv = kNone;  // recv: kNone until the receive is posted
  bool arrived = false;
  double remaining = 0, rate = 0, last = 0;  // bytes, bytes per us, us
  uint32_t version = 0;
  double weight = 1;  // its connection's messages queued (itself included): its share of a link
  bool active = false;
  std::vector<int> route;
};

struct Event {
  double t;
  int type;  // kStepDone, kFlowStart, kFlowDone
  uint64_t id;
  uint32_t version;
  uint64_t seq;  // ties go in the order the events were posted
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};
constexpr int kStepDone = 0, kFlowStart = 1, kFlowDone = 2;

class Simulation {
 public:
  Simulation(Steps& s, const topo::NetGraph& g, const EventSimOptions& o)
      : s_(s), g_(g), o_(o), on_edge_(g.edges().size()), edge_bytes_(g.edges().size(), 0.0),
        stamp_(0), edge_mark_(g.edges().size(), 0), residual_(g.edges().size(), 0.0), unfixed_w_(g.edges().size(), 0.0),
        busy_(g.ranks(), 0.0) {}

  EventSimResult run() {
    const uint64_t total = s_.kind.size();
    for (uint64_t i = 0; i < total; ++i)
      if (s_.waiting[i] == 0) ready_.push_back(i);
    drain();
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      now_ = e.t;
      if (e.type == kStepDone) complete(e.id);
      else if (e.type == kFlowStart) ready_flow(e.id);
      else if (flows_[e.id].version == e.version && flows_[e.id].active) finish_flow(e.id);
      drain();
    }
    if (done_ != total)
      fail(ErrorCode::kInternalError, "simulation: {} of {} steps never ran (a schedule waits for a message nobody sends)",
           total - done_, total);
    EventSimResult r;
    r.ran = true;
    r.time_us = end_;
    r.steps = total;
    r.messages = messages_;
    for (size_t e = 0; e < edge_bytes_.size(); ++e)
      if (edge_bytes_[e] > r.busiest_bytes) r.busiest_bytes = edge_bytes_[e], r.busiest_edge = static_cast<int>(e);
    return r;
  }

 private:
  void drain() {
    while (!ready_.empty()) {
      const uint64_t i = ready_.front();
      ready_.pop_front();
      begin(i);
    }
  }

  // Sends are eager, as over Weft's transports (shared-memory staging, UCX eager over TCP): the
  // bytes leave when the send is posted; the receive completes once they have arrived and it is
  // posted, whichever is later.
  void begin(uint64_t i) {
    const auto k = static_cast<StepKind>(s_.kind[i]);
    if (k == StepKind::kSend || k == StepKind::kRecv) {
      const bool send = k == StepKind::kSend;
      const uint64_t src = send ? s_.owner[i] : s_.peer[i], dst = send ? s_.peer[i] : s_.owner[i];
      const uint64_t key = ((src * static_cast<uint64_t>(g_.ranks()) + dst) << 32) | s_.msg[i];
      if (send) {
        const uint64_t f = new_flow(i);
        if (auto it = recvs_.find(key); it != recvs_.end()) {
          attach(f, it->second);
          recvs_.erase(it);
        } else {
          sent_.emplace(key, f);
        }
        post(now_ + g_.alpha_us(s_.owner[i], s_.peer[i]), kFlowStart, f, 0);
        return;
      }
      auto it = sent_.find(key);
      if (it == sent_.end()) {
        recvs_.emplace(key, i);
        return;
      }
      const uint64_t f = it->second;
      sent_.erase(it);
      attach(f, i);
      if (flows_[f].arrived) complete(i), free_.push_back(f);
      return;
    }
    const double us = o_.compute_gbs > 0 ? static_cast<double>(s_.bytes[i]) / (o_.compute_gbs * 1e3) : 0;
    if (us <= 0) return complete(i);
    double& busy = busy_[s_.owner[i]];
    busy = std::max(busy, now_) + us;
    post(busy, kStepDone, i, 0);
  }

  uint64_t new_flow(uint64_t send) {
    uint64_t f;
    if (!free_.empty()) f = free_.back(), free_.pop_back();
    else f = flows_.size(), flows_.emplace_back(), mark_.push_back(0);
    SimFlow& fl = flows_[f];
    fl.send = send, fl.recv = kNone, fl.remaining = static_cast<double>(s_.bytes[send]), fl.active = fl.arrived = false;
    ++messages_;
    return f;
  }

  void attach(uint64_t f, uint64_t recv) {
    const uint64_t send = flows_[f].send;
    if (s_.bytes[send] != s_.bytes[recv])
      fail(ErrorCode::kInternalError, "simulation: rank {} sends {} bytes, rank {} expects {}", s_.owner[send],
           s_.bytes[send], s_.owner[recv], s_.bytes[recv]);
    flows_[f].recv = recv;
  }

  // A message whose latency has passed joins its connection's queue; it moves when it reaches the
  // front (messages from one rank to another go one after the other, as over one connection).
  void ready_flow(uint64_t f) {
    SimFlow& fl = flows_[f];
    if (fl.remaining <= 0) return end_flow(f);
    auto& q = connections_[connection(f)];
    q.push_back(f);
    if (q.size() == 1) return start_flow(f);
    SimFlow& front = flows_[q.front()];
    if (!backlog_shares(f)) return;
    front.weight = static_cast<double>(q.size());
    reshare(front.route, ~0ull);
  }

  // fabric.queues "fifo": a connection between nodes takes a link in proportion to the messages
  // queued on it (TCP through a FIFO queue gives each connection the share of the queue it
  // fills); otherwise, and inside a node, every connection an equal share.
  bool backlog_shares(uint64_t f) const {
    const uint64_t send = flows_[f].send;
    return g_.fifo_queues() && g_.node_of_vertex(s_.owner[send]) != g_.node_of_vertex(s_.peer[send]);
  }

  uint64_t connection(uint64_t f) const {
    const uint64_t send = flows_[f].send;
    return static_cast<uint64_t>(s_.owner[send]) * static_cast<uint64_t>(g_.ranks()) + static_cast<uint64_t>(s_.peer[send]);
  }

  void start_flow(uint64_t f) {
    SimFlow& fl = flows_[f];
    fl.route.clear();
    g_.route(s_.owner[fl.send], s_.peer[fl.send], fl.route);
    fl.active = true;
    fl.last = now_;
    fl.rate = 0;
    fl.weight = backlog_shares(f) ? static_cast<double>(connections_[connection(f)].size()) : 1.0;
    for (int e : fl.route) {
      on_edge_[e].push_back(f);
      edge_bytes_[e] += fl.remaining;
    }
    reshare(fl.route, ~0ull);
  }

  void finish_flow(uint64_t f) {
    SimFlow& fl = flows_[f];
    fl.active = false;
    for (int e : fl.route) {
      auto& v = on_edge_[e];
      v.erase(std::find(v.begin(), v.end(), f));
    }
    reshare(fl.route, f);
    auto it = connections_.find(connection(f));
    it->second.pop_front();
    if (!it->second.empty()) start_flow(it->second.front());
    else connections_.erase(it);
    end_flow(f);
  }

  void end_flow(uint64_t f) {
    SimFlow& fl = flows_[f];
    fl.route.clear();
    fl.arrived = true;
    const uint64_t send = fl.send, recv = fl.recv;
    complete(send);
    if (recv != kNone) complete(recv), free_.push_back(f);  // else the receive, when posted, frees it
  }

  // The flows on these links get new rates and end times: max-min fair shares (water-filling),
  // as TCP connections and credit-based fabrics approach: a link's capacity is split equally
  // among its flows, except that a flow held back elsewhere takes only what it can use and leaves
  // the rest to the others. Solved over the flows that cross these links (and the links those
  // cross); flows further away keep their rates, and what they use of a link is not given out.
  // (Solving every flow linked through some chain, as exact max-min would, changed no result
  // of the tests' and PERFORMANCE.md's cases by more than 1% and made 1024 ranks take minutes.)
  void reshare(const std::vector<int>& route, uint64_t skip) {
    ++stamp_;
    comp_flows_.clear(), comp_edges_.clear();
    for (int e : route)
      if (edge_mark_[e] != stamp_) edge_mark_[e] = stamp_, comp_edges_.push_back(e);
    const size_t direct = comp_edges_.size();
    for (size_t i = 0; i < direct; ++i)
      for (uint64_t f : on_edge_[comp_edges_[i]]) {
        if (f == skip || mark_[f] == stamp_) continue;
        mark_[f] = stamp_;
        comp_flows_.push_back(f);
        for (int x : flows_[f].route)
          if (edge_mark_[x] != stamp_) edge_mark_[x] = stamp_, comp_edges_.push_back(x);
      }
    // A flow outside keeps its rate, cut to the link's weighted share if it had more (so that
    // the link is never oversubscribed and the flows inside get at least their shares).
    for (int e : comp_edges_) {
      double weights = 0;
      for (uint64_t f : on_edge_[e])
        if (f != skip) weights += flows_[f].weight;
      const double cap = g_.edges()[e].gbs * 1e3;
      residual_[e] = cap, unfixed_w_[e] = 0;
      for (uint64_t f : on_edge_[e]) {
        if (mark_[f] == stamp_ || f == skip) continue;
        SimFlow& fl = flows_[f];
        const double fair = cap * fl.weight / weights;
        if (fl.rate > fair) {
          fl.remaining = std::max(0.0, fl.remaining - fl.rate * (now_ - fl.last));
          fl.last = now_, fl.rate = fair, ++fl.version;
          post(now_ + fl.remaining / fair, kFlowDone, f, fl.version);
        }
        residual_[e] -= fl.rate;
      }
    }
    for (uint64_t f : comp_flows_) {
      SimFlow& fl = flows_[f];
      fl.remaining = std::max(0.0, fl.remaining - fl.rate * (now_ - fl.last));
      fl.last = now_;
      fl.rate = -1;
      for (int x : fl.route) unfixed_w_[x] += fl.weight;
    }
    // Water-filling: the link with the smallest share per unit of weight fixes its flows there.
    size_t left = comp_flows_.size();
    while (left > 0) {
      int best = -1;
      double share = 0;
      for (int e : comp_edges_)
        if (unfixed_w_[e] > 1e-12) {
          const double s = std::max(0.0, residual_[e]) / unfixed_w_[e];
          if (best < 0 || s < share) best = e, share = s;
        }
      if (best < 0) break;
      for (uint64_t f : on_edge_[best]) {
        SimFlow& fl = flows_[f];
        if (f == skip || fl.rate >= 0) continue;
        fl.rate = share * fl.weight;
        --left;
        for (int x : fl.route) residual_[x] -= fl.rate, unfixed_w_[x] -= fl.weight;
      }
    }
    for (uint64_t f : comp_flows_) {
      SimFlow& fl = flows_[f];
      ++fl.version;
      post(now_ + (fl.rate > 0 ? fl.remaining / fl.rate : 0), kFlowDone, f, fl.version);
    }
  }

  void post(double t, int type, uint64_t id, uint32_t version) { events_.push({t, type, id, version, seq_++}); }

  void complete(uint64_t i) {
    ++done_;
    end_ = std::max(end_, now_);
    for (uint32_t k = s_.dep_begin[i]; k < s_.dep_begin[i + 1]; ++k)
      if (--s_.waiting[s_.dependents[k]] == 0) ready_.push_back(s_.dependents[k]);
  }

  Steps& s_;
  const topo::NetGraph& g_;
  const EventSimOptions& o_;
  std::vector<std::vector<uint64_t>> on_edge_;
  std::vector<double> edge_bytes_;
  uint32_t stamp_;
  std::vector<uint32_t> mark_;  // per flow: the reshare round that last updated it
  std::vector<uint32_t> edge_mark_;  // per edge: likewise
  std::vector<double> residual_;     // per edge, during a reshare: capacity not yet given out
  std::vector<double> unfixed_w_;    // per edge, during a reshare: the weight of its flows without a rate yet
  std::vector<uint64_t> comp_flows_;
  std::vector<int> comp_edges_;
  std::vector<double> busy_;
  std::vector<SimFlow> flows_;
  std::vector<uint64_t> free_;
  // Steps whose dependencies are done, begun first ready first (at the start in schedule order),
  // as the executor posts them: messages to one peer queue in that order. (Last ready first made
  // a node's reduce-scatter finish its slices backwards, so the rails' first chunks came last.)
  std::deque<uint64_t> ready_;
  std::unordered_map<uint64_t, uint64_t> sent_;   // (from, to, message) -> its flow, until the receive is posted
  std::unordered_map<uint64_t, uint64_t> recvs_;  // (from, to, message) -> the receive posted before the send
  std::unordered_map<uint64_t, std::deque<uint64_t>> connections_;  // (from, to) -> its messages, the first moving
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  double now_ = 0, end_ = 0;
  uint64_t done_ = 0, messages_ = 0, seq_ = 0;
};

}  // namespace

EventSimResult simulate_schedules(const Algorithm& algo, const CollectiveArgs& args, const AlgoOptions& opt,
                                  const topo::NetGraph& g, const EventSimOptions& so) {
  const int p = g.ranks();
  EventSimResult r;
  Steps steps;
  steps.base.push_back(0);
  for (int rank = 0; rank < p; ++rank) {
    const Schedule s = build_schedule(algo, args, rank, p, opt);
    if (rank == 0 && static_cast<double>(s.steps.size()) * p > static_cast<double>(so.max_steps)) {
      r.why_not = fmt::format("about {:.3g} steps (rank 0 has {}), more than the {} it plays",
                              static_cast<double>(s.steps.size()) * p, s.steps.size(), so.max_steps);
      return r;
    }
    if (rank == 0)  // ranks' schedules are about the same size: one allocation instead of doublings
      steps.reserve(std::min<uint64_t>(so.max_steps, s.steps.size() * (p + 1ull)),
                    std::min<uint64_t>(so.max_steps * 4ull, s.dependents.size() * (p + 1ull)));
    steps.add(s, rank);
    if (steps.kind.size() > so.max_steps || steps.dependents.size() > 0xffffffffull) {
      r.why_not = fmt::format("more than {} steps (the first {} ranks have {})", so.max_steps, rank + 1, steps.kind.size());
      return r;
    }
  }
  steps.dep_begin.push_back(static_cast<uint32_t>(steps.dependents.size()));
  Simulation sim(steps, g, so);
  return sim.run();
}

}  // namespace weft
