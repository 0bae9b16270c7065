// Bucket assignment: which parameters share a flat buffer, in which order the buffers are
// all-reduced, and a hash of the layout that all ranks must agree on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/datatype.h"

namespace weft::overlap {

struct ParamSpec {
  uint64_t count = 0;
  DataType dtype = DataType::kFloat32;
  std::string name;
};

struct BucketPlan {
  DataType dtype = DataType::kFloat32;
  std::vector<int> params;         // parameter indices, in buffer order
  std::vector<uint64_t> offsets;   // element offset of each parameter in the buffer
  uint64_t count = 0;              // elements in the buffer
  uint64_t bytes() const { return count * dtype_size(dtype); }
};

// Walks `order` (parameter indices: reverse registration order at first, ready order after a
// rebuild) and packs parameters into buckets, one element type per bucket. Each type has one open
// bucket; a parameter that would take it past its cap closes it and opens the next. The first
// bucket of each type is capped at first_cap_bytes, later ones at cap_bytes; a parameter larger
// than the cap gets a bucket of its own. Buckets are returned in the order of their first
// parameter in `order` (the order in which they are expected to fill).
std::vector<BucketPlan> plan_buckets(const std::vector<ParamSpec>& params, const std::vector<int>& order,
                                     uint64_t cap_bytes, uint64_t first_cap_bytes);

// FNV-1a over every bucket's type, size and (parameter index, count) list.
uint64_t layout_hash(const std::vector<BucketPlan>& buckets, const std::vector<ParamSpec>& params);

// "3 buckets: [0] float32 1.0 MiB (4 params) [1] ...", for logs and the benchmark.
std::string describe_layout(const std::vector<BucketPlan>& buckets);

}  // namespace weft::overlap
