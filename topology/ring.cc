#include "topology/ring.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "runtime/base/error.h"

namespace weft::topo {

double ring_edge_weight(const Path& p) {
  switch (p.cls) {
    case PathClass::kSelf: return 0;
    case PathClass::kNV: return 1.0 + 1.0 / (1.0 + std::max(0, p.links));
    case PathClass::kPIX: return 1e3;
    case PathClass::kPXB: return 1e5;
    case PathClass::kPHB: return 1e7;
    case PathClass::kNODE: return 1e9;
    case PathClass::kSYS: return 1e11;
  }
  return 1e11;
}

double ring_cost(const std::vector<std::vector<double>>& w, const std::vector<int>& order) {
  double c = 0;
  const size_t n = order.size();
  if (n < 2) return 0;
  for (size_t i = 0; i < n; ++i) c += w[order[i]][order[(i + 1) % n]];
  return c;
}

namespace {

void normalize(std::vector<int>& order) {
  auto it = std::find(order.begin(), order.end(), 0);
  std::rotate(order.begin(), it, order.end());
}

RingResult exact_ring(const std::vector<std::vector<double>>& w) {
  const int n = static_cast<int>(w.size());
  const int m = n - 1;  // vertices 1..n-1 in the mask
  const size_t states = size_t{1} << m;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> dp(states * m, kInf);
  std::vector<int8_t> prev(states * m, -1);
  for (int j = 0; j < m; ++j) dp[(size_t{1} << j) * m + j] = w[0][j + 1];
  for (size_t mask = 1; mask < states; ++mask)
    for (int j = 0; j < m; ++j) {
      if (!(mask >> j & 1)) continue;
      const double cur = dp[mask * m + j];
      if (cur == kInf) continue;
      for (int k = 0; k < m; ++k) {
        if (mask >> k & 1) continue;
        const size_t next = mask | (size_t{1} << k);
        const double c = cur + w[j + 1][k + 1];
        if (c < dp[next * m + k]) {
          dp[next * m + k] = c;
          prev[next * m + k] = static_cast<int8_t>(j);
        }
      }
    }
  const size_t full = states - 1;
  int last = 0;
  double best = kInf;
  for (int j = 0; j < m; ++j) {
    const double c = dp[full * m + j] + w[j + 1][0];
    if (c < best) {
      best = c;
      last = j;
    }
  }
  std::vector<int> rev;
  size_t mask = full;
  for (int j = last; j >= 0;) {
    rev.push_back(j + 1);
    const int p = prev[mask * m + j];
    mask &= ~(size_t{1} << j);
    j = p;
  }
  RingResult r;
  r.order.push_back(0);
  r.order.insert(r.order.end(), rev.rbegin(), rev.rend());
  r.cost = ring_cost(w, r.order);
  r.exact = true;
  return r;
}

bool two_opt(const std::vector<std::vector<double>>& w, std::vector<int>& t) {
  const int n = static_cast<int>(t.size());
  bool improved = false;
  for (int i = 0; i < n - 1; ++i)
    for (int j = i + 2; j < n; ++j) {
      const int a = t[i], b = t[i + 1], c = t[j], d = t[(j + 1) % n];
      if (a == d) continue;
      const double delta = w[a][c] + w[b][d] - w[a][b] - w[c][d];
      if (delta < -1e-9) {
        std::reverse(t.begin() + i + 1, t.begin() + j + 1);
        improved = true;
      }
    }
  return improved;
}

// Moves one vertex to another position when that lowers the cost.
bool or_opt(const std::vector<std::vector<double>>& w, std::vector<int>& t) {
  const int n = static_cast<int>(t.size());
  bool improved = false;
  for (int i = 0; i < n; ++i) {
    const int p = t[(i + n - 1) % n], v = t[i], q = t[(i + 1) % n];
    const double removed = w[p][v] + w[v][q] - w[p][q];
    std::vector<int> rest;
    rest.reserve(n - 1);
    for (int k = 0; k < n; ++k)
      if (k != i) rest.push_back(t[k]);
    double best = removed - 1e-9;
    int at = -1;
    for (int k = 0; k < n - 1; ++k) {
      const int a = rest[k], b = rest[(k + 1) % (n - 1)];
      const double added = w[a][v] + w[v][b] - w[a][b];
      if (added < best) {
        best = added;
        at = k;
      }
    }
    if (at >= 0) {
      rest.insert(rest.begin() + at + 1, v);
      t = std::move(rest);
      improved = true;
    }
  }
  return improved;
}

}  // namespace

RingResult heuristic_ring(const std::vector<std::vector<double>>& w) {
  const int n = static_cast<int>(w.size());
  RingResult best;
  best.cost = std::numeric_limits<double>::infinity();
  const int starts = std::min(n, 32);
  for (int s = 0; s < starts; ++s) {
    std::vector<int> t{s};
    std::vector<bool> used(n, false);
    used[s] = true;
    for (int step = 1; step < n; ++step) {
      int cur = t.back(), pick = -1;
      for (int k = 0; k < n; ++k)
        if (!used[k] && (pick < 0 || w[cur][k] < w[cur][pick])) pick = k;
      used[pick] = true;
      t.push_back(pick);
    }
    for (int round = 0; round < 100; ++round) {
      bool a = two_opt(w, t);
      bool b = or_opt(w, t);
      if (!a && !b) break;
    }
    const double c = ring_cost(w, t);
    if (c < best.cost) {
      best.cost = c;
      best.order = t;
    }
  }
  normalize(best.order);
  best.cost = ring_cost(w, best.order);
  return best;
}

RingResult best_ring(const std::vector<std::vector<double>>& w) {
  const int n = static_cast<int>(w.size());
  for (const auto& row : w)
    if (row.size() != w.size()) fail(ErrorCode::kInvalidArgument, "best_ring: weight matrix is not square");
  if (n <= 3) {
    RingResult r;
    r.order.resize(n);
    std::iota(r.order.begin(), r.order.end(), 0);
    r.cost = ring_cost(w, r.order);
    r.exact = true;
    return r;
  }
  if (n <= kExactRingLimit) return exact_ring(w);
  return heuristic_ring(w);
}

RingResult exhaustive_ring(const std::vector<std::vector<double>>& w) {
  const int n = static_cast<int>(w.size());
  require(n <= 10, "exhaustive_ring: {} vertices is too many", n);
  RingResult best;
  best.cost = std::numeric_limits<double>::infinity();
  best.exact = true;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (n == 0) {
    best.cost = 0;
    return best;
  }
  do {
    const double c = ring_cost(w, order);
    if (c < best.cost) {
      best.cost = c;
      best.order = order;
    }
  } while (std::next_permutation(order.begin() + 1, order.end()));
  return best;
}

}  // namespace weft::topo
