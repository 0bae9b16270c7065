// Shared helpers of the overlap tests: a small "model" of parameters with rank-dependent integer
// gradients (so sums and averages over 2 or 4 ranks are exact), and the expected results.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "overlap/reducer.h"
#include "support/multirank.h"

namespace weft::overlap::test {

using weft::test::run_ranks;

// Parameter sizes (float32 elements) of a toy model, in forward order.
inline std::vector<uint64_t> toy_sizes() { return {300, 17, 1000, 5, 2048, 64, 777, 1}; }

inline float grad_value(int rank, int param, uint64_t i, int step = 0) {
  return static_cast<float>(((rank + 1) * 3 + param * 5 + static_cast<int>(i % 11) + step * 7) % 23) - 11.0f;
}

// The average (or sum) over n ranks of grad_value(.., step) summed over `steps`.
inline float expected_value(int n, int param, uint64_t i, bool average, std::vector<int> steps = {0}) {
  double s = 0;
  for (int r = 0; r < n; ++r)
    for (int st : steps) s += grad_value(r, param, i, st);
  return static_cast<float>(average ? s / n : s);
}

struct Model {
  std::vector<std::vector<float>> grads;
  std::vector<int> ids;
};

inline Model make_model(Reducer& red, const std::vector<uint64_t>& sizes, bool view_mode) {
  Model m;
  m.grads.resize(sizes.size());
  for (size_t p = 0; p < sizes.size(); ++p) {
    m.grads[p].assign(sizes[p], 0.0f);
    m.ids.push_back(red.add_param(view_mode ? nullptr : m.grads[p].data(), sizes[p], DataType::kFloat32,
                                  "layer" + std::to_string(p)));
  }
  return m;
}

// Where the framework writes parameter p's gradient.
inline float* grad_ptr(Reducer& red, Model& m, int p, bool view_mode) {
  return view_mode ? static_cast<float*>(red.grad_view(p)) : m.grads[p].data();
}

inline void fill_grads(Reducer& red, Model& m, int rank, bool view_mode, int step = 0, bool accumulate = false) {
  for (size_t p = 0; p < m.grads.size(); ++p) {
    float* g = grad_ptr(red, m, static_cast<int>(p), view_mode);
    for (uint64_t i = 0; i < m.grads[p].size(); ++i) {
      float v = grad_value(rank, static_cast<int>(p), i, step);
      g[i] = accumulate ? g[i] + v : v;
    }
  }
}

inline std::vector<int> shuffled(int n, unsigned seed) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

inline std::shared_ptr<Communicator> shared(Communicator& c) { return c.shared_from_this(); }

// Caps small enough that the toy model makes several buckets.
inline ReducerOptions small_caps() {
  ReducerOptions o;
  o.bucket_cap_bytes = 4096;
  o.first_bucket_cap_bytes = 1024;
  return o;
}

}  // namespace weft::overlap::test
